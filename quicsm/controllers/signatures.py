"""Controller signatures: boxes in feature space, and the rule that matches a trace to them.

A *signature* is one box — an interval per feature — labelled with a controller family. A
family may have several boxes (quic-go's Reno multiplies the window by 0.7 where RFC 9002
NewReno halves it: two boxes, one family). A trace matches a box when every feature the trace
has evidence for lies inside the box's interval (a feature without evidence neither matches nor
rejects). The answer is:

* the family of the explicit BBR phases when the trace logs them: BBRv2/v3 when the ProbeBW
  sub-phases ``up``/``down``/``cruise``/``refill`` appear or ProbeRTT keeps half the window,
  BBRv1 when ProbeRTT drains it to a few packets, ``unknown`` (version undetermined) otherwise;
* ``BBRv1`` when the sender lost packets at least :data:`BBR_MIN_LOSSES` times and never
  reduced its window (no multiplicative decrease at all);
* ``unknown`` when the window was never reduced on loss: growth alone does not tell Reno from
  CUBIC, which grows like Reno in its Reno-friendly region (RFC 9438 section 4.3);
* else the family of the matching boxes, or ``unknown`` ("ambiguous") when boxes of more than
  one family match;
* ``unknown`` when the trace has no evidence (no reduction, no usable congestion-avoidance
  interval: receivers, transfers that never left slow start or were capped) or matches no box.

:data:`PRIORS` are the boxes from the specifications, for controllers the lab has no traces of;
:func:`fit_signatures` widens boxes around training traces of known controllers.
:data:`DEFAULT_SIGNATURES` is ``fit_signatures`` on the fitting draws of the identification corpus
(``benchmarks/identify_accuracy.py --write-fitted`` writes it; a test checks that refitting
gives it again).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np
import polars as pl

from quicsm.controllers.features import RTT_RESOLUTION_MS, SEGMENT_BYTES
from quicsm.controllers.reasons import RUN_FOR_LOSS_RESPONSE, RUN_FOR_MORE_CUTS, count, settle
from quicsm.controllers.reasons import missing_evidence as _missing_words
from quicsm.core.errors import InputError

NEWRENO: Final = "NewReno/Reno"
CUBIC: Final = "Cubic"
BBR1: Final = "BBRv1"
BBR2: Final = "BBRv2/v3"
UNKNOWN: Final = "unknown"
FAMILIES: Final[tuple[str, ...]] = (NEWRENO, CUBIC, BBR1, BBR2)

#: the features a fitted box constrains (``beta_spread`` only counts with two reductions or
#: more); ``curvature`` (two congestion-avoidance intervals or more) is evidence for the
#: specification's priors only: within one stack and network it varies as much as between
#: controllers
BOX_FEATURES: Final[tuple[str, ...]] = (
    "beta", "beta_spread", "growth", "cubic_fit", "step_share", "growth_below_max"
)  # fmt: skip
#: features of an implementation rather than of a controller (the share of the window's increases
#: that are one size: whole segments for quic-go's and aioquic's Reno, quiche's and quinn's
#: accumulators; small steps of every size for quic-go's and aioquic's CUBIC): a fitted box
#: checks them only to break a tie between families (boxes of two families take a trace) and
#: when it is used away from the RTTs it was fitted at (:func:`_unseen_rtt`), so that a box of
#: one stack still takes another stack's trace of the same controller
IMPLEMENTATION_FEATURES: Final[frozenset[str]] = frozenset({"step_share"})
#: the features a box needs evidence for before it takes a trace (a feature a box constrains and
#: a trace has no evidence for used to let the box take it: one reduction by 0.7 was then
#: "Cubic" by the specification's concave-growth box); the others -- the cubic fit, which is
#: not measured below the timer resolution, the step share, which needs five increases -- are
#: checked when the trace has them, and so is the spread of the factor (one reduction has none:
#: a single cut by 0.7 is held back by MIN_SHARED_REDUCTIONS instead)
REQUIRED: Final[frozenset[str]] = frozenset(
    {"beta", "growth", "curvature", "growth_own", "rtt_ms", "n_reductions", "growth_below_own",
     "rounds_below_max", "cut_fit", "n_cut_fits"}
)  # fmt: skip
#: the windows of data acknowledged below the previous maximum that make its growth there
#: evidence (``growth_below_max``: quic-go's Reno senders of the development draws and
#: traces/*.qlog measure 0.87-1.28 of their own segments per window over 10 rounds or more,
#: 0.96-1.28 over 20 or more)
MIN_BELOW_ROUNDS: Final[float] = 10.0
#: features that are a log-likelihood ratio between two shapes: the sign says which shape fits
#: better, and the size grows with the length of the intervals as much as with the evidence,
#: so a fitted box constrains only the sign, open on that side ...
ONE_SIDED: Final[frozenset[str]] = frozenset({"cubic_fit"})
#: ... when this share of its training traces agree on it ...
SIGN_AGREEMENT: Final[float] = 0.75
#: ... reaching this far past zero (ln units: residual sums within 28 % of each other are no
#: evidence either way, and boxes of both signs take such a trace)
SIGN_TOLERANCE: Final[float] = 0.25
#: a reduction factor whose spread (median absolute deviation) stays below this is exact
#: (quic-go's 0.7 varies by 10^-6); a stack whose every training trace varied more gets a box
#: that requires it
EXACT_FACTOR: Final[float] = 0.001
#: how far a one-sided interval reaches on its open side
OPEN_END: Final[float] = 1000.0
#: families whose window grows with time rather than with round trips (CUBIC, RFC 9438 section
#: 5): their growth per RTT and their shape depend on the path's RTT, so a box fitted on one
#: path holds only at RTTs within RTT_FACTOR of the training traces' median RTT. Reno's
#: signature (a factor, one segment per RTT, a line) is the same on every path: its boxes are
#: not bound to an RTT.
RTT_BOUND_FAMILIES: Final[frozenset[str]] = frozenset({CUBIC})
RTT_FACTOR: Final[float] = 2**0.5
#: a fitted interval is the training traces' median +- FIT_Z spreads, where a spread is the
#: robust standard deviation of the training values (1.4826 x their median absolute deviation)
#: or the feature's floor below, whichever is larger
FIT_Z: Final[float] = 3.0
#: smallest spread per feature (a controller's factor can be exact: quic-go's 0.7 has a spread
#: of 10^-6, which would make a box no other run of it fits)
SPREAD_FLOORS: Final[dict[str, float]] = {
    "beta": 0.01,
    "beta_spread": 0.004,
    "growth": 0.06,
    "step_share": 0.05,
    "growth_below_max": 0.06,
}
#: a feature constrains a fitted box only when its training traces agree on it: a robust spread
#: above this says the feature is not a trait of the controller in that stack and network (BBR's
#: window drops after losses, growth of a window that BBR sets from its bandwidth estimate)
CONSISTENT_SPREAD: Final[dict[str, float]] = {
    "beta": 0.05,
    "beta_spread": 0.05,
    "growth": 0.3,
    "step_share": 0.1,
    "growth_below_max": 0.3,
}
#: features whose fitted interval also covers every training value: CUBIC's growth below its
#: last maximum mixes its concave curve and its Reno-friendly 0.53 segments per window from
#: interval to interval (quiche's CUBIC at 100 ms: 0.7-1.8), so a few training traces lie far
#: from the rest
COVER_TRAINING: Final[frozenset[str]] = frozenset({"growth_below_max"})
#: the columns that group training traces into one fitted box each (with the true controller)
VARIANTS: Final[tuple[str, ...]] = ("stack", "scenario")
#: losses without any window reduction that make a trace BBR-like ...
BBR_MIN_LOSSES: Final[int] = 5
#: ... when its window grew at least this much (it was sending, not only acknowledging)
SENDER_GAIN: Final[float] = 2.0


@dataclass(frozen=True)
class Box:
    """One signature: a family and an interval per constrained feature."""

    family: str
    intervals: Mapping[str, tuple[float, float]]
    #: "prior" (from a specification), "fit" or "fit:<variant>" (from training traces)
    source: str = "prior"
    #: features of :data:`REQUIRED` this box checks only when the trace has them
    optional: frozenset[str] = frozenset()

    def contains(
        self, evidence: Mapping[str, float], *, any_rtt: bool = False, strict: bool = False
    ) -> bool:
        """Every constrained feature the trace has evidence for lies inside, and the trace has
        evidence for every constrained feature of :data:`REQUIRED`. A fitted box checks
        :data:`IMPLEMENTATION_FEATURES` only when ``strict`` or ``any_rtt``; ``any_rtt`` leaves
        the RTT bound out (what the box would say had it been fitted at the trace's RTT)."""
        for name, (lo, hi) in self.intervals.items():
            if any_rtt and name == "rtt_ms":
                continue
            if (
                name in IMPLEMENTATION_FEATURES
                and self.source != "prior"
                and not (strict or any_rtt)
                and not _small_steps_against_whole(name, lo, evidence)
            ):
                continue
            if name in evidence:
                if not lo <= evidence[name] <= hi:
                    return False
            elif name in REQUIRED and name not in self.optional:
                return False
        return True

    def rtt_range(self) -> tuple[float, float] | None:
        return self.intervals.get("rtt_ms")


def _small_steps_against_whole(name: str, lo: float, evidence: Mapping[str, float]) -> bool:
    """A box fitted on whole-segment steps (every training trace added whole segments: its
    step share reaches down no lower than :data:`WHOLE_STEPS_SHARE`) and a trace that grew in
    small steps of every size (step share below :data:`SMALL_STEPS_SHARE`): the implementation
    the box was fitted on does not grow that way, so the box does not take the trace."""
    share = evidence.get("step_share")
    return (
        name == "step_share"
        and share is not None
        and lo >= WHOLE_STEPS_SHARE
        and share < SMALL_STEPS_SHARE
    )


#: window-limited rounds below the window before the cut over which the growth there says Reno
#: or CUBIC with fewer than MIN_SHARED_REDUCTIONS cuts (quic-go's CUBIC under jitter: 0.52
#: segments per window over 57-73 rounds after two cuts by 0.70)
GROWTH_ROUNDS: Final[float] = 20.0
#: the most a CUBIC grows below the window it was cut from, in 1250-byte segments per window
#: acknowledged, by the rule of growth after a cut (every Reno of the lab: 0.90 or more)
BELOW_MAX_CUBIC: Final[float] = 0.7
#: the smallest spread of the factor of the flight-size CUBIC rule: a factor that varies by this
#: much from cut to cut is not one exact factor (quic-go's 0.7 varies by 10^-6, aioquic's Reno's
#: 0.5 by less than 10^-4)
FLIGHT_SPREAD_FLOOR: Final[float] = 0.003
#: how much closer (ln of the ratio of mean squared errors) the window after the cuts must be to
#: CUBIC's prediction than to Reno's for the growth since the cut to name CUBIC ...
CUT_FIT_CUBIC: Final[float] = 0.5
#: ... over at least this many cuts followed by growth
MIN_CUT_FITS: Final[float] = 2.0
#: boxes from the specifications (RFC 9002 NewReno: half the window, linear growth of about one
#: segment per RTT; RFC 9438 CUBIC: 0.7 of the window or of the flight size)
PRIORS: Final[tuple[Box, ...]] = (
    Box(NEWRENO, {"beta": (0.45, 0.55), "beta_spread": (0.0, 0.02), "growth": (0.5, 1.6),
                  "curvature": (-0.3, 0.3)}),
    # CUBIC: 0.7 of the window, and growth that is concave (towards the last maximum) ...
    Box(CUBIC, {"beta": (0.66, 0.74), "beta_spread": (0.0, 0.02), "curvature": (-3.0, -0.3)}),
    # ... or faster than Reno's segment per RTT
    Box(CUBIC, {"beta": (0.66, 0.74), "beta_spread": (0.0, 0.02), "growth": (1.6, 6.0)}),
    # Reno on any path: one of its own segments per window of data acknowledged (RFC 9002
    # section 7.3.3), added in whole-segment steps, after cuts by one exact factor -- 0.5
    # (RFC 9002) or 0.7 (quic-go's Reno, whose renoBeta is 0.7) -- and no cubic shape where one
    # can be measured. CUBIC grows by 3 (1 - 0.7) / (1 + 0.7) = 0.53 segments per window in its
    # Reno-friendly region (RFC 9438 section 4.3), where it stays below the timer resolution
    # (and, where it can be measured, the same below the window it was cut from: see the
    # next prior)
    Box(NEWRENO, {"beta": (0.45, 0.75), "beta_spread": (0.0, 0.02), "growth_own": (0.92, 1.2),
                  "step_share": (0.5, 1.0), "cubic_fit": (-1000.0, 0.25),
                  "growth_below_own": (0.85, 1.6)}, optional=frozenset({"growth_below_own"})),
    # CUBIC below its last maximum (RFC 9438 sections 4.2-4.3), whole-segment steps: after an
    # exact cut by 0.7 its window climbs back to the window it was cut from either along its
    # concave curve, which flattens towards W_max, or in its Reno-friendly region by
    # alpha_cubic = 0.53 segments per window acknowledged (quiche's W_est, then alpha 1 past
    # W_max; quinn's W_est adds 0.53 per RTT of time), accumulated into whole segments. Every
    # Reno adds one of its segments per window there as anywhere (quic-go's Reno, which also
    # cuts to 0.7: 0.96-1.28 over 20 rounds or more on the development draws and
    # traces/*.qlog). At most 0.8 of its own segments per window over 20 rounds or more, three
    # cuts or more
    Box(CUBIC, {"beta": (0.66, 0.74), "beta_spread": (0.0, 0.02), "growth_below_own": (0.1, 0.8),
                "rounds_below_max": (20.0, 1e9), "step_share": (0.5, 1.0),
                "n_reductions": (3.0, 1e9)}),
    # CUBIC in its Reno-friendly region (RFC 9438 section 4.3), the window recomputed on every
    # ACK: an exact cut by 0.7 and alpha_cubic = 3 (1 - 0.7) / (1 + 0.7) = 0.53 of a segment per
    # window acknowledged, in small steps of every size. quic-go's CUBIC emulates one connection
    # (numConnections 1: beta 0.7, alpha 0.53) and never raises alpha to 1, so on short and lossy
    # paths it grows at 0.53-0.61 of a 1250-byte segment (its datagrams are 1252-1452 bytes).
    # Every Reno adds a whole segment per window (growth_own 0.92-1.2 in whole-segment steps)
    Box(CUBIC, {"beta": (0.66, 0.74), "beta_spread": (0.0, 0.02), "growth": (0.4, 0.68),
                "step_share": (0.0, 0.3), "n_reductions": (3.0, 1e9)}),
    # CUBIC by its growth after a cut, measured where it tells most: below the window it was
    # cut from, over GROWTH_ROUNDS window-limited rounds or more. There every Reno climbs back by
    # one of its own segments (at least 1200 bytes) per window acknowledged -- 0.90-1.5
    # 1250-byte segments per window for every Reno of the lab over 10 rounds or more -- and
    # CUBIC by its Reno-friendly 0.53 (RFC 9438 section 4.3) or along its concave curve, which
    # flattens towards W_max (quic-go's CUBIC: 0.47-0.77; quiche's and quinn's: 0.12-0.8). The
    # shape of the growth since the cut, not the number of cuts, is then the evidence, so one
    # exact cut by 0.7 is enough (past the gate of MIN_SHARED_REDUCTIONS only boxes that bound
    # n_reductions below it, like this one, take a trace)
    Box(CUBIC, {"beta": (0.66, 0.74), "beta_spread": (0.0, 0.02),
                "growth_below_max": (0.1, BELOW_MAX_CUBIC),
                "rounds_below_max": (GROWTH_ROUNDS, 1e9), "n_reductions": (1.0, 1e9)}),
    # CUBIC that cuts the bytes in flight rather than the window (RFC 9438 section 4.6 allows
    # flight_size x 0.7; aioquic takes the flight after the lost packets have left it): against
    # the window the factor varies from cut to cut and falls below 0.7 as losses grow (0.41-0.66
    # on lossy paths), while the window is recomputed on every ACK (small steps of every size).
    # No Reno and no BBR of the lab cuts by a varying factor four times with such steps (aioquic's
    # CUBIC at 4 Mbit/s varies by 0.005-0.008 from cut to cut when its flight is steady; quic-go's,
    # aioquic's and quiche's Reno cut by an exact factor, spread below 10^-4; quinn's varies by up
    # to 0.04 but adds whole segments)
    Box(CUBIC, {"beta": (0.35, 0.72), "beta_spread": (FLIGHT_SPREAD_FLOOR, 0.15),
                "growth": (0.6, 1.4), "step_share": (0.0, 0.1), "n_reductions": (4.0, 1e9)}),
    # CUBIC by the growth since its cuts (``cut_fit``): after two cuts or more by an exact 0.7,
    # the window follows CUBIC's own prediction -- its curve back to W_max, with fast
    # convergence, or its Reno-friendly estimate (RFC 9438 sections 4.2-4.7) -- much more closely
    # than Reno's segment per window acknowledged (RFC 9002 section 7.3.3), nothing fitted. Every
    # Reno of the lab that cuts by 0.7 (quic-go's) measures at most 0.1 over two such cuts or
    # more; quic-go's, quinn's and quiche's CUBIC mostly well above CUT_FIT_CUBIC
    Box(CUBIC, {"beta": (0.66, 0.74), "beta_spread": (0.0, 0.02),
                "cut_fit": (CUT_FIT_CUBIC, OPEN_END), "n_cut_fits": (MIN_CUT_FITS, 1e9),
                "n_reductions": (MIN_CUT_FITS, 1e9)}),
    # RFC 9002's halving, exactly, two times or more: no CUBIC cuts to 0.5, and BBR's window
    # drops after losses vary (quinn's BBRv1: 0.36-0.61); no growth needed
    Box(NEWRENO, {"beta": (0.47, 0.53), "beta_spread": (0.0, 0.005),
                  "n_reductions": (2.0, 1e9)}),
)  # fmt: skip
#: a Reno answer by boxes needs growth over more than MAX_DENSE_EPOCHS congestion-avoidance
#: intervals when the window was cut DENSE_CUTS times or more: cut every few RTTs (reordering
#: without loss: 124-183 cuts in a 2 MB transfer), quinn's CUBIC -- whose Reno-friendly estimate
#: W_est grows with the wall-clock time since the cut while the acknowledgements of the first
#: RTT after it do not count -- climbs 1.1-1.3 segments per window acknowledged in the rounds
#: that count, like a Reno (identify-reorder: 3 of its 20 senders named Reno by the whole-step
#: Reno boxes before this rule). Not below the timer resolution (loopback), where no RTT of
#: wall-clock time passes between cuts and quic-go's Reno with loss is named by its growth
DENSE_CUTS: Final[int] = 20
MAX_DENSE_EPOCHS: Final[int] = 1
#: a BBR answer by boxes (quiche's BBRv2 cuts its window by 0.85 after losses) needs this many
#: reductions: one drop by 0.85 is any controller's gradual cut seen in one step (the kernel's
#: CUBIC under an outage, proportional rate reduction: 0.86, named BBRv2/v3 at 0.933 before this
#: rule); no BBR sender of the lab or of the stock traces is named by boxes at all (their phases
#: name them)
MIN_BBR_BOX_CUTS: Final[int] = 2
#: a fitted box whose step share reaches no lower than this was fitted on whole-segment steps ...
WHOLE_STEPS_SHARE: Final[float] = 0.5
#: ... and does not take a trace whose step share is below this (small steps of every size:
#: quic-go's and aioquic's CUBIC recompute the window on every ACK, 0.4-30 % of steps one size)
SMALL_STEPS_SHARE: Final[float] = 0.3
#: a step of the window of at least this many bytes is a whole segment (QUIC's smallest
#: datagram is 1200 bytes)
WHOLE_SEGMENT: Final[float] = 1000.0
#: a trace with fewer reductions than this and a factor between REDUCTIONS_SHARED is "too few to
#: tell Reno from CUBIC": quic-go's Reno and CUBIC both cut by 0.7
MIN_SHARED_REDUCTIONS: Final[int] = 3
REDUCTIONS_SHARED: Final[tuple[float, float]] = (0.6, 0.8)
#: Reno by an undo into slow start: cuts by one of Reno's exact factors (quic-go's renoBeta 0.7,
#: RFC 9002's 0.5, within UNDO_FACTOR_TOLERANCE; spread at most UNDO_SPREAD) and one of them
#: undone, after which the window went on doubling (``n_undone_slow_start``,
#: :func:`quicsm.controllers.features._undone_into_slow_start`): the sender restored its
#: slow-start threshold with its window. quic-go v0.65.0 keeps undo state only in Reno mode and
#: restores window, threshold and state (factor 0.69999-0.70000); quiche 0.30's CUBIC, the other
#: controller of the lab that undoes, never rolls back into slow start. Linux's TCP undoes into
#: slow start for any controller, but its cuts are gradual (proportional rate reduction: one
#: drop of the window seen as 0.73 of it, CUBIC's included), not one exact factor
UNDO_FACTORS: Final[tuple[float, ...]] = (0.5, 0.7)
UNDO_FACTOR_TOLERANCE: Final[float] = 0.005
UNDO_SPREAD: Final[float] = 0.02
#: ProbeRTT depth (window in ProbeRTT over the window before) at or below which BBR is v1 (4
#: packets), and at or above which it is v2/v3 (half the BDP)
BBR1_PROBE_RTT_DEPTH: Final[float] = 0.1
BBR2_PROBE_RTT_DEPTH: Final[float] = 0.3


@dataclass(frozen=True)
class Verdict:
    """What :func:`classify` concludes about one trace."""

    family: str
    confidence: float
    evidence: str
    matched: tuple[str, ...] = field(default_factory=tuple)
    #: the rule that named it (:data:`BASES`), "" for unknown: with the number of reductions,
    #: the kind of evidence that :mod:`quicsm.controllers.calibration` calibrates
    basis: str = ""


#: the rules that name a controller: explicit BBRv2/v3 sub-phases, BBR phases with a ProbeRTT
#: depth, losses without any decrease, boxes alone, boxes with the tie broken by the window's
#: steps, a cut by one of Reno's exact factors undone into slow start (:data:`UNDO_FACTORS`)
BASES: Final[tuple[str, ...]] = (
    "bbr-phases", "bbr-probe-rtt", "no-decrease", "boxes", "steps", "undo-slow-start"
)  # fmt: skip


def evidence_of(row: Mapping[str, Any]) -> dict[str, float]:
    """The box features a feature row has evidence for."""
    out: dict[str, float] = {}
    if row.get("n_reductions", 0) >= 1 and row.get("beta") is not None:
        out["beta"] = float(row["beta"])
        out["n_reductions"] = float(row["n_reductions"])
    if row.get("n_reductions", 0) >= 2 and row.get("beta_spread") is not None:
        out["beta_spread"] = float(row["beta_spread"])
    if row.get("n_epochs", 0) >= 1 and row.get("growth") is not None:
        out["growth"] = float(row["growth"])
        # a shape needs two intervals to be the controller's: one interval's curvature is as much
        # that interval's (an app-limited stretch, a queue filling) as the controller's
        if row.get("n_epochs", 0) >= 2 and row.get("curvature") is not None:
            out["curvature"] = float(row["curvature"])
        if row.get("cubic_fit") is not None and not _below_resolution(row):
            out["cubic_fit"] = float(row["cubic_fit"])
        step, share = row.get("step_bytes"), row.get("step_share")
        if step is not None and share is not None and step >= WHOLE_SEGMENT and share >= 0.5:
            # growth in the stack's own segments (the whole-segment step it adds)
            out["growth_own"] = float(row["growth"]) * SEGMENT_BYTES / float(step)
        if row.get("round_basis") == "rtt" and _below_resolution(row):
            # a wall-clock RTT below the timer resolution is no unit of rounds
            for name in ("growth", "curvature", "growth_own"):
                out.pop(name, None)
    below = row.get("growth_below_max")
    if below is not None and float(row.get("rounds_below_max") or 0.0) >= MIN_BELOW_ROUNDS:
        out["growth_below_max"] = float(below)
        out["rounds_below_max"] = float(row["rounds_below_max"])
        step, share = row.get("step_bytes"), row.get("step_share")
        if step is not None and share is not None and step >= WHOLE_SEGMENT and share >= 0.5:
            out["growth_below_own"] = float(below) * SEGMENT_BYTES / float(step)
    if row.get("n_cut_fits") and row.get("cut_fit") is not None and not _below_resolution(row):
        # the growth since the cut, in seconds and windows acknowledged: not below the timer
        # resolution, where CUBIC's curve in seconds says nothing
        out["cut_fit"] = float(row["cut_fit"])
        out["n_cut_fits"] = float(row["n_cut_fits"])
    if row.get("step_share") is not None:
        out["step_share"] = float(row["step_share"])
    if row.get("rtt_ms") is not None and row["rtt_ms"] > 0:
        out["rtt_ms"] = float(row["rtt_ms"])
    return out


def _below_resolution(row: Mapping[str, Any]) -> bool:
    rtt = row.get("rtt_ms")
    return rtt is not None and 0 < float(rtt) < RTT_RESOLUTION_MS


def _describe(row: Mapping[str, Any]) -> str:
    parts = []
    if row.get("n_reductions"):
        spread = row.get("beta_spread")
        parts.append(
            f"{count(int(row['n_reductions']), 'window reduction')} on loss, "
            f"factor {row['beta']:.2f}"
            + (f" (spread {spread:.3f})" if spread is not None else "")
            + (f", {int(row['n_undone'])} undone" if row.get("n_undone") else "")
            + (
                f" ({int(row['n_undone_slow_start'])} into slow start)"
                if row.get("n_undone_slow_start")
                else ""
            )
        )
    elif row.get("n_losses"):
        parts.append(f"{count(int(row['n_losses']), 'loss')}, no window reduction")
    if row.get("n_collapses"):
        parts.append(count(int(row["n_collapses"]), "collapse to the minimum window"))
    if row.get("n_epochs"):
        curvature = row["curvature"]
        shape = "concave" if curvature < -0.3 else "convex" if curvature > 0.3 else "linear"
        unit = "window acked" if row.get("round_basis") == "acked" else "RTT"
        parts.append(
            f"{shape} growth of {row['growth']:.2f} segments/{unit} over "
            f"{count(int(row['n_epochs']), 'congestion-avoidance interval')} "
            f"({row['epoch_rtts']:.0f} rounds)"
        )
    below = row.get("growth_below_max")
    if below is not None and float(row.get("rounds_below_max") or 0.0) >= MIN_BELOW_ROUNDS:
        parts.append(
            f"{below:.2f} segments/window acked below the window before the cut "
            f"({row['rounds_below_max']:.0f} rounds)"
        )
    return "; ".join(parts) if parts else "no loss response and no congestion-avoidance growth"


def _no_loss_response(row: Mapping[str, Any]) -> str:
    """The reason of a trace with no evidence at all: what it lacked and what would settle it."""
    return f"; missing: a window reduction by a factor; would settle it: {RUN_FOR_LOSS_RESPONSE}"


def _amount(row: Mapping[str, Any]) -> float:
    """1 - 2^-k for k units of evidence (reductions and usable intervals), at most 0.99."""
    units = int(row.get("n_reductions") or 0) + int(row.get("n_epochs") or 0)
    return min(0.99, 1.0 - 0.5**units)


def classify(
    row: Mapping[str, Any],
    signatures: Sequence[Box] = (),
    families: Iterable[str] = FAMILIES,
    calibration: Mapping[str, tuple[int, int]] | None = None,
) -> Verdict:
    """The controller family of one feature row (``features.FEATURES_SCHEMA``), among
    ``families`` (the known set: the rules that name BBR apply only when its family is in it,
    as boxes of a family not in it are never matched). With a ``calibration`` table
    (:mod:`quicsm.controllers.calibration`) the confidence is the share of answers of the
    same kind that were right on the calibration draws, and an answer below
    :data:`~quicsm.controllers.calibration.UNKNOWN_BELOW` is ``unknown``; without one it is the
    uncalibrated score 1 - 2^-k."""
    known = set(families)
    verdict = _classify(row, [box for box in signatures if box.family in known])
    if verdict.family not in known and verdict.family != UNKNOWN:
        return Verdict(
            UNKNOWN, 0.0, verdict.evidence + f"; looks like {verdict.family}, not a known family"
        )
    if calibration is not None:
        return calibrate(verdict, row, calibration)
    return verdict


def _classify(row: Mapping[str, Any], signatures: Sequence[Box]) -> Verdict:
    if row.get("bbr2_phases", 0):
        return Verdict(
            BBR2,
            0.99,
            "explicit BBRv2/v3 ProbeBW sub-phases (up, down, cruise, refill)",
            basis="bbr-phases",
        )
    if row.get("bbr_phases", 0):
        depth = row.get("probe_rtt_depth")
        if depth is not None and depth <= BBR1_PROBE_RTT_DEPTH:
            return Verdict(
                BBR1,
                0.9,
                f"explicit BBR phases; ProbeRTT drains the window to {depth:.2f} of it",
                basis="bbr-probe-rtt",
            )
        if depth is not None and depth >= BBR2_PROBE_RTT_DEPTH:
            return Verdict(
                BBR2,
                0.9,
                f"explicit BBR phases; ProbeRTT keeps {depth:.2f} of the window",
                basis="bbr-probe-rtt",
            )
        return Verdict(
            UNKNOWN, 0.0, "explicit BBR phases, no sub-phases and no ProbeRTT: BBR version unknown"
        )
    described = _describe(row)
    if (
        int(row.get("n_losses") or 0) >= BBR_MIN_LOSSES
        and not row.get("n_reductions")
        and not row.get("n_collapses")
        and float(row.get("cwnd_gain") or 0.0) >= SENDER_GAIN
    ):
        return Verdict(BBR1, 0.6, described + " (no multiplicative decrease)", basis="no-decrease")
    evidence = evidence_of(row)
    if not evidence.keys() - {"rtt_ms", "step_share", "n_reductions", "rounds_below_max",
                              "n_cut_fits"}:  # fmt: skip
        return Verdict(UNKNOWN, 0.0, described + _no_loss_response(row))
    if "beta" not in evidence:
        # CUBIC grows like Reno in its Reno-friendly region (RFC 9438 section 4.3), so growth
        # without a loss response names no controller
        return Verdict(
            UNKNOWN,
            0.0,
            described
            + settle(["a loss response (the window was never cut)"], "growth alone does not "
                     "tell Reno from CUBIC"),
        )  # fmt: skip
    reductions = int(row.get("n_reductions") or 0)
    lo, hi = REDUCTIONS_SHARED
    if reductions < MIN_SHARED_REDUCTIONS and lo <= evidence["beta"] <= hi:
        # too few cuts by a factor Reno and CUBIC share: only a box made for few cuts (its
        # n_reductions reaches below MIN_SHARED_REDUCTIONS: the growth after a cut) may take it
        few = [box for box in signatures if _few_cuts(box) and box.contains(evidence)]
        undo = _undo_verdict(row, evidence, described, {box.family for box in few})
        if undo is not None:
            return undo
        if len({box.family for box in few}) != 1:
            return Verdict(
                UNKNOWN,
                0.0,
                described + f"; {count(reductions, 'reduction')} by {evidence['beta']:.2f}: too "
                f"few to tell Reno from CUBIC; missing: {MIN_SHARED_REDUCTIONS} reductions or "
                f"more, or growth below the window before the cut over {GROWTH_ROUNDS:.0f} "
                f"window-limited rounds or more; would settle it: {RUN_FOR_MORE_CUTS}",
            )
        signatures = few
    if row.get("round_basis") == "rtt" and _below_resolution(row) and row.get("n_epochs"):
        described += "; RTT below timer resolution: growth per RTT not measurable"
    matched = [box for box in signatures if box.contains(evidence)]
    families = sorted({box.family for box in matched})
    if set(families) != {NEWRENO}:
        undo = _undo_verdict(row, evidence, described, set(families))
        if undo is not None:
            return undo
    if not families:
        return Verdict(
            UNKNOWN,
            0.0,
            described
            + settle(_missing_words(row, min_below_rounds=MIN_BELOW_ROUNDS),
                     "matches no known controller"),
        )  # fmt: skip
    basis = "boxes"
    if len(families) > 1:
        # a tie: the implementation's traits (the window's steps) may break it -- quic-go's
        # Reno adds whole segments, its CUBIC small steps of every size
        strict = sorted({box.family for box in matched if box.contains(evidence, strict=True)})
        if len(strict) == 1:
            families, basis = strict, "steps"
            described += f"; {' and '.join(sorted({b.family for b in matched}))} by factor and "
            described += f"growth, told apart by the window's steps ({evidence['step_share']:.2f} "
            described += "of increases one size)"
    if len(families) > 1:
        # boxes of two controllers take the trace: the evidence does not separate them (one
        # reduction by 0.7 is quic-go's Reno and RFC 9438 CUBIC alike)
        return Verdict(
            UNKNOWN,
            0.0,
            described
            + settle(
                _missing_words(row, min_below_rounds=MIN_BELOW_ROUNDS),
                f"ambiguous between {' and '.join(families)}",
            ),
            tuple(families),
        )
    if families[0] in (BBR1, BBR2) and len(families) == 1 and reductions < MIN_BBR_BOX_CUTS:
        return Verdict(
            UNKNOWN,
            0.0,
            described + f"; {count(reductions, 'reduction')} by {evidence['beta']:.2f}: one drop "
            "of the window is no loss response to name BBR by (a gradual cut of any controller, "
            "as Linux's proportional rate reduction, is seen as one drop by 0.7-0.9)"
            + settle([f"{MIN_BBR_BOX_CUTS} reductions or more"], "too few to name BBR by its cuts"),
            tuple(families),
        )
    if (
        families == [NEWRENO]
        and reductions >= DENSE_CUTS
        and int(row.get("n_epochs") or 0) <= MAX_DENSE_EPOCHS
        and not _below_resolution(row)
    ):
        return Verdict(
            UNKNOWN,
            0.0,
            described + f"; {count(reductions, 'reduction')} with growth over at most "
            f"{count(MAX_DENSE_EPOCHS, 'congestion-avoidance interval')}: cut every few RTTs, "
            "where a CUBIC whose Reno-friendly estimate grows with the time since the cut "
            "(quinn's) climbs like Reno in the rounds that count"
            + settle(
                ["growth between cuts (the cuts came too close together)"],
                "too little growth between cuts to tell Reno from CUBIC",
            ),
            tuple(families),
        )
    unseen = _unseen_rtt(evidence, families[0], signatures)
    if unseen:
        return Verdict(UNKNOWN, 0.0, described + "; " + unseen, tuple(families))
    return Verdict(families[0], round(_amount(row), 3), described, tuple(families), basis)


def _undo_verdict(
    row: Mapping[str, Any], evidence: Mapping[str, float], described: str, boxed: set[str]
) -> Verdict | None:
    """Reno by an undo into slow start (:data:`UNDO_FACTORS`), or ``unknown`` when boxes of
    another family take the trace; None when the trace shows no such undo. ``boxed`` are the
    families whose boxes take the trace."""
    if (
        not row.get("n_undone_slow_start")
        or not any(abs(evidence["beta"] - f) <= UNDO_FACTOR_TOLERANCE for f in UNDO_FACTORS)
        or evidence.get("beta_spread", 0.0) > UNDO_SPREAD
    ):
        return None
    words = (
        "; a cut undone into slow start: the window restored and doubling again, so its "
        "threshold was restored with it (Reno's undo in quic-go; quiche's CUBIC never rolls back "
        "into slow start, quic-go's CUBIC keeps no undo state)"
    )
    if boxed - {NEWRENO}:
        return Verdict(
            UNKNOWN,
            0.0,
            described + words + f"; but {' and '.join(sorted(boxed - {NEWRENO}))} boxes take it: "
            "ambiguous",
            tuple(sorted(boxed | {NEWRENO})),
        )
    return Verdict(NEWRENO, round(_amount(row), 3), described + words, (NEWRENO,),
                   basis="undo-slow-start")  # fmt: skip


def _few_cuts(box: Box) -> bool:
    """The box is made for traces with fewer than :data:`MIN_SHARED_REDUCTIONS` cuts."""
    bound = box.intervals.get("n_reductions")
    return bound is not None and bound[0] < MIN_SHARED_REDUCTIONS


def _unseen_rtt(evidence: Mapping[str, float], family: str, signatures: Sequence[Box]) -> str:
    """Why a trace that only ``family``'s boxes take is still not named: a box of another family
    bound to other RTTs (CUBIC's, :data:`RTT_BOUND_FAMILIES`) would take it had it been fitted
    at the trace's RTT, and no box of that family was fitted near it -- the evidence says
    nothing of that family there. Below the timer resolution CUBIC is in its Reno-friendly
    region (RFC 9438 section 4.3: a window of milliseconds leaves no time for its cubic curve),
    which the specification's boxes describe, so this does not apply there. "" when it does not
    apply."""
    rtt = evidence.get("rtt_ms")
    if rtt is None or rtt < RTT_RESOLUTION_MS:
        return ""
    for other in sorted({b.family for b in signatures} - {family}):
        boxes = [b for b in signatures if b.family == other and b.rtt_range() is not None]
        if not boxes or any(lo <= rtt <= hi for lo, hi in (b.rtt_range() or (0, 0) for b in boxes)):
            continue
        if any(b.contains(evidence, any_rtt=True) for b in boxes):
            return (
                f"no {other} box fitted near {rtt:.1f} ms, and one fitted at another RTT takes "
                f"it: {family} or {other}; missing: growth below the window before the cut, or a "
                f"{other} box near this RTT; would settle it: growth below the window before the "
                f"cut over {MIN_BELOW_ROUNDS:.0f} window-limited rounds or more (a rate cap with a "
                "queue of about one bandwidth-delay product, light loss)"
            )
    return ""


def _robust_spread(values: list[float]) -> float:
    """1.4826 x the median absolute deviation (the standard deviation, for normal values)."""
    if len(values) < 2:
        return 0.0
    arr = np.asarray(values, dtype=float)
    return float(1.4826 * np.median(np.abs(arr - np.median(arr))))


def _interval(values: list[float], name: str) -> tuple[float, float] | None:
    """The median of the values +- :data:`FIT_Z` robust spreads (at least
    :data:`SPREAD_FLOORS`), or None when fewer than two traces have the feature or they disagree
    (:data:`CONSISTENT_SPREAD`).

    A one-sided feature (:data:`ONE_SIDED`) constrains only its sign, when at least
    :data:`SIGN_AGREEMENT` of the values have it: ``(-SIGN_TOLERANCE, OPEN_END)`` or
    ``(-OPEN_END, SIGN_TOLERANCE)``. ``beta_spread`` keeps a lower bound of
    :data:`EXACT_FACTOR` when every value is above it (a stack whose factor varies, as aioquic's
    cut of the flight size does, is not one that cuts by an exact factor)."""
    if len(values) < 2:
        return None
    if name in ONE_SIDED:
        positive = sum(v > 0 for v in values) / len(values)
        if positive >= SIGN_AGREEMENT:
            return (-SIGN_TOLERANCE, OPEN_END)
        if 1 - positive >= SIGN_AGREEMENT:
            return (-OPEN_END, SIGN_TOLERANCE)
        return None
    centre = float(np.median(values))
    spread = _robust_spread(values)
    if spread > CONSISTENT_SPREAD[name]:
        return None
    margin = FIT_Z * max(spread, SPREAD_FLOORS[name])
    lo, hi = round(centre - margin, 3), round(centre + margin, 3)
    if name in COVER_TRAINING:
        lo = min(lo, math.floor(min(values) * 1000) / 1000)
        hi = max(hi, math.ceil(max(values) * 1000) / 1000)
    if name == "beta_spread" and min(values) > EXACT_FACTOR:
        lo = EXACT_FACTOR
    return (lo, hi)


def fit_signatures(
    features: pl.DataFrame,
    *,
    truth: str = "controller",
    variants: Sequence[str] = VARIANTS,
    priors: Iterable[Box] = PRIORS,
    exclude: Iterable[str] = (),
) -> tuple[Box, ...]:
    """Priors plus one fitted box per controller in ``features[truth]`` and per value of the
    ``variants`` columns that ``features`` has (by default an implementation and a network: the
    same controller reduces by 0.7 of the window in one stack and of the flight size in another,
    and CUBIC grows like Reno on a short path and concavely on a long one). Controllers in
    ``exclude`` are left out entirely, priors included.

    A fitted box constrains each feature that at least two of its training traces have evidence
    for and agree on (:func:`_interval`), centred on their median; a group whose traces do not
    agree on the reduction factor and its spread gives no box (quinn's BBR, whose window drops
    after losses vary: it is named by its phases and rules, not by a box). A box of a family in
    :data:`RTT_BOUND_FAMILIES` also bounds the RTT (within :data:`RTT_FACTOR` of the training
    traces' median). The variant columns only group the training traces; matching never looks
    at them.
    """
    if truth not in features.columns:
        raise InputError(f"fit_signatures: features need a {truth!r} column (the true family)")
    excluded = set(exclude)
    boxes = [box for box in priors if box.family not in excluded]
    by = [truth, *(v for v in variants if v in features.columns)]
    keys = features.select(by).drop_nulls(truth).unique().sort(by, nulls_last=True).iter_rows()
    for key in keys:
        family = str(key[0])
        if family in excluded or family == UNKNOWN:
            continue
        part = features
        for column, value in zip(by, key, strict=True):
            part = part.filter(pl.col(column).eq_missing(value))
        evidence = [evidence_of(row) for row in part.iter_rows(named=True)]
        intervals = {}
        for name in BOX_FEATURES:
            values = [e[name] for e in evidence if name in e]
            interval = _interval(values, name) if values else None
            if interval is not None:
                intervals[name] = interval
        rtts = [e["rtt_ms"] for e in evidence if "rtt_ms" in e]
        if family in RTT_BOUND_FAMILIES and len(rtts) >= 2:
            centre = float(np.median(rtts))
            intervals["rtt_ms"] = (round(centre / RTT_FACTOR, 1), round(centre * RTT_FACTOR, 1))
        if "beta" in intervals and "beta_spread" in intervals:
            # a fitted box always says how the window answers loss: by one factor, every time
            variant = "/".join(str(v) for v in key[1:])
            boxes.append(Box(family, intervals, f"fit:{variant}" if variant else "fit"))
    return tuple(boxes)


def boxes_table(boxes: Sequence[Box]) -> pl.DataFrame:
    """The boxes as a table: family, source, feature, lo, hi."""
    rows = [
        (box.family, box.source, name, lo, hi)
        for box in boxes
        for name, (lo, hi) in box.intervals.items()
    ]
    return pl.DataFrame(rows, schema=["family", "source", "feature", "lo", "hi"], orient="row")


def signatures_source(
    boxes: Sequence[Box], calibration: Mapping[str, tuple[int, int]] | None = None
) -> str:
    """Python source of a module defining ``DEFAULT_SIGNATURES = boxes`` (``fitted.py``)."""
    lines = [
        '"""Generated by ``benchmarks/identify_accuracy.py --write-fitted``: do not edit.',
        "",
        "The signatures fitted on the identification draws held for fitting, and their",
        "calibration (docs/identify.md).",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Final",
        "",
        "from quicsm.controllers.signatures import Box",
        "",
        "# fmt: off",
        "DEFAULT_SIGNATURES: Final[tuple[Box, ...]] = (",
    ]
    for box in boxes:
        lines.append(f'    Box("{box.family}", {{')
        lines += [f'        "{k}": ({lo!r}, {hi!r}),' for k, (lo, hi) in box.intervals.items()]
        optional = f", optional=frozenset({sorted(box.optional)!r})" if box.optional else ""
        lines.append(f'    }}, "{box.source}"{optional}),')
    lines += [")"]
    lines.append("#: answer kind -> (right, answers) on the calibration draws (calibration.py)")
    lines.append("DEFAULT_CALIBRATION: Final[dict[str, tuple[int, int]]] = {")
    lines += [f'    "{k}": {v!r},' for k, v in (calibration or {}).items()]
    lines += ["}", "# fmt: on"]
    return "\n".join(lines) + "\n"


# -- calibration (quicsm.controllers.calibration measures it) -------------------------------

#: an answer whose calibrated confidence is below this is "unknown"
UNKNOWN_BELOW: Final[float] = 0.8
#: the bins of the number of reductions an answer by boxes rests on (lower bounds)
REDUCTION_BINS: Final[tuple[int, ...]] = (0, 3, 5, 10)


def kind_of(verdict: Verdict, row: Mapping[str, Any]) -> str:
    """The kind of an answer: its rule, and for answers by boxes (a tie broken by the window's
    steps included) the reductions bin."""
    if verdict.basis in ("boxes", "steps"):
        reductions = int(row.get("n_reductions") or 0)
        low = max(b for b in REDUCTION_BINS if b <= reductions)
        upper = [b for b in REDUCTION_BINS if b > low]
        label = f"{low}-{upper[0] - 1}" if upper else f"{low}+"
        return f"boxes/reductions {label}"
    return verdict.basis


def confidence_of(right: int, answers: int) -> float:
    """(right + 1) / (answers + 2): the share right among answers of a kind, estimated."""
    return (right + 1) / (answers + 2)


def calibrate(
    verdict: Verdict, row: Mapping[str, Any], table: Mapping[str, tuple[int, int]]
) -> Verdict:
    """``verdict`` with the calibrated confidence of its kind in ``table`` (kind -> (right,
    answers)), or ``unknown`` when that is below :data:`UNKNOWN_BELOW`."""
    if verdict.family == UNKNOWN:
        return verdict
    kind = kind_of(verdict, row)
    right, answers = table.get(kind, (0, 0))
    confidence = confidence_of(right, answers)
    if confidence < UNKNOWN_BELOW:
        return Verdict(
            UNKNOWN,
            0.0,
            verdict.evidence
            + f"; would be {verdict.family}, but answers of this kind ({kind}) were right "
            f"{right} times in {answers} on the calibration draws: confidence "
            f"{confidence:.2f} < {UNKNOWN_BELOW}; missing: answers of this kind on the "
            "calibration draws; would settle it: a longer or lossier run (more reductions), or "
            "calibration draws holding this kind",
            verdict.matched,
        )
    return replace(verdict, confidence=round(confidence, 3))
