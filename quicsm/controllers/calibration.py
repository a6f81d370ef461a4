"""Calibrated confidence for ``quicsm identify``: the probability that an answer is right.

An answer's *kind* is the rule that named it (:data:`~quicsm.controllers.signatures.BASES`)
and, for answers by boxes, how many window reductions it rests on (:data:`REDUCTION_BINS`).
The calibration table counts, per kind, the answers given on *calibration draws* -- traces
that the boxes answering them were not fitted on: each fitting corpus answered by boxes fitted
on the others (cross-validation), and lab draws never fitted on -- and how many were right.
An answer's confidence is the rule-of-succession estimate of the share right among answers of
its kind, (right + 1) / (answers + 2); below :data:`UNKNOWN_BELOW` the answer is ``unknown``,
with the counts that put it there. :func:`reliability` measures the result on draws held back
from both fitting and calibration: answers binned by confidence against the share right.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import polars as pl

# the calibration applied by classify lives beside it (no import cycle); named here too
from quicsm.controllers.signatures import (
    REDUCTION_BINS,
    UNKNOWN,
    UNKNOWN_BELOW,
    calibrate,
    confidence_of,
    kind_of,
)

__all__ = [
    "CONFIDENCE_BINS",
    "REDUCTION_BINS",
    "UNKNOWN_BELOW",
    "calibrate",
    "calibration_counts",
    "confidence_of",
    "kind_of",
]

#: the confidence bins of the reliability table (lower bounds)
CONFIDENCE_BINS: Final[tuple[float, ...]] = (0.0, 0.8, 0.9, 0.95, 0.98)


def calibration_counts(answers: pl.DataFrame) -> dict[str, tuple[int, int]]:
    """Kind -> (right, answers) over named answers (columns ``kind``, ``family``,
    ``controller``)."""
    named = answers.filter(pl.col("family") != UNKNOWN)
    out: dict[str, tuple[int, int]] = {}
    for (kind,), part in named.group_by(["kind"], maintain_order=True):
        right = part.filter(pl.col("family") == pl.col("controller")).height
        out[str(kind)] = (right, part.height)
    return dict(sorted(out.items()))


def calibration_table(counts: Mapping[str, tuple[int, int]]) -> pl.DataFrame:
    """The calibration as a table: kind, answers, right, confidence."""
    rows = [(k, n, r, round(confidence_of(r, n), 3)) for k, (r, n) in counts.items()]
    return pl.DataFrame(rows, schema=["kind", "answers", "right", "confidence"], orient="row")


def reliability(predicted: pl.DataFrame, bins: Sequence[float] = CONFIDENCE_BINS) -> pl.DataFrame:
    """Named answers binned by confidence: per bin, the answers, their mean confidence, the
    share right and the gap (share right - mean confidence, in points)."""
    named = predicted.filter(pl.col("family") != UNKNOWN)
    rows = []
    edges = [*bins, 1.000001]
    for lo, hi in zip(edges, edges[1:], strict=False):
        part = named.filter((pl.col("confidence") >= lo) & (pl.col("confidence") < hi))
        n = part.height
        right = part.filter(pl.col("family") == pl.col("controller")).height
        mean = float(part["confidence"].mean()) if n else float("nan")  # type: ignore[arg-type]
        share = right / n if n else float("nan")
        rows.append(
            {
                "confidence": f"[{lo:.2f}, {min(hi, 1.0):.2f}{']' if hi > 1 else ')'}",
                "answers": n,
                "right": right,
                "mean_confidence": mean,
                "share_right": share,
                "gap_points": 100 * (share - mean) if n else float("nan"),
            }
        )
    return pl.DataFrame(rows)
