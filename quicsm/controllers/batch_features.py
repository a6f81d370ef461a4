"""identify's features (:mod:`quicsm.controllers.features`) of every trace at once.

The metrics frame's rows are put trace after trace (each trace's rows in their order) and every
feature is computed over the concatenated columns with segment-wise array operations: counts
and maxima per trace, searches within each trace's times, prefix sums, and one Python loop over
the loss events (each groups the losses within two smoothed RTTs of its first, a short chain).
What is left per item is what fits a curve: the congestion-avoidance intervals that have
:data:`~quicsm.controllers.features.MIN_EPOCH_POINTS` windows or more
(:func:`~quicsm.controllers.features._epoch`) and the cuts with as many windows after them
(:func:`~quicsm.controllers.features._cut_fit`), the same functions the per-trace path calls.

The values are those of :func:`quicsm.controllers.features.trace_features`, to the last bit:
the same float operations on the same operands in the same order (sums that numpy adds
pairwise are added by numpy over the same arrays; running sums are numpy's cumulative sums of
each trace's own rows; medians are the middle of the sorted values, or the two middle ones
added and halved, as ``np.median`` does). A trace whose times are not in order (the readers
never give one) takes the per-trace path.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from quicsm.controllers.features import (
    ACKED_DOWN_SHARE,
    ACKED_UP_SHARE,
    BBR2_MARKERS,
    BELOW_MAX_SHARE,
    COLLAPSE_BELOW,
    DEFAULT_RTT_MS,
    DROP_SHARE,
    FEATURES_SCHEMA,
    LIMITED_SHARE,
    LIMITED_SLACK_BYTES,
    MIN_EPOCH_POINTS,
    MIN_EPOCH_RTTS,
    SEGMENT_BYTES,
    UNDO_RTTS,
    UNDO_SHARE,
    TraceColumns,
    _cut_fit,
    _epoch,
    _probe_rtt_depth,
    _undone_into_slow_start,
    cubic_w_max_after,
    trace_features,
)
from quicsm.controllers.segments import (
    carried_at,
    carried_before,
    medians,
    ranges,
    run_medians,
    segment_sums,
)
from quicsm.core.states import BBR_STATES


class _Columns:
    """The metrics rows of the traces, trace after trace, as the features read them."""

    def __init__(self, metrics: pl.DataFrame, names: list[str]) -> None:
        # each run of rows of one trace (a reader's frame has one per trace) numbered once
        key = metrics["trace"]
        runs = np.flatnonzero(key.ne_missing(key.shift(1)).to_numpy())
        number = {name: k for k, name in enumerate(names)}
        run_codes = np.array(
            [number.get(str(v), -1) for v in key.gather(runs).cast(pl.String).to_list()],
            dtype=np.int64,
        )
        code = np.repeat(run_codes, np.diff(np.append(runs, metrics.height)))
        # the traces' rows already one trace after another, in the traces' order
        self.in_order = bool(np.all(run_codes[1:] > run_codes[:-1]) and np.all(run_codes >= 0))
        if self.in_order:
            order = np.arange(metrics.height)
        else:
            order = np.argsort(code, kind="stable")
            order = order[code[order] >= 0]
        self.n_traces = len(names)
        self.trace = code[order]
        counts = np.bincount(self.trace, minlength=len(names))
        self.ends = np.cumsum(counts)
        self.starts = self.ends - counts

        def floats(name: str) -> np.ndarray:
            column = metrics[name].fill_null(float("nan")).to_numpy().astype(float)
            return column if self.in_order else np.ascontiguousarray(column[order])

        def flags(value: str) -> np.ndarray:
            column = (metrics["event"] == value).fill_null(False).to_numpy()
            return column if self.in_order else column[order]

        self.metrics = metrics
        self._keys: np.ndarray | None = None
        self.order = order
        self.times = floats("time_ms")
        self.cwnd = floats("cwnd_bytes")
        self.flight = floats("bytes_in_flight")
        self.rtt_raw = floats("smoothed_rtt_ms")
        self.is_metrics = flags("metrics")
        self.is_lost = flags("packet_lost")
        self.is_pto = flags("pto")

    def search(self, trace: np.ndarray, values: np.ndarray, side: str) -> np.ndarray:
        """For each value, the row (global) where it would go among its trace's times, as
        ``np.searchsorted`` of the trace's times finds it: one search of all rows, ordered by
        trace and then by time (complex numbers compare by their real part, then their
        imaginary part; a time that is not a number, in a trace out of order, which takes the
        per-trace path, counts as 0 so as not to disturb the order)."""
        if self._keys is None:
            self._keys = np.empty(len(self.times), dtype=complex)
            self._keys.real = self.trace
            self._keys.imag = np.nan_to_num(self.times, nan=0.0)
        query = np.empty(len(values), dtype=complex)
        query.real, query.imag = trace, values
        return np.searchsorted(self._keys, query, side=side)  # type: ignore[call-overload]

    def per_trace(self, flags: np.ndarray) -> np.ndarray:
        """How many rows of each trace have ``flags``."""
        return np.bincount(self.trace[flags], minlength=self.n_traces)

    def unordered(self) -> np.ndarray:
        """The traces whose times are not in order (or not numbers)."""
        t = self.times
        bad = ~(t[1:] >= t[:-1]) & (self.trace[1:] == self.trace[:-1])
        return np.unique(self.trace[1:][bad])

    def trace_columns(self, g: int) -> TraceColumns:
        """Trace ``g``'s rows as the per-trace path reads them."""
        s, e = int(self.starts[g]), int(self.ends[g])
        rows = self.order[s:e]
        return TraceColumns(
            self.metrics["event"].gather(rows).cast(pl.String).to_list(),
            self.times[s:e],
            self.cwnd[s:e],
            self.flight[s:e],
            self.rtt_raw[s:e],
        )


def _transitions_by_trace(transitions: pl.DataFrame) -> tuple[list[str], pl.DataFrame]:
    """The traces in their order of first appearance, and the transitions with each row's trace
    number (``code``) and the end of its interval (``next_ms``: the next row's time in the
    trace, the trace's first ``end_ms`` after its last)."""
    named = transitions.with_columns(pl.col("trace").cast(pl.String).alias("name"))
    names = [str(n) for n in named["name"].unique(maintain_order=True).to_list()]
    frame = named.with_columns(
        pl.col("name")
        .replace_strict(names, list(range(len(names))), return_dtype=pl.Int64)
        .alias("code"),
        pl.col("time_ms").cast(pl.Float64),
    ).with_columns(
        pl.col("time_ms")
        .shift(-1)
        .over("code")
        .fill_null(pl.col("end_ms").first().over("code").cast(pl.Float64))
        .alias("next_ms")
    )
    return names, frame


def _loss_events(
    c: _Columns, is_loss: np.ndarray, rtt: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The loss events of ``_reductions``: (first row, smoothed RTT, horizon) of each. An event
    starts at a loss with a window logged and takes in every loss up to its horizon, two
    smoothed RTTs after its first, pushed to two RTTs after each later loss within four RTTs
    of the first; the next starts at the first loss after the horizon."""
    rows = np.flatnonzero(is_loss)
    times = c.times[rows].tolist()
    unknown = np.isnan(c.cwnd[rows]).tolist()
    rtts = rtt[rows].tolist()
    trace = c.trace[rows].tolist()
    firsts: list[int] = []
    srtts: list[float] = []
    horizons: list[float] = []
    k, n = 0, len(rows)
    while k < n:
        if unknown[k]:
            k += 1
            continue
        srtt = rtts[k] if not math.isnan(rtts[k]) else DEFAULT_RTT_MS
        start, g = times[k], trace[k]
        horizon = start + 2 * srtt
        m = k + 1
        while m < n and trace[m] == g and times[m] <= horizon:
            if times[m] - start < 4 * srtt:
                horizon = max(horizon, times[m] + 2 * srtt)
            m += 1
        firsts.append(int(rows[k]))
        srtts.append(srtt)
        horizons.append(horizon)
        k = m
    return np.array(firsts, dtype=np.int64), np.array(srtts), np.array(horizons)


def _reductions(
    c: _Columns, is_loss: np.ndarray, is_metrics: np.ndarray, rtt: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``features._reductions`` of every trace: (factors, their traces, factors over the
    flight, their traces, collapses per trace)."""
    first, srtt, horizon = _loss_events(c, is_loss, rtt)
    trace = c.trace[first]
    t0 = c.times[first]
    end = np.maximum(c.search(trace, horizon, "right"), first + 1)
    # the most bytes in flight in the RTT before each loss event (0 without any)
    lo = c.search(trace, t0 - srtt, "left")
    hi = c.search(trace, t0, "right")
    flight_before = np.zeros(len(first))
    known_flight = np.concatenate(([0], np.cumsum(~np.isnan(c.flight))))
    some = (hi > lo) & (known_flight[np.maximum(hi, lo)] > known_flight[lo])
    if some.any():
        bounds = np.empty(2 * int(some.sum()), dtype=np.int64)
        bounds[0::2], bounds[1::2] = lo[some], hi[some]
        flight_before[some] = np.fmax.reduceat(np.append(c.flight, np.nan), bounds)[0::2]
    # each event's first row and its later rows with a window logged, in order: every step
    # between two of them that drops the window by more than DROP_SHARE is a reduction
    rows, event = ranges(first, end)
    keep = (rows == first[event]) | (is_metrics[rows] & ~np.isnan(c.cwnd[rows]))
    rows, event = rows[keep], event[keep]
    previous, current = c.cwnd[rows[:-1]], c.cwnd[rows[1:]]
    step = (event[1:] == event[:-1]) & (previous > 0)
    step[step] &= current[step] < (1 - DROP_SHARE) * previous[step]
    factor = current[step] / previous[step]
    of = event[1:][step]
    collapse = factor < COLLAPSE_BELOW
    collapses = np.bincount(trace[of[collapse]], minlength=c.n_traces)
    betas, beta_of = factor[~collapse], of[~collapse]
    against = flight_before[beta_of] > 0
    flights = current[step][~collapse][against] / flight_before[beta_of][against]
    return betas, trace[beta_of], flights, trace[beta_of][against], collapses


def _acked_rounds(
    c: _Columns, is_loss: np.ndarray, is_metrics: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``features._acked_rounds`` of every trace: whether the trace counts rounds by acked
    data, and the cumulative rounds at every row (its trace's own running sum; 0 elsewhere)."""
    n = c.n_traces
    logged = np.flatnonzero(is_metrics & ~np.isnan(c.flight))
    trace = c.trace[logged]
    same = trace[1:] == trace[:-1]
    steps = np.diff(c.flight[logged])
    lossy = np.cumsum(is_loss)
    crossed = lossy[logged[1:]] != lossy[logged[:-1]]
    clean = same & ~crossed
    n_clean = np.bincount(trace[1:][clean], minlength=n)
    n_up = np.bincount(trace[1:][clean & (steps > 0)], minlength=n)
    n_down = np.bincount(trace[1:][clean & (steps < 0)], minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        has = (
            (np.bincount(trace, minlength=n) >= 2)
            & (n_clean > 0)
            & ~(n_up / n_clean < ACKED_UP_SHARE)
            & ~(n_down / n_clean < ACKED_DOWN_SHARE)
        )
    window = carried_at(c.cwnd, c.trace, c.starts)
    acked = np.where(crossed | (steps > 0), 0.0, -steps)
    later = logged[1:][same]
    per_row = np.zeros(len(c.times))
    per_row[later] = acked[same] / np.maximum(np.nan_to_num(window[later], nan=np.inf), 1.0)
    rounds = np.zeros(len(c.times))
    for g in np.flatnonzero(has).tolist():
        s, e = int(c.starts[g]), int(c.ends[g])
        rounds[s:e] = np.cumsum(per_row[s:e])
    return has, rounds


def _limited_rounds(c: _Columns, has: np.ndarray, acked: np.ndarray) -> np.ndarray:
    """``features._window_limited_rounds`` of the traces that count rounds by acked data."""
    window = carried_before(c.cwnd, c.trace, c.starts)
    floor = np.minimum(window - LIMITED_SLACK_BYTES, LIMITED_SHARE * window)
    flight = carried_before(c.flight, c.trace, c.starts)
    limited = np.nan_to_num(flight, nan=-1.0) >= np.nan_to_num(floor, nan=np.inf)
    step = acked - np.concatenate(([0.0], acked[:-1]))
    step[c.starts[c.ends > c.starts]] = acked[c.starts[c.ends > c.starts]] - 0.0
    increments = np.where(limited, step, 0.0)
    counted = np.zeros(len(c.times))
    for g in np.flatnonzero(has).tolist():
        s, e = int(c.starts[g]), int(c.ends[g])
        counted[s:e] = np.cumsum(increments[s:e])
    return counted


class _Intervals:
    """Intervals of the traces (``trace``, ``start``, ``end``; each trace's in their order), as
    ranges ``lo``/``hi`` of the rows with a window logged (positions in ``known``): the rows
    ``features._rows_between`` finds."""

    def __init__(
        self, c: _Columns, known: np.ndarray, trace: np.ndarray, start: np.ndarray, end: np.ndarray
    ) -> None:
        order = np.argsort(trace, kind="stable")
        self.trace, self.start, self.end = trace[order], start[order], end[order]
        first_row = c.search(self.trace, self.start, "left")
        last_row = c.search(self.trace, self.end, "left")
        self.lo = np.searchsorted(known, first_row, side="left")
        self.hi = np.maximum(np.searchsorted(known, last_row, side="left"), self.lo)

    def of(self, c: _Columns, known: np.ndarray, traces: np.ndarray) -> _Intervals:
        """The intervals of the traces flagged in ``traces``."""
        pick = traces[self.trace]
        return _Intervals(c, known, self.trace[pick], self.start[pick], self.end[pick])


def _epochs(
    c: _Columns,
    known: np.ndarray,
    spans: _Intervals,
    rtt: np.ndarray,
    has_acked: np.ndarray,
    acked: np.ndarray,
) -> list[list[tuple[float, float, float, float]]]:
    """``features._epochs`` of every trace (each trace's usable intervals in order)."""
    out: list[list[tuple[float, float, float, float]]] = [[] for _ in range(c.n_traces)]
    window = c.cwnd[known]
    # the points each interval keeps (one per window value): its first and every change after
    changes = np.concatenate(([0], np.cumsum(window[1:] != window[:-1])))
    filled = spans.hi > spans.lo
    points = np.zeros(len(spans.lo), dtype=np.int64)
    points[filled] = 1 + changes[spans.hi[filled] - 1] - changes[spans.lo[filled]]
    usable = (spans.hi - spans.lo >= 2) & (points >= MIN_EPOCH_POINTS)
    # ack-clocked rounds: too few between the first point kept and the last (the check of
    # features._epoch, on those two points)
    changed = np.concatenate(
        ([-1], np.where(window[1:] != window[:-1], np.arange(1, len(window)), -1))
    )
    last_change = np.maximum.accumulate(changed) if len(changed) else changed
    acked_spans = np.flatnonzero(usable & has_acked[spans.trace])
    if len(acked_spans):
        lo, hi = spans.lo[acked_spans], spans.hi[acked_spans]
        last_point = np.maximum(last_change[hi - 1], lo)
        total = acked[known[last_point]] - acked[known[lo]]
        usable[acked_spans[total < MIN_EPOCH_RTTS]] = False
    for k in np.flatnonzero(usable).tolist():
        rows = known[spans.lo[k] : spans.hi[k]]
        g = int(spans.trace[k])
        epoch = _epoch(
            c.times[rows], c.cwnd[rows], rtt[rows], acked[rows] if has_acked[g] else None
        )
        if epoch is not None:
            out[g].append(epoch)
    return out


def _steps(
    c: _Columns, known: np.ndarray, spans: _Intervals
) -> tuple[list[float | None], list[float | None]]:
    """``features._steps`` of every trace."""
    step_bytes: list[float | None] = [None] * c.n_traces
    step_share: list[float | None] = [None] * c.n_traces
    rise = np.diff(c.cwnd[known])  # rise[p]: from the p-th window logged to the next
    pairs, owner = ranges(spans.lo, np.maximum(spans.hi - 1, spans.lo))
    d = rise[pairs]
    up = d > 0
    increases, trace = np.round(d[up]), spans.trace[owner][up]
    counts = np.bincount(trace, minlength=c.n_traces)
    order = np.lexsort((increases, trace))
    increases, trace = increases[order], trace[order]
    if not len(increases):
        return step_bytes, step_share
    run = np.concatenate(([True], (trace[1:] != trace[:-1]) | (increases[1:] != increases[:-1])))
    run_start = np.flatnonzero(run)
    run_length = np.diff(np.append(run_start, len(increases)))
    run_trace = trace[run_start]
    best = np.lexsort((np.arange(len(run_start)), -run_length, run_trace))
    first = np.concatenate(([True], run_trace[best][1:] != run_trace[best][:-1]))
    for r in best[first].tolist():
        g = int(run_trace[r])
        if counts[g] < MIN_EPOCH_POINTS:
            continue
        step_bytes[g] = float(increases[run_start[r]])
        step_share[g] = float(np.int64(run_length[r]) / np.int64(counts[g]))
    return step_bytes, step_share


def _growth_below_max(
    c: _Columns,
    known: np.ndarray,
    spans: _Intervals,
    counted: np.ndarray,
    applies: np.ndarray,
    beta: np.ndarray,
) -> tuple[list[float | None], list[float]]:
    """``features._growth_below_max`` of every trace (``applies``: it counts rounds by acked
    data and its median factor is between :data:`COLLAPSE_BELOW` and 1)."""
    growth: list[float | None] = [None] * c.n_traces
    rounds_seen = [0.0] * c.n_traces
    use = np.flatnonzero(applies[spans.trace] & (spans.hi - spans.lo >= 2))
    window = c.cwnd[known]
    pairs, owner = ranges(spans.lo[use], spans.hi[use] - 1)
    g = spans.trace[use][owner]
    below = window[pairs] < BELOW_MAX_SHARE * window[spans.lo[use][owner]] / beta[g]
    rounds = (counted[known[pairs + 1]] - counted[known[pairs]])[below]
    grown = np.maximum(window[pairs + 1] - window[pairs], 0.0)[below]
    n_below = np.bincount(owner[below], minlength=len(use))
    ends = np.cumsum(n_below)
    rounds_sums = segment_sums(rounds, ends - n_below, ends)
    grown_sums = segment_sums(grown, ends - n_below, ends)
    totals = [0.0] * c.n_traces
    for trace, r, w in zip(
        spans.trace[use].tolist(), rounds_sums.tolist(), grown_sums.tolist(), strict=True
    ):
        rounds_seen[trace] += r
        totals[trace] += w
    for trace in np.flatnonzero(applies).tolist():
        if rounds_seen[trace] >= 2.0:
            growth[trace] = totals[trace] / SEGMENT_BYTES / rounds_seen[trace]
    return growth, rounds_seen


def _cut_fits(
    c: _Columns,
    known: np.ndarray,
    is_loss: np.ndarray,
    rtt: np.ndarray,
    has_acked: np.ndarray,
    counted: np.ndarray,
) -> tuple[list[list[float]], np.ndarray, np.ndarray]:
    """``features._cut_fits`` of every trace: the scores of its cuts, its cuts undone and those
    that went back into slow start."""
    n = c.n_traces
    scores: list[list[float]] = [[] for _ in range(n)]
    undone = np.zeros(n, dtype=np.int64)
    into_slow_start = np.zeros(n, dtype=np.int64)
    window = c.cwnd[known]
    trace_of = c.trace[known]
    # one-step drops between two windows logged in a row (features._cuts)
    before, after = window[:-1], window[1:]
    drop = (
        (trace_of[1:] == trace_of[:-1])
        & (before > 0)
        & (COLLAPSE_BELOW * before <= after)
        & (after < (1 - DROP_SHARE) * before)
    )
    p = np.flatnonzero(drop)  # the cut from known[p] to known[p + 1]
    if not len(p):
        return scores, undone, into_slow_start
    a, b = known[p], known[p + 1]
    trace = c.trace[b]
    raw = rtt[b]
    srtt = np.where(np.isnan(raw), DEFAULT_RTT_MS, raw)
    t_cut = c.times[b]
    losses = np.concatenate(([0], np.cumsum(is_loss)))
    near = (
        losses[c.search(trace, t_cut, "right")] - losses[c.search(trace, t_cut - 2 * srtt, "left")]
    )
    cut = (near > 0) & (srtt > 0)
    p, a, b, trace, srtt, t_cut = p[cut], a[cut], b[cut], trace[cut], srtt[cut], t_cut[cut]
    w_before, w_after = window[p], window[p + 1]
    # undone: within UNDO_RTTS smoothed RTTs and before the window next falls by DROP_SHARE,
    # a step back to UNDO_SHARE of the window before the cut (the rows scanned end past the
    # time limit, found with some slack and checked row by row)
    margin = 1e-9 * (np.abs(t_cut) + np.abs(srtt)) + 1e-300
    limit = c.search(trace, t_cut + UNDO_RTTS * srtt + margin, "right")
    scan_end = np.maximum(np.searchsorted(known, limit, side="left"), p + 2)
    scanned, owner = ranges(p + 2, scan_end)
    previous, current = window[scanned - 1], window[scanned]
    stop = (c.times[known[scanned]] - t_cut[owner] > UNDO_RTTS * srtt[owner]) | (
        current < (1 - DROP_SHARE) * previous
    )
    target = UNDO_SHARE * w_before[owner]
    back = (
        ~stop
        & (previous < target)
        & (target <= current)
        & (current - previous >= 0.5 * (w_before[owner] - w_after[owner]))
    )
    first_stop = np.full(len(p), np.iinfo(np.int64).max)
    np.minimum.at(first_stop, owner[stop], scanned[stop])
    first_back = np.full(len(p), np.iinfo(np.int64).max)
    np.minimum.at(first_back, owner[back], scanned[back])
    is_undone = first_back < first_stop
    # the rows with a window logged after each cut and before the next loss
    loss_rows = np.flatnonzero(is_loss)
    after_cut = c.search(trace, t_cut, "right")
    next_loss = np.searchsorted(loss_rows, after_cut, side="left")
    ends = c.ends[trace]
    has_next = next_loss < len(loss_rows)
    has_next[has_next] &= loss_rows[next_loss[has_next]] < ends[has_next]
    end_time = np.where(
        has_next,
        c.times[loss_rows[np.minimum(next_loss, max(len(loss_rows) - 1, 0))]]
        if len(loss_rows)
        else 0.0,
        c.times[ends - 1] + 1.0,
    )
    before_end = c.search(trace, end_time, "left")
    lo = np.searchsorted(known, after_cut, side="left")
    hi = np.maximum(np.searchsorted(known, before_end, side="left"), lo)
    # too short a time after the cut (the check of features._cut_fit, on the last row)
    spans_short = np.zeros(len(p), dtype=bool)
    filled = hi > lo
    spans_short[filled] = (c.times[known[hi[filled] - 1]] - t_cut[filled]) < (
        MIN_EPOCH_RTTS * srtt[filled]
    )
    last_w_max: list[float | None] = [None] * n
    for k in range(len(p)):
        g = int(trace[k])
        if is_undone[k]:
            undone[g] += 1
            # the trace's rows from the cut's on: the function reads none before
            s, e = int(a[k]), int(c.ends[g])
            into_slow_start[g] += _undone_into_slow_start(
                c.times[s:e], c.cwnd[s:e], rtt[s:e], 0, int(b[k]) - s
            )
            continue
        w_max = cubic_w_max_after(float(w_before[k]) / SEGMENT_BYTES, last_w_max[g])
        last_w_max[g] = w_max
        if hi[k] - lo[k] < MIN_EPOCH_POINTS or spans_short[k]:
            continue
        rows = known[lo[k] : hi[k]]
        score = _cut_fit(
            c.times[rows],
            c.cwnd[rows],
            counted[rows] - counted[b[k]] if has_acked[g] else None,
            t_cut=t_cut[k],
            srtt=float(srtt[k]),
            before=w_before[k],
            after=w_after[k],
            w_max=w_max,
        )
        if score is not None:
            scores[g].append(score)
    return scores, undone, into_slow_start


def _recovery_markers(c: _Columns, transitions: pl.DataFrame, no_losses: np.ndarray) -> np.ndarray:
    """The rows ``features._recovery_markers`` marks as losses in the traces without loss
    events: the metrics row just before each entry into ``Recovery``."""
    entries = transitions.filter(pl.col("state").cast(pl.String) == "Recovery")
    code = entries["code"].to_numpy()
    pick = no_losses[code]
    code, t = code[pick], entries["time_ms"].to_numpy().astype(float)[pick]
    order = np.argsort(code, kind="stable")
    code, t = code[order], t[order]
    k = c.search(code, t, "left") - 1
    inside = k >= c.starts[code]
    return k[inside]


def compute_features(metrics: pl.DataFrame, transitions: pl.DataFrame) -> pl.DataFrame:
    """One row of :data:`FEATURES_SCHEMA` per trace of ``transitions`` (in its order)."""
    if not transitions.height:
        return pl.DataFrame(schema=FEATURES_SCHEMA)
    names, states = _transitions_by_trace(transitions)
    c = _Columns(metrics, names)
    n = c.n_traces
    count = c.per_trace
    # smoothed RTTs in milliseconds (features._rtt_ms): a trace whose first RTT is 0.333 and
    # whose median is below 1 logs seconds
    has_rtt = ~np.isnan(c.rtt_raw)
    rtt_rows = np.flatnonzero(has_rtt)
    first_rtt = np.full(n, np.nan)
    with_rtt = np.unique(c.trace[rtt_rows])
    first_rtt[with_rtt] = c.rtt_raw[rtt_rows[np.searchsorted(rtt_rows, c.starts[with_rtt])]]
    median_raw = run_medians(c.rtt_raw[rtt_rows], c.trace[rtt_rows], n)
    seconds = (np.abs(first_rtt - 0.333) < 0.0005) & (median_raw < 1.0)
    rtt = np.where(seconds[c.trace], c.rtt_raw * 1000.0, c.rtt_raw)
    rtt_median = median_raw.copy()
    if seconds.any():
        scaled = seconds[c.trace[rtt_rows]]
        rtt_median[seconds] = run_medians(rtt[rtt_rows][scaled], c.trace[rtt_rows][scaled], n)[
            seconds
        ]
    # the loss markers: loss events, or entries into Recovery where none is logged
    n_losses = count(c.is_lost)
    is_metrics = c.is_metrics.copy()
    is_loss = c.is_lost | c.is_pto
    marked = _recovery_markers(c, states, n_losses == 0)
    marked = marked[is_metrics[marked]]
    is_metrics[marked] = False
    is_loss[marked] = True
    known = np.flatnonzero(~np.isnan(c.cwnd))
    # window reductions
    betas, beta_trace, flights, flight_trace, collapses = _reductions(c, is_loss, is_metrics, rtt)
    n_betas = np.bincount(beta_trace, minlength=n)
    beta = medians(betas, beta_trace, n)
    spread = medians(np.abs(betas - beta[beta_trace]), beta_trace, n)
    beta_flight = medians(flights, flight_trace, n)
    has_acked, acked = _acked_rounds(c, is_loss, is_metrics)
    counted = _limited_rounds(c, has_acked, acked)
    # congestion-avoidance intervals, else (no usable one, some reduction) between losses
    ca = states.filter(pl.col("state").cast(pl.String) == "CongestionAvoidance")
    spans = _Intervals(
        c,
        known,
        ca["code"].to_numpy(),
        ca["time_ms"].to_numpy().astype(float),
        ca["next_ms"].to_numpy().astype(float),
    )
    epochs = _epochs(c, known, spans, rtt, has_acked, acked)
    fallback = np.array([not e for e in epochs]) & (n_betas > 0)
    if fallback.any():
        losses = np.flatnonzero(is_loss)
        pair = c.trace[losses[1:]] == c.trace[losses[:-1]]
        k, nxt = losses[:-1][pair], losses[1:][pair]
        srtt = np.where(np.isnan(rtt[k]), DEFAULT_RTT_MS, rtt[k])
        start = c.times[k] + 2 * srtt
        use = (start < c.times[nxt]) & fallback[c.trace[k]]
        keep = ~fallback[spans.trace]
        spans = _Intervals(
            c,
            known,
            np.concatenate((spans.trace[keep], c.trace[k][use])),
            np.concatenate((spans.start[keep], start[use])),
            np.concatenate((spans.end[keep], c.times[nxt][use])),
        )
        again = _epochs(c, known, spans.of(c, known, fallback), rtt, has_acked, acked)
        for g in np.flatnonzero(fallback).tolist():
            epochs[g] = again[g]
    step_bytes, step_share = _steps(c, known, spans)
    applies = has_acked & (beta >= COLLAPSE_BELOW) & (beta < 1.0)
    below_max, rounds_below = _growth_below_max(c, known, spans, counted, applies, beta)
    cuts, undone, undone_slow_start = _cut_fits(c, known, is_loss, rtt, has_acked, counted)
    # phases and states
    phases = (
        states.group_by("code")
        .agg(
            pl.col("vantage").first(),
            pl.col("state").cast(pl.String).is_in(list(BBR_STATES)).sum().alias("bbr"),
            pl.col("raw_state")
            .cast(pl.String)
            .str.to_lowercase()
            .str.contains("|".join(BBR2_MARKERS), literal=False)
            .fill_null(False)
            .sum()
            .alias("bbr2"),
            (pl.col("source").cast(pl.String) == "explicit").any().alias("explicit"),
        )
        .sort("code")
    )
    vantage = [str(v) for v in phases["vantage"].to_list()]
    bbr = phases["bbr"].to_list()
    bbr2 = phases["bbr2"].to_list()
    explicit = phases["explicit"].fill_null(False).to_list()
    # the first window logged and the largest
    first_known = np.searchsorted(known, c.starts)
    has_cwnd = (first_known < len(known)) & (
        known[np.minimum(first_known, max(len(known) - 1, 0))] < c.ends if len(known) else False
    )
    largest = np.full(n, np.nan)
    gainful = np.flatnonzero(has_cwnd)
    if len(gainful):
        last_known = np.searchsorted(known, c.ends[gainful])
        bounds = np.empty(2 * len(gainful), dtype=np.int64)
        bounds[0::2], bounds[1::2] = first_known[gainful], last_known
        largest[gainful] = np.maximum.reduceat(np.append(c.cwnd[known], np.nan), bounds)[0::2]
    n_metrics = count(c.is_metrics)
    # the medians over each trace's epochs and cut fits
    fitted = np.array([g for g in range(n) for _ in epochs[g]], dtype=np.int64)
    fits = np.array([e for own in epochs for e in own], dtype=float).reshape(-1, 4)
    growth, curvature, cubic_fit = (medians(fits[:, k], fitted, n) for k in (0, 1, 3))
    scored = np.array([g for g in range(n) for _ in cuts[g]], dtype=np.int64)
    cut_fit = medians(np.array([x for own in cuts for x in own], dtype=float), scored, n)
    n_flights = np.bincount(flight_trace, minlength=n)
    rows: list[dict[str, Any]] = []
    for g in range(n):
        first_window = c.cwnd[known[first_known[g]]] if has_cwnd[g] else math.nan
        rows.append(
            {
                "trace": names[g],
                "vantage": vantage[g],
                "n_metrics": int(n_metrics[g]),
                "cwnd_gain": float(largest[g] / first_window)
                if has_cwnd[g] and first_window > 0
                else None,
                "n_losses": int(n_losses[g]),
                "n_reductions": int(n_betas[g]),
                "n_collapses": int(collapses[g]),
                "beta": _some(beta[g], n_betas[g]),
                "beta_spread": float(spread[g]) if n_betas[g] >= 2 else None,
                "beta_flight": _some(beta_flight[g], n_flights[g]),
                "n_epochs": len(epochs[g]),
                "epoch_rtts": float(sum(e[2] for e in epochs[g])),
                "round_basis": "acked" if has_acked[g] else "rtt",
                "step_bytes": step_bytes[g],
                "step_share": step_share[g],
                "growth": _some(growth[g], len(epochs[g])),
                "curvature": _some(curvature[g], len(epochs[g])),
                "cubic_fit": _some(cubic_fit[g], len(epochs[g])),
                "growth_below_max": below_max[g],
                "rounds_below_max": rounds_below[g],
                "cut_fit": _some(cut_fit[g], len(cuts[g])),
                "n_cut_fits": len(cuts[g]),
                "n_undone": int(undone[g]),
                "n_undone_slow_start": int(undone_slow_start[g]),
                "rtt_ms": _value(rtt_median[g]),
                "bbr_phases": int(bbr[g]),
                "bbr2_phases": int(bbr2[g]),
                "probe_rtt_depth": None,
                "explicit_states": bool(explicit[g]),
            }
        )
    # the per-trace path where it is needed: BBR's ProbeRTT depth, traces out of time order
    unordered = set(c.unordered().tolist())
    for g in sorted({g for g in range(n) if bbr[g]} | unordered):
        own = states.filter(pl.col("code") == g).drop("name", "code", "next_ms")
        if g in unordered:
            rows[g] = trace_features(names[g], vantage[g], c.trace_columns(g), own)
        else:
            s, e = int(c.starts[g]), int(c.ends[g])
            rows[g]["probe_rtt_depth"] = _probe_rtt_depth(own, c.times[s:e], c.cwnd[s:e])
    return pl.DataFrame(rows, schema=FEATURES_SCHEMA, orient="row")


def _value(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def _some(median: float, count: int) -> float | None:
    """A median of ``count`` values: None of none (NaN stays NaN, as ``np.median`` gives it)."""
    return float(median) if count else None
