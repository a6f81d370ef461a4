"""Statistics of a transitions frame: time in state, transition probabilities, dwell times.

Everything here is computed from the canonical transitions frame
(:data:`quicsm.core.frames.TRANSITIONS_SCHEMA`: one row per state entered, ``end_ms`` the time of
the
trace's last event), sorted by ``(trace, time_ms)`` first unless it already is. Per-row work is
vectorised — polars for selection, sorting and output tables, numpy views of the same columns
for the arithmetic (shifts, one-byte radix sorts, ``bincount``) — with no Python loop over rows:
10⁷ transitions take about the time of a plain polars group-by (``benchmarks/bench_stats.py``).

Definitions
-----------
*visit*
    One row of the transitions frame: the trace entered ``state`` at ``time_ms``.
*dwell time* of a visit
    ``next time_ms − time_ms`` where *next* is the following row of the same trace. **Censoring
    rule:** the last visit of a trace has no successor, so it is taken to last until the trace's
    last event, ``end_ms``. Such a visit is marked ``censored`` (its true length is at least that).
*trace duration*
    The sum of its dwell times = ``end_ms − (time of its first row)``.
*time in state* of a trace
    The sum of the dwell times of its visits to a state, in ms and as a ``fraction`` of the trace
    duration. Fractions of a trace sum to 1; a trace of zero duration has null fractions.
*pooled fraction* (``time_in_state_summary``)
    Total time in the state over all traces divided by the total duration of all traces (what a
    reader of the paper's Fig. 13 would compute from concatenated logs); ``mean_fraction`` is the
    unweighted mean of the per-trace fractions over traces of positive duration.
*observed transition chain*
    Per trace: ``INITIAL → first state → … → last state → TERMINAL`` (the dummy nodes of Synoptic).
*transition probability* ``P(source → target)``
    The share of the source's outgoing transitions (TERMINAL included) that go to target; sums to
    1 over the targets of each source.

Confidence intervals of transition probabilities
------------------------------------------------
95 % **Wilson score intervals with a cluster-robust effective sample size** (Korn & Graubard's
design-effect adjustment). Transitions inside one trace are not independent (one connection that
keeps bouncing between Recovery and CongestionAvoidance contributes many correlated
transitions), so a plain Wilson interval over all transitions would be too narrow. The trace is
the unit of replication: with ``y_i`` the transitions source→target in trace *i*, ``n_i`` the
transitions out of source in trace *i*, ``m`` the traces with ``n_i > 0`` and ``p = Σy/Σn``, the
cluster-robust (ratio-estimator) variance is ``m/(m−1) · Σ(y_i − p·n_i)² / (Σn)²``. Its ratio to the
binomial variance ``p(1−p)/Σn`` is the design effect ``deff`` (floored at 1, so the interval is
never narrower than plain Wilson); the Wilson interval is then computed with ``n_eff = Σn / deff``.
We chose this over a trace-level bootstrap because it respects the same dependence structure, is
closed-form (no resampling seed, byte-identical output, fast on 10⁷ transitions) and, being
Wilson, stays inside [0, 1]. At p = 0 or 1 the design effect cannot be estimated (both
variances are 0), so the interval counts each trace once (``n_eff = m``, see
:mod:`quicsm.stats.intervals`). With a single trace (``m = 1``) the dependence cannot be
estimated and the interval is plain Wilson.

Dwell-time quantiles use linear interpolation between order statistics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl

from quicsm.core.errors import ModelError
from quicsm.core.frames import KEY_DTYPE
from quicsm.core.states import CANONICAL_STATES, STATE_DTYPE
from quicsm.stats.intervals import Z95 as Z95
from quicsm.stats.intervals import effective_n_expr, wilson_expr

#: the Wilson interval as polars expressions (see :mod:`quicsm.stats.intervals`)
wilson_interval = wilson_expr

INITIAL: Final[str] = "INITIAL"
TERMINAL: Final[str] = "TERMINAL"
#: labels of the observed chain: the dummy INITIAL, every canonical state, the dummy TERMINAL.
NODE_LABELS: Final[tuple[str, ...]] = (INITIAL, *CANONICAL_STATES, TERMINAL)
#: polars dtype of ``source`` / ``target`` columns.
LABEL_DTYPE: Final[pl.Enum] = pl.Enum(list(NODE_LABELS))
_TERMINAL_CODE: Final[int] = len(NODE_LABELS) - 1


_STATE_LABELS = pl.Series("state", list(CANONICAL_STATES), dtype=STATE_DTYPE)
_NODE_LABELS = pl.Series("label", list(NODE_LABELS), dtype=LABEL_DTYPE)

TIME_IN_STATE_SCHEMA: Final[dict[str, pl.DataType]] = {
    "trace": KEY_DTYPE,
    "state": STATE_DTYPE,
    "duration_ms": pl.Float64(),
    "fraction": pl.Float64(),
}
TIME_IN_STATE_SUMMARY_SCHEMA: Final[dict[str, pl.DataType]] = {
    "state": STATE_DTYPE,
    "seconds": pl.Float64(),
    "fraction": pl.Float64(),
    "mean_fraction": pl.Float64(),
    "traces": pl.Int64(),
}
TRANSITION_COUNTS_SCHEMA: Final[dict[str, pl.DataType]] = {
    "trace": KEY_DTYPE,
    "source": LABEL_DTYPE,
    "target": LABEL_DTYPE,
    "count": pl.Int64(),
}
TRANSITION_PROBABILITIES_SCHEMA: Final[dict[str, pl.DataType]] = {
    "source": LABEL_DTYPE,
    "target": LABEL_DTYPE,
    "count": pl.Int64(),
    "traces": pl.Int64(),
    "probability": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
}
DWELL_TIMES_SCHEMA: Final[dict[str, pl.DataType]] = {
    "trace": KEY_DTYPE,
    "state": STATE_DTYPE,
    "dwell_ms": pl.Float64(),
    "censored": pl.Boolean(),
}
DWELL_SUMMARY_SCHEMA: Final[dict[str, pl.DataType]] = {
    "state": STATE_DTYPE,
    "visits": pl.Int64(),
    "censored": pl.Int64(),
    "mean_ms": pl.Float64(),
    "median_ms": pl.Float64(),
    "p10_ms": pl.Float64(),
    "p90_ms": pl.Float64(),
}


class Visits:
    """The transitions frame reduced to what statistics need, computed once.

    Columns of :attr:`frame`: ``tid`` (UInt32, index into :attr:`traces`), ``code`` (UInt8,
    physical code of the state in :data:`STATE_DTYPE`), ``dwell_ms`` (Float64), ``total_ms``
    (Float64: the duration of the visit's trace), ``first`` and ``last`` (Boolean: first / last
    visit of its trace). :attr:`traces` holds the trace ids in ``tid`` order (sorted).

    The per-row arithmetic runs on the columns' numpy views (zero-copy): it is a handful of
    vectorised passes, and avoids the expression engine's per-column overhead on 10⁷ rows.
    """

    def __init__(self, transitions: pl.DataFrame | pl.LazyFrame) -> None:
        df = _prepare(transitions)
        n = df.height
        tid = df.get_column("tid").to_numpy()
        time = df.get_column("time_ms").to_numpy()
        end = df.get_column("end_ms").to_numpy()
        code = df.get_column("state").to_physical().to_numpy().astype(np.uint8, copy=False)
        first = np.ones(n, dtype=bool)
        first[1:] = tid[1:] != tid[:-1]
        last = np.ones(n, dtype=bool)
        last[:-1] = first[1:]
        dwell = np.empty(n, dtype=np.float64)
        dwell[:-1] = time[1:] - time[:-1]
        dwell[last] = end[last] - time[last]  # censoring rule: the last state lasts until end_ms
        starts, ends = np.flatnonzero(first), np.flatnonzero(last)
        total = (end[ends] - time[starts])[tid]
        negative = np.flatnonzero(dwell < 0)
        if negative.size:
            i = int(negative[0])
            raise ModelError(
                f"trace {df.get_column('trace')[i]!r}: end_ms {end[i]} is before its last "
                f"transition at {time[i]} ms (expected end_ms >= every time_ms of the trace)"
            )
        self.traces: pl.Series = df.get_column("trace").gather(starts)
        self.frame: pl.DataFrame = pl.DataFrame(
            {
                "tid": pl.Series(tid, dtype=pl.UInt32),
                "code": pl.Series(code, dtype=pl.UInt8),
                "dwell_ms": dwell,
                "total_ms": total,
                "first": first,
                "last": last,
            }
        )
        self._chain: _Chain | None = None

    @classmethod
    def of_sequences(cls, codes: np.ndarray, lengths: np.ndarray) -> Visits:
        """The visits of state sequences given as codes (the physical codes of
        :data:`STATE_DTYPE`, one sequence after another, ``lengths[i]`` codes each), without
        building a transitions frame: trace ``i`` is named by its position, zero-padded to 12
        digits, and its visits last one millisecond each but the last, which lasts none (what
        a frame with the positions as times and ``end_ms`` at the last one gives)."""
        n = int(lengths.sum())
        tid = np.repeat(np.arange(len(lengths), dtype=np.uint32), lengths)
        ends = np.cumsum(lengths) - 1
        last = np.zeros(n, dtype=bool)
        last[ends] = True
        first = np.zeros(n, dtype=bool)
        first[ends - lengths + 1] = True
        dwell = np.where(last, 0.0, 1.0)
        visits = cls.__new__(cls)
        visits.traces = (
            pl.Series("trace", np.arange(len(lengths), dtype=np.int64), dtype=pl.Int64)
            .cast(pl.String)
            .str.zfill(12)
            .cast(KEY_DTYPE)
        )
        visits.frame = pl.DataFrame(
            {
                "tid": pl.Series(tid, dtype=pl.UInt32),
                "code": pl.Series(codes.astype(np.uint8, copy=False), dtype=pl.UInt8),
                "dwell_ms": dwell,
                "total_ms": np.repeat(lengths - 1, lengths).astype(np.float64),
                "first": first,
                "last": last,
            }
        )
        visits._chain = None
        return visits

    @property
    def n_traces(self) -> int:
        return self.traces.len()

    @property
    def n_visits(self) -> int:
        return self.frame.height

    def trace_names(self, tid: str = "tid") -> pl.Expr:
        """Expression turning a ``tid`` column into trace ids."""
        return pl.lit(self.traces).gather(pl.col(tid)).alias("trace")

    def chain(self) -> _Chain:
        """Per-trace counts of states and transitions (computed once, see :class:`_Chain`)."""
        if self._chain is None:
            self._chain = _Chain(self)
        return self._chain


#: codes of labels fit in 5 bits, so (source, target) pairs fit in 10 bits (two bytes): room
#: for the paper's states, BBR's, Unknown, ApplicationLimited's causes, INITIAL and TERMINAL
_BITS: Final[int] = 32
assert len(NODE_LABELS) <= _BITS


def _runs(
    keys: np.ndarray, tid: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Group rows by (key, trace) without hashing: a stable radix sort by the small key keeps
    each key's rows in trace order, so equal (key, trace) rows become adjacent. Returns the
    permutation, the start of every run in it, the run lengths, and every run's key and trace."""
    order = np.argsort(keys, kind="stable")  # a radix sort for keys of one or two bytes
    k, t = keys[order], tid[order]
    brk = np.ones(len(k), dtype=bool)
    brk[1:] = (k[1:] != k[:-1]) | (t[1:] != t[:-1])
    starts = np.flatnonzero(brk)
    lengths = np.diff(np.append(starts, len(k)))
    return order, starts, lengths, k[starts], t[starts]


class _Chain:
    """Counts of the observed chain per trace, as flat arrays.

    *State runs*: one per (state, trace) — ``state_code``, ``state_tid``, ``state_visits``
    (visits of the state in the trace = transitions out of it); ``state_order`` is the
    permutation of visits that puts them in (state, trace) order and ``state_bounds`` where each
    state's visits begin in it. *Pair runs*: one per (source, target, trace) — ``pair``
    (``source * 32 + target`` in :data:`NODE_LABELS` codes), ``pair_tid``, ``pair_count``.
    Totals per pair: ``count``, ``traces``, ``syy`` (Σ y_i²), ``syn`` (Σ y_i·n_i); per source
    label: ``n`` (Σ n_i), ``snn`` (Σ n_i²), ``m`` (traces). These are the sums the
    cluster-robust interval needs.
    """

    def __init__(self, v: Visits) -> None:
        f = v.frame
        tid = f.get_column("tid").to_numpy()
        code = f.get_column("code").to_numpy()
        first = f.get_column("first").to_numpy()
        last = f.get_column("last").to_numpy()
        n_traces = v.n_traces
        size = _BITS * _BITS
        # transitions: INITIAL -> first state, then each visit -> its successor (or TERMINAL)
        label = code.astype(np.uint16) + np.uint16(1)
        nxt = np.empty_like(label)
        nxt[:-1] = label[1:]
        nxt[last] = _TERMINAL_CODE
        steps = label * np.uint16(_BITS) + nxt  # the pair leaving each visit
        starts_pair = label[first]  # INITIAL (code 0) -> first state
        # states per trace; n_i of a visit = visits of its state in its trace
        order, starts, lengths, self.state_code, self.state_tid = _runs(code, tid)
        self.state_order = order
        self.state_starts = starts
        self.state_bounds = np.concatenate(
            [[0], np.cumsum(np.bincount(code, minlength=len(CANONICAL_STATES)))]
        )
        self.state_visits = lengths
        n_i = np.repeat(lengths.astype(np.float64), lengths)  # in state-run order
        self.syn = np.bincount(steps[order], weights=n_i, minlength=size)
        self.syn += np.bincount(starts_pair, minlength=size)  # INITIAL: n_i = 1
        # transitions per trace
        pairs = np.concatenate([starts_pair, steps])
        ptid = np.concatenate([tid[first], tid])
        _, _, lengths, self.pair, self.pair_tid = _runs(pairs, ptid)
        self.pair_count = lengths
        self.count = np.bincount(pairs, minlength=size)
        self.traces = np.bincount(self.pair, minlength=size)
        y = lengths.astype(np.float64)
        self.syy = np.bincount(self.pair, weights=y * y, minlength=size)
        src_code = self.state_code.astype(np.int64) + 1
        nv = self.state_visits.astype(np.float64)
        self.n = np.bincount(src_code, weights=nv, minlength=_BITS)
        self.snn = np.bincount(src_code, weights=nv * nv, minlength=_BITS)
        self.m = np.bincount(src_code, minlength=_BITS).astype(np.float64)
        self.n[0] = self.snn[0] = self.m[0] = n_traces  # INITIAL: once per trace


def _prepare(transitions: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """Check and sort the columns statistics need: trace, time_ms, state, end_ms."""
    if isinstance(transitions, pl.LazyFrame):
        transitions = transitions.collect()
    if not isinstance(transitions, pl.DataFrame):
        raise ModelError(
            f"expected a polars DataFrame of transitions, got {type(transitions).__name__}"
        )
    missing = [c for c in ("trace", "time_ms", "state") if c not in transitions.columns]
    if missing:
        raise ModelError(f"transitions need columns trace, time_ms, state; missing {missing}")
    cols = [
        pl.col("trace").cast(KEY_DTYPE),
        pl.col("time_ms").cast(pl.Float64),
        pl.col("state"),
        pl.col("end_ms").cast(pl.Float64)
        if "end_ms" in transitions.columns
        else pl.col("time_ms").cast(pl.Float64).max().over("trace").alias("end_ms"),
    ]
    df = transitions.select(cols)
    if df.schema["state"] != STATE_DTYPE:
        names = df.get_column("state").cast(pl.String)
        unknown = names.filter(~names.is_in(list(CANONICAL_STATES)) & names.is_not_null()).unique()
        if unknown.len():
            raise ModelError(
                f"unknown state(s) {sorted(unknown.to_list())}; expected one of "
                f"{', '.join(CANONICAL_STATES)}"
            )
        df = df.with_columns(names.cast(STATE_DTYPE).alias("state"))
    nulls = df.select(pl.all().null_count()).row(0, named=True)
    bad = {k: v for k, v in nulls.items() if v}
    if bad:
        raise ModelError(f"transitions have null values: {bad} (expected none in {sorted(bad)})")
    return _sorted(df)


def _sorted(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` sorted by (trace, time_ms) with a ``tid`` column (UInt32 run id of ``trace``).

    Already-sorted input (what the readers return) costs one pass over the trace ids (their
    run ids), a comparison of the distinct ids and one over the times, and is not copied;
    otherwise a stable sort keeps the input order of equal times.
    """
    tid = _run_ids_if_in_order(df)
    if tid is None:
        df = df.sort(["trace", "time_ms"], maintain_order=True)
        tid = df.get_column("trace").rle_id()
    return df.with_columns(tid.cast(pl.UInt32).alias("tid"))


def _run_ids_if_in_order(df: pl.DataFrame) -> pl.Series | None:
    """Run ids of ``trace`` if rows are sorted by trace (so each trace is contiguous) and by
    time within a trace, else None."""
    trace = df.get_column("trace")
    tid = trace.rle_id()
    if df.height < 2:
        return tid
    change = np.flatnonzero(np.diff(tid.to_numpy()))
    firsts = trace.gather(np.concatenate([[0], change + 1]))
    if firsts.len() > 1 and not (firsts.slice(1) > firsts.slice(0, firsts.len() - 1)).all():
        return None  # the runs of trace ids are not strictly increasing
    step = np.diff(df.get_column("time_ms").to_numpy())
    step[change] = 0.0  # time may go back where a new trace starts
    return tid if bool((step >= 0).all()) else None


def _visits(transitions: pl.DataFrame | pl.LazyFrame | Visits) -> Visits:
    return transitions if isinstance(transitions, Visits) else Visits(transitions)


def _state_of(code: str = "code") -> pl.Expr:
    return pl.lit(_STATE_LABELS).gather(pl.col(code))


def _label_of(code: str) -> pl.Expr:
    return pl.lit(_NODE_LABELS).gather(pl.col(code)).alias(code)


def time_in_state(transitions: pl.DataFrame | pl.LazyFrame | Visits) -> pl.DataFrame:
    """Time in each state per trace: ``trace, state, duration_ms, fraction``.

    Every state that occurs anywhere in the frame has a row for every trace (zeros filled).
    ``fraction`` is ``duration_ms`` over the trace duration (null if the trace lasts 0 ms), so
    the fractions of a trace sum to 1. Sorted by trace, then state.
    """
    v = _visits(transitions)
    if v.n_visits == 0:
        return pl.DataFrame(schema=TIME_IN_STATE_SCHEMA)
    c = v.chain()
    present = np.flatnonzero(np.bincount(c.state_code, minlength=len(CANONICAL_STATES)))
    column = np.zeros(len(CANONICAL_STATES), dtype=np.int64)
    column[present] = np.arange(len(present))
    k = len(present)
    dwell = v.frame.get_column("dwell_ms").to_numpy()[c.state_order]
    state_ms = np.add.reduceat(dwell, c.state_starts) if dwell.size else dwell
    duration = np.zeros(v.n_traces * k)
    duration[c.state_tid.astype(np.int64) * k + column[c.state_code]] = state_ms
    f = v.frame.filter(pl.col("first"))
    total = np.repeat(f.get_column("total_ms").to_numpy(), k)
    out = pl.DataFrame(
        {
            "tid": np.repeat(np.arange(v.n_traces, dtype=np.uint32), k),
            "code": np.tile(present.astype(np.uint8), v.n_traces),
            "duration_ms": duration,
            "total_ms": total,
        }
    )
    return out.select(
        v.trace_names(),
        _state_of().alias("state"),
        "duration_ms",
        pl.when(pl.col("total_ms") > 0)
        .then(pl.col("duration_ms") / pl.col("total_ms"))
        .alias("fraction"),
    ).cast(TIME_IN_STATE_SCHEMA)  # type: ignore[arg-type]


def time_in_state_summary(transitions: pl.DataFrame | pl.LazyFrame | Visits) -> pl.DataFrame:
    """Time in each state over all traces: ``state, seconds, fraction, mean_fraction, traces``.

    ``seconds`` is the total time in the state; ``fraction`` the pooled share of all traces'
    time (sums to 1 over states); ``mean_fraction`` the mean of per-trace fractions over traces
    of positive duration; ``traces`` how many traces visit the state. Sorted by state.
    """
    v = _visits(transitions)
    if v.n_visits == 0:
        return pl.DataFrame(schema=TIME_IN_STATE_SUMMARY_SCHEMA)
    f = v.frame
    code = f.get_column("code").to_numpy()
    dwell = f.get_column("dwell_ms").to_numpy()
    total = f.get_column("total_ms").to_numpy()
    first = f.get_column("first").to_numpy()
    n_states = len(CANONICAL_STATES)
    share = np.divide(dwell, total, out=np.zeros_like(dwell), where=total > 0)
    return time_in_state_from_sums(
        visits=np.bincount(code, minlength=n_states),
        total_ms=np.bincount(code, weights=dwell, minlength=n_states),
        share_sum=np.bincount(code, weights=share, minlength=n_states),
        traces=np.bincount(v.chain().state_code, minlength=n_states),
        grand_ms=float(dwell.sum()),
        positive=int(np.count_nonzero(first & (total > 0))),
    )


def time_in_state_from_sums(
    *,
    visits: np.ndarray,
    total_ms: np.ndarray,
    share_sum: np.ndarray,
    traces: np.ndarray,
    grand_ms: float,
    positive: int,
) -> pl.DataFrame:
    """:func:`time_in_state_summary` from its sums, indexed by state code: visits, total time
    and summed per-visit share of its trace's duration per state, traces visiting each state,
    the total time of all traces and how many traces last longer than 0 ms. The sums of
    disjoint sets of traces add up, so this also summarises partitions read apart."""
    n_states = len(CANONICAL_STATES)
    total = np.asarray(total_ms, dtype=np.float64)
    # divided here, element by element: an expression dividing by a constant may multiply by
    # its reciprocal, which overflows for a subnormal total (0 * inf = NaN)
    fraction = total / grand_ms if grand_ms > 0 else np.full(n_states, np.nan)
    out = pl.DataFrame(
        {
            "code": np.arange(n_states, dtype=np.uint8),
            "visits": np.asarray(visits, dtype=np.int64),
            "total": total,
            "fraction": fraction,
            "fsum": np.asarray(share_sum, dtype=np.float64),
            "traces": np.asarray(traces, dtype=np.int64),
        }
    ).filter(pl.col("visits") > 0)
    n_positive = positive
    return out.select(
        _state_of().alias("state"),
        (pl.col("total") / 1000.0).alias("seconds"),
        (pl.col("fraction") if grand_ms > 0 else pl.lit(None, pl.Float64)).alias("fraction"),
        (pl.col("fsum") / n_positive if n_positive else pl.lit(None, pl.Float64)).alias(
            "mean_fraction"
        ),
        "traces",
    ).cast(TIME_IN_STATE_SUMMARY_SCHEMA)  # type: ignore[arg-type]


def transition_counts(transitions: pl.DataFrame | pl.LazyFrame | Visits) -> pl.DataFrame:
    """The observed chain counted per trace: ``trace, source, target, count``.

    Includes ``INITIAL → first state`` and ``last state → TERMINAL``; ``source``/``target`` have
    dtype :data:`LABEL_DTYPE`. Sorted by trace, source, target.
    """
    v = _visits(transitions)
    if v.n_visits == 0:
        return pl.DataFrame(schema=TRANSITION_COUNTS_SCHEMA)
    c = v.chain()
    runs = pl.DataFrame(
        {
            "tid": pl.Series(c.pair_tid, dtype=pl.UInt32),
            "pair": pl.Series(c.pair, dtype=pl.UInt16),
            "count": c.pair_count.astype(np.int64),
        }
    )
    return (
        runs.sort("tid", "pair")
        .with_columns((pl.col("pair") // _BITS).alias("src"), (pl.col("pair") % _BITS).alias("tgt"))
        .select(
            v.trace_names(),
            _label_of("src").alias("source"),
            _label_of("tgt").alias("target"),
            "count",
        )
    )


def transition_probabilities(transitions: pl.DataFrame | pl.LazyFrame | Visits) -> pl.DataFrame:
    """Transition probabilities of the observed chain with 95 % cluster-robust Wilson intervals.

    Columns ``source, target, count, traces, probability, ci_low, ci_high``: ``count`` transitions
    in total, found in ``traces`` traces; ``probability = count / (transitions out of source)``.
    See the module docstring for the interval. Sorted by source, target.
    """
    v = _visits(transitions)
    if v.n_visits == 0:
        return pl.DataFrame(schema=TRANSITION_PROBABILITIES_SCHEMA)
    c = v.chain()
    return probabilities_from_sums(
        count=c.count, traces=c.traces, syy=c.syy, syn=c.syn, n=c.n, snn=c.snn, m=c.m
    )


def probabilities_from_sums(
    *,
    count: np.ndarray,
    traces: np.ndarray,
    syy: np.ndarray,
    syn: np.ndarray,
    n: np.ndarray,
    snn: np.ndarray,
    m: np.ndarray,
) -> pl.DataFrame:
    """:func:`transition_probabilities` from the sums of :class:`_Chain`: per pair
    (``source * 32 + target`` in :data:`NODE_LABELS` codes) ``count``, ``traces``, ``syy``,
    ``syn``; per source ``n``, ``snn``, ``m``. Sums over disjoint sets of traces add up, so
    partitions read apart can be summarised together."""
    present = np.flatnonzero(count)
    src = present // _BITS
    df = pl.DataFrame(
        {
            "src": (src).astype(np.uint8),
            "tgt": (present % _BITS).astype(np.uint8),
            "count": count[present].astype(np.int64),
            "traces": traces[present].astype(np.int64),
            "syy": syy[present],
            "syn": syn[present],
            "n": n[src],
            "snn": snn[src],
            "m": m[src],
        }
    ).lazy()
    p = pl.col("count") / pl.col("n")
    df = df.with_columns(p.alias("probability"))
    p = pl.col("probability")
    n_eff = effective_n_expr(
        p, pl.col("n"), pl.col("m"), pl.col("syy"), pl.col("syn"), pl.col("snn")
    )
    df = df.with_columns(n_eff.alias("n_eff"))
    low, high = wilson_interval(p, pl.col("n_eff"))
    return (
        df.sort("src", "tgt")
        .select(
            _label_of("src").alias("source"),
            _label_of("tgt").alias("target"),
            "count",
            "traces",
            "probability",
            low.alias("ci_low"),
            high.alias("ci_high"),
        )
        .collect()
        .cast(TRANSITION_PROBABILITIES_SCHEMA)  # type: ignore[arg-type]
    )


def dwell_times(transitions: pl.DataFrame | pl.LazyFrame | Visits) -> pl.DataFrame:
    """One row per visit: ``trace, state, dwell_ms, censored`` (censored = last visit of its
    trace, whose dwell is cut at ``end_ms``). In trace, then time order."""
    v = _visits(transitions)
    return v.frame.select(
        v.trace_names(), _state_of().alias("state"), "dwell_ms", pl.col("last").alias("censored")
    ).cast(DWELL_TIMES_SCHEMA)  # type: ignore[arg-type]


def dwell_summary(transitions: pl.DataFrame | pl.LazyFrame | Visits) -> pl.DataFrame:
    """Dwell-time distribution per state: ``state, visits, censored, mean_ms, median_ms, p10_ms,
    p90_ms`` over all visits (censored ones included, cut at ``end_ms``). Sorted by state.

    Quantiles interpolate linearly between order statistics (numpy's and polars' "linear").
    """
    v = _visits(transitions)
    if v.n_visits == 0:
        return pl.DataFrame(schema=DWELL_SUMMARY_SCHEMA)
    c = v.chain()
    dwell = v.frame.get_column("dwell_ms").to_numpy()[c.state_order]
    code = v.frame.get_column("code").to_numpy()
    censored = np.bincount(
        code[v.frame.get_column("last").to_numpy()], minlength=len(c.state_bounds)
    )
    rows = []
    for state in np.flatnonzero(np.diff(c.state_bounds)):  # one pass per state, not per row
        lo, hi = c.state_bounds[state], c.state_bounds[state + 1]
        seg = dwell[lo:hi]
        p10, p50, p90 = np.quantile(seg, [0.1, 0.5, 0.9])
        rows.append(
            (CANONICAL_STATES[state], hi - lo, int(censored[state]), seg.mean(), p50, p10, p90)
        )
    out = pl.DataFrame(rows, schema=list(DWELL_SUMMARY_SCHEMA), orient="row")
    return out.cast(DWELL_SUMMARY_SCHEMA)  # type: ignore[arg-type]


@dataclass(frozen=True, eq=False)
class Stats:
    """The statistics a :class:`quicsm.model.tables.Model` carries (aggregated over traces).

    Per-trace tables are not stored (they grow with the corpus): compute them with
    :func:`time_in_state`, :func:`transition_counts` and :func:`dwell_times`.
    """

    traces: int
    visits: int
    duration_ms: float
    time_in_state: pl.DataFrame
    transition_probabilities: pl.DataFrame
    dwell: pl.DataFrame

    def fraction_of(self, state: str) -> float | None:
        """Pooled fraction of time in ``state`` (None if it never occurs)."""
        row = self.time_in_state.filter(pl.col("state").cast(pl.String) == state)
        return None if row.height == 0 else row.get_column("fraction").item()


def compute_stats(transitions: pl.DataFrame | pl.LazyFrame | Visits) -> Stats:
    """All aggregated statistics of a transitions frame (see the module docstring)."""
    v = _visits(transitions)
    return Stats(
        traces=v.n_traces,
        visits=v.n_visits,
        duration_ms=float(v.frame.get_column("dwell_ms").sum()) if v.n_visits else 0.0,
        time_in_state=time_in_state_summary(v),
        transition_probabilities=transition_probabilities(v),
        dwell=dwell_summary(v),
    )
