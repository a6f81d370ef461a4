"""Which congestion controller each group of a comparison ran (``quicsm identify``), as notes
on the comparison: the family found in each group and a warning when the two differ — a change
of controller, not of the version, may then explain what the report shows."""

from __future__ import annotations

import dataclasses
from collections import Counter

import polars as pl

from quicsm.compare.grouping import Comparison, Group
from quicsm.controllers.api import identify_frames
from quicsm.controllers.signatures import UNKNOWN
from quicsm.core.errors import QuicsmError
from quicsm.core.frames import KEY_DTYPE


def group_families(group: Group) -> Counter[str] | None:
    """How many traces of the group ``identify`` names each controller family (``unknown``
    included); ``None`` when the group has no metrics to identify from (a group built from a
    transitions frame alone, or whose files are gone). Raises :class:`QuicsmError` if its files
    cannot be read."""
    metrics = group.metrics
    if metrics is None:
        from pathlib import Path

        from quicsm.extract.read import read_metrics

        files = sorted({str(f) for f in group.traces["file"].to_list() if f})
        if not files or not all(Path(f).is_file() for f in files):
            return None
        metrics = read_metrics(files)
    if group.transitions.height == 0:
        return Counter({UNKNOWN: group.n_traces})
    keys = group.traces.select(pl.col("file").cast(KEY_DTYPE), pl.col("trace").cast(KEY_DTYPE))
    metrics = metrics.join(keys, on=["file", "trace"], how="semi")
    frame = identify_frames(metrics, group.transitions)
    return Counter(str(f) for f in frame["family"].to_list())


def _dominant(counts: Counter[str]) -> str | None:
    known = [(n, f) for f, n in counts.items() if f != UNKNOWN]
    if not known:
        return None
    known.sort(key=lambda item: (-item[0], item[1]))
    if len(known) > 1 and known[0][0] == known[1][0]:
        return None  # a tie names no controller
    return known[0][1]


def _describe(name: str, counts: Counter[str]) -> str:
    total = sum(counts.values())
    named = ", ".join(
        f"{family} in {n}"
        for family, n in sorted(counts.items(), key=lambda i: (-i[1], i[0]))
        if family != UNKNOWN
    )
    unknown = counts.get(UNKNOWN, 0)
    if not named:
        return f"{name}: no controller identified ({total} traces without evidence)"
    return f"{name}: {named} of {total} traces ({unknown} unknown)"


def controller_notes(comparison: Comparison) -> list[str]:
    """The identified controller of each group, and a warning when they differ (nothing when a
    group has no metrics)."""
    try:
        a = group_families(comparison.a)
        b = group_families(comparison.b)
    except QuicsmError as exc:
        return [f"congestion controllers not identified: {exc}"]
    if a is None or b is None:
        return []  # no metrics: nothing to identify from
    notes = [
        "congestion controller (quicsm identify): "
        + "; ".join((_describe(comparison.a.name, a), _describe(comparison.b.name, b)))
    ]
    fa, fb = _dominant(a), _dominant(b)
    if fa and fb and fa != fb:
        by = f" compared by {comparison.label}" if comparison.label else ""
        notes.append(
            f"warning: the groups{by} run different congestion controllers ({comparison.a.name}: "
            f"{fa}, {comparison.b.name}: {fb}); differences may come from the controller, not "
            "only from what the groups are compared by"
        )
    return notes


def with_controller_notes(comparison: Comparison) -> Comparison:
    """A copy of ``comparison`` with :func:`controller_notes` added to its notes."""
    return dataclasses.replace(comparison, notes=[*comparison.notes, *controller_notes(comparison)])
