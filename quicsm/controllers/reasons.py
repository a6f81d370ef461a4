"""Why ``identify`` abstains, in words: which evidence a trace lacked, and what run would settle it.

An ``unknown`` answer names the evidence that was missing for the controller to be told (a loss
response, a third reduction, growth between cuts, growth below the window before a cut, a path
whose RTT a wall-clock fit can use) and the kind of run that would give it. The words are built
from the feature row alone, so they say the same thing wherever the row comes from, and
:func:`count` writes a count with its noun in the right number ("1 window reduction", "2 window
reductions"). A trace whose cuts were undone (the sender found its losses spurious and restored
its window, ``n_undone``) and that grew after none of the others says so: no growth after a cut
was there to be seen; and whether any was undone into slow start (``n_undone_slow_start``,
which names Reno by its own rule when the factor is one exact Reno factor).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from quicsm.controllers.features import MIN_EPOCH_RTTS, RTT_RESOLUTION_MS

#: nouns whose plural is not the singular with an "s"
_PLURALS: Final[dict[str, str]] = {
    "loss": "losses",
    "collapse to the minimum window": "collapses to the minimum window",
    "window reduction": "window reductions",
    "reduction": "reductions",
}


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun`` in the number ``n`` asks for: ``count(1, "reduction")`` is
    "1 reduction", ``count(2, "reduction")`` "2 reductions"."""
    if n == 1:
        return f"{n} {noun}"
    return f"{n} {plural or _PLURALS.get(noun) or noun + 's'}"


#: the runs that give each missing piece of evidence (words shown after "would settle it:")
RUN_FOR_LOSS_RESPONSE: Final = (
    "a run where the sender meets loss or overflows a drop-tail queue (a rate cap with a short "
    "queue, or 0.5-1 % loss) long enough for three window reductions or more"
)
RUN_FOR_MORE_CUTS: Final = (
    "a longer transfer or a lossier path (three reductions or more, with growth between them)"
)
RUN_FOR_GROWTH: Final = (
    "a longer transfer with light loss (e.g. 0.2 % at 20 Mbit/s and 40 ms), so that the window "
    f"grows for {MIN_EPOCH_RTTS:.0f} rounds or more between cuts"
)
RUN_FOR_BELOW_MAX: Final = (
    "a transfer where the sender stays window-limited for 20 rounds or more after each cut (a "
    "rate cap with a queue of about one bandwidth-delay product, light loss)"
)
RUN_FOR_LABELS: Final = (
    "labelled runs of this stack and controller (a lab draw under these conditions) to fit a box on"
)
RUN_FOR_RTT: Final = f"a run on a path with an RTT of {RTT_RESOLUTION_MS:.0f} ms or more"
RUN_FOR_STANDING_CUT: Final = (
    "a path that drops packets (a queue shorter than the bandwidth-delay product, or random "
    "loss) rather than only reordering them"
)


def missing_evidence(row: Mapping[str, Any], *, min_below_rounds: float) -> list[str]:
    """The evidence a sender's feature row lacks that tells Reno from CUBIC, in words; empty
    when it has all of it. ``min_below_rounds`` is the number of window-limited rounds below
    the last maximum that make that growth evidence."""
    out = []
    cuts, undone = int(row.get("n_reductions") or 0), int(row.get("n_undone") or 0)
    if undone and not row.get("n_cut_fits") and not row.get("n_epochs"):
        into = "" if row.get("n_undone_slow_start") else ", none into slow start"
        out.append(
            f"a cut that stood ({undone} of {count(cuts, 'window reduction')} undone within "
            f"an RTT{into}: the losses were spurious -- reordering, not loss -- and the sender "
            "restored its window; no growth followed the others)"
        )
    if not row.get("n_epochs"):
        out.append(
            f"growth between cuts (no congestion-avoidance interval of {MIN_EPOCH_RTTS:.0f} "
            "rounds or more)"
        )
    rounds = float(row.get("rounds_below_max") or 0.0)
    if row.get("growth_below_max") is None or rounds < min_below_rounds:
        out.append(
            f"growth below the window before the cut ({rounds:.0f} window-limited rounds, "
            f"{min_below_rounds:.0f} needed)"
        )
    rtt = row.get("rtt_ms")
    if rtt is not None and 0 < float(rtt) < RTT_RESOLUTION_MS:
        out.append(f"the window's shape in time (RTT {float(rtt):.2f} ms, below timer resolution)")
    return out


def settle(missing: list[str], lead: str) -> str:
    """ "; missing: ...; would settle it: ..." for an abstention whose reason is ``lead``."""
    runs = []
    for item in missing:
        run = (
            RUN_FOR_GROWTH
            if item.startswith("growth between")
            else RUN_FOR_BELOW_MAX
            if item.startswith("growth below")
            else RUN_FOR_RTT
            if item.startswith("the window's shape")
            else RUN_FOR_LOSS_RESPONSE
            if item.startswith("a loss response")
            else RUN_FOR_STANDING_CUT
            if item.startswith("a cut that stood")
            else RUN_FOR_MORE_CUTS
        )
        if run not in runs:
            runs.append(run)
    text = f"; {lead}"
    if missing:
        text += "; missing: " + ", ".join(missing)
    else:
        text += "; missing: nothing identify measures (the factor, its spread, growth between cuts "
        text += "and below the window before the cut are all measured)"
        runs.append(RUN_FOR_LABELS)
    text += "; would settle it: " + "; or ".join(runs)
    return text
