"""Segment-wise numpy for columns that hold several traces' rows one trace after another
(:mod:`quicsm.controllers.batch_features`): concatenated ranges, medians, sums and values
carried forward per segment, each the value numpy gives for the segment alone, to the bit."""

from __future__ import annotations

import numpy as np


def ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions of every range [lo, hi) one after the other, and the range each is of
    (empty ranges give nothing)."""
    lengths = np.maximum(hi - lo, 0)
    owner = np.repeat(np.arange(len(lo)), lengths)
    if not len(owner):
        return owner.astype(np.int64), owner.astype(np.int64)
    offsets = np.cumsum(lengths) - lengths
    return lo[owner] + (np.arange(len(owner)) - offsets[owner]), owner


def medians(values: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """The median of each group's values (NaN for a group without any), as ``np.median``
    computes it: the middle value, or the two middle ones added and halved."""
    out = np.full(n_groups, np.nan)
    if not len(values):
        return out
    order = np.lexsort((values, group))
    ranked = values[order]
    counts = np.bincount(group, minlength=n_groups)
    starts = np.cumsum(counts) - counts
    odd = counts % 2 == 1
    some = counts > 0
    upper = starts + counts // 2
    # np.median's mean of the middle value(s) adds them to 0.0 (so -0.0 comes out 0.0)
    out[some & odd] = 0.0 + ranked[upper[some & odd]]
    even = some & ~odd
    out[even] = ((0.0 + ranked[upper[even] - 1]) + ranked[upper[even]]) / 2.0
    out[np.bincount(group[np.isnan(values)], minlength=n_groups) > 0] = np.nan  # as np.median
    return out


def run_medians(values: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """:func:`medians` of values whose groups come one after the other (``group``
    non-decreasing): ``np.median`` of each group's run."""
    out = np.full(n_groups, np.nan)
    bounds = np.flatnonzero(np.diff(group)) + 1
    for first, last in zip(
        np.concatenate(([0], bounds)).tolist(), np.append(bounds, len(values)).tolist(), strict=True
    ):
        size = last - first
        if size % 2:
            out[group[first]] = 0.0 + np.partition(values[first:last], size // 2)[size // 2]
        elif size:
            middle = np.partition(values[first:last], (size // 2 - 1, size // 2))
            out[group[first]] = ((0.0 + middle[size // 2 - 1]) + middle[size // 2]) / 2.0
    return out


def segment_sums(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``values[lo:hi].sum()`` of every range, as numpy sums each (0 for an empty one): one or
    two values added directly, more by numpy (whose order of additions, in pairs and blocks,
    is its own)."""
    out = np.zeros(len(lo))
    lengths = hi - lo
    one = lengths == 1
    out[one] = values[lo[one]]
    two = lengths == 2
    out[two] = values[lo[two]] + values[lo[two] + 1]
    for k in np.flatnonzero(lengths > 2).tolist():
        out[k] = values[lo[k] : hi[k]].sum()
    return out


def carried_before(values: np.ndarray, trace: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The last value logged strictly before each row in its trace (NaN before the first)."""
    if not len(values):
        return values.copy()
    known = ~np.isnan(values)
    last = np.maximum.accumulate(np.where(known, np.arange(len(values)), -1))
    before = np.concatenate(([-1], last[:-1]))
    valid = before >= starts[trace]
    return np.where(valid, values[np.maximum(before, 0)], np.nan)


def carried_at(values: np.ndarray, trace: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The last value logged at or before each row in its trace (NaN before the first)."""
    if not len(values):
        return values.copy()
    known = ~np.isnan(values)
    last = np.maximum.accumulate(np.where(known, np.arange(len(values)), -1))
    valid = last >= starts[trace]
    return np.where(valid, values[np.maximum(last, 0)], np.nan)
