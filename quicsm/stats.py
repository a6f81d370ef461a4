"""Statistics of a transitions frame: time in state, transition probabilities, dwell times.

Everything here is computed with polars expressions from the canonical transitions frame
(:data:`quicsm.frames.TRANSITIONS_SCHEMA`: one row per state entered, ``end_ms`` the time of the
trace's last event). The input is sorted by ``(trace, time_ms)`` first unless it already is.

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
Wilson, stays inside [0, 1] and behaves at p = 0 or 1. With a single trace (``m = 1``) the
dependence cannot be estimated and the interval is plain Wilson.

Dwell-time quantiles use linear interpolation between order statistics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import polars as pl

from quicsm.errors import ModelError
from quicsm.states import CANONICAL_STATES, STATE_DTYPE

INITIAL: Final[str] = "INITIAL"
TERMINAL: Final[str] = "TERMINAL"
#: labels of the observed chain: the dummy INITIAL, every canonical state, the dummy TERMINAL.
NODE_LABELS: Final[tuple[str, ...]] = (INITIAL, *CANONICAL_STATES, TERMINAL)
#: polars dtype of ``source`` / ``target`` columns.
LABEL_DTYPE: Final[pl.Enum] = pl.Enum(list(NODE_LABELS))
_TERMINAL_CODE: Final[int] = len(NODE_LABELS) - 1

#: two-sided 95 % normal quantile.
Z95: Final[float] = 1.959963984540054

_STATE_LABELS = pl.Series("state", list(CANONICAL_STATES), dtype=STATE_DTYPE)
_NODE_LABELS = pl.Series("label", list(NODE_LABELS), dtype=LABEL_DTYPE)

TIME_IN_STATE_SCHEMA: Final[dict[str, pl.DataType]] = {
    "trace": pl.String(),
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
    "trace": pl.String(),
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
    "trace": pl.String(),
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
    """

    def __init__(self, transitions: pl.DataFrame | pl.LazyFrame) -> None:
        df = _prepare(transitions)
        first = (pl.col("tid") != pl.col("tid").shift(1)).fill_null(True)
        df = df.with_columns(first.alias("first"))
        last = pl.col("first").shift(-1).fill_null(True)
        next_time = pl.when(last).then(pl.col("end_ms")).otherwise(pl.col("time_ms").shift(-1))
        df = df.with_columns(
            pl.col("state").to_physical().cast(pl.UInt8).alias("code"),
            (next_time - pl.col("time_ms")).alias("dwell_ms"),
            last.alias("last"),
        ).with_columns(
            # the trace's end (its last row's end_ms) minus its start (its first row's time)
            (
                pl.col("end_ms").filter(pl.col("last")).gather(pl.col("tid"))
                - pl.col("time_ms").filter(pl.col("first")).gather(pl.col("tid"))
            ).alias("total_ms")
        )
        bad = df.filter(pl.col("dwell_ms") < 0)
        if bad.height:
            row = bad.row(0, named=True)
            raise ModelError(
                f"trace {row['trace']!r}: end_ms {row['end_ms']} is before its last transition "
                f"at {row['time_ms']} ms (expected end_ms >= every time_ms of the trace)"
            )
        self.traces: pl.Series = df.filter(pl.col("first")).get_column("trace")
        self.frame: pl.DataFrame = df.select("tid", "code", "dwell_ms", "total_ms", "first", "last")
        self._pairs: pl.DataFrame | None = None

    @property
    def n_traces(self) -> int:
        return self.traces.len()

    @property
    def n_visits(self) -> int:
        return self.frame.height

    def trace_names(self, tid: str = "tid") -> pl.Expr:
        """Expression turning a ``tid`` column into trace ids."""
        return pl.lit(self.traces).gather(pl.col(tid)).alias("trace")

    def pair_counts(self) -> pl.DataFrame:
        """The observed chain counted per trace (cached), sorted by tid, src, tgt.

        Columns: tid (UInt32), src, tgt (UInt16 codes in :data:`NODE_LABELS`), count (Int64),
        n_out (Int64: transitions out of src in that trace), lead (Boolean: first row of its
        (tid, src) run). Computed by sorting one integer key and run-length counting it, which is
        several times faster than hashing millions of (trace, source, target) groups.
        """
        if self._pairs is None:
            self._pairs = _pair_counts(self)
        return self._pairs


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
        pl.col("trace").cast(pl.String),
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

    Already-sorted input (what the readers return) costs two passes over the trace ids and is
    not copied; otherwise a stable sort keeps the input order of equal times.
    """
    trace = df.get_column("trace")
    if trace.is_sorted():
        df = df.with_columns(trace.rle_id().cast(pl.UInt32).alias("tid"))
        tid, time = pl.col("tid"), pl.col("time_ms")
        in_order = df.select(
            ((tid != tid.shift(1)) | (time >= time.shift(1))).fill_null(True).all()
        ).item()
        if in_order:
            return df
        df = df.drop("tid")
    df = df.sort(["trace", "time_ms"], maintain_order=True)
    return df.with_columns(pl.col("trace").rle_id().cast(pl.UInt32).alias("tid"))


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
    key = (pl.col("tid").cast(pl.UInt64) * 256 + pl.col("code").cast(pl.UInt64)).alias("key")
    per = (
        v.frame.lazy()
        .select(key, "dwell_ms")
        .sort("key")
        .group_by("key", maintain_order=True)
        .agg(pl.col("dwell_ms").sum().alias("duration_ms"))
    )
    totals = v.frame.lazy().filter(pl.col("first")).select("tid", "total_ms")
    codes = v.frame.lazy().select(pl.col("code").unique().sort())
    grid = (
        totals.join(codes, how="cross")
        .with_columns(
            (pl.col("tid").cast(pl.UInt64) * 256 + pl.col("code").cast(pl.UInt64)).alias("key")
        )
        .join(per, on="key", how="left")
        .sort("key")
    )
    out = grid.with_columns(pl.col("duration_ms").fill_null(0.0)).select(
        v.trace_names(),
        _state_of().alias("state"),
        "duration_ms",
        pl.when(pl.col("total_ms") > 0)
        .then(pl.col("duration_ms") / pl.col("total_ms"))
        .alias("fraction"),
    )
    return out.collect().cast(TIME_IN_STATE_SCHEMA)  # type: ignore[arg-type]


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
    n_positive = f.select((pl.col("first") & (pl.col("total_ms") > 0)).sum()).item()
    grand = f.get_column("dwell_ms").sum()
    visiting = (
        v.pair_counts()
        .lazy()
        .filter(pl.col("lead") & (pl.col("src") > 0))
        .group_by((pl.col("src") - 1).cast(pl.UInt8).alias("code"))
        .agg(pl.len().cast(pl.Int64).alias("traces"))
    )
    positive = pl.col("total_ms") > 0
    agg = (
        f.lazy()
        .group_by("code")
        .agg(
            pl.col("dwell_ms").sum().alias("total"),
            (pl.col("dwell_ms") / pl.col("total_ms")).filter(positive).sum().alias("fsum"),
        )
        .join(visiting, on="code")
        .sort("code")
        .select(
            _state_of().alias("state"),
            (pl.col("total") / 1000.0).alias("seconds"),
            (pl.col("total") / grand if grand > 0 else pl.lit(None, pl.Float64)).alias("fraction"),
            (pl.col("fsum") / n_positive if n_positive else pl.lit(None, pl.Float64)).alias(
                "mean_fraction"
            ),
            "traces",
        )
    )
    return agg.collect().cast(TIME_IN_STATE_SUMMARY_SCHEMA)  # type: ignore[arg-type]


_BITS: Final[int] = 16  # room for every label code in a packed key (len(NODE_LABELS) <= 16)


def _pair_counts(v: Visits) -> pl.DataFrame:
    b = _BITS
    f = v.frame
    label = pl.col("code").cast(pl.UInt64) + 1
    base = pl.col("tid").cast(pl.UInt64) * (b * b)
    nxt = pl.when(pl.col("last")).then(pl.lit(_TERMINAL_CODE, pl.UInt64)).otherwise(label.shift(-1))
    steps = f.select((base + label * b + nxt).alias("key"))
    starts = f.filter(pl.col("first")).select((base + label).alias("key"))  # INITIAL = code 0
    keys = pl.concat([starts, steps]).get_column("key").sort()
    runs = keys.rle().struct.unnest()  # columns len, value; values ascending
    ts = pl.col("value") // b  # (tid, src) packed
    per = runs.select(
        ts.alias("_ts"),
        (pl.col("value") % b).cast(pl.UInt16).alias("tgt"),
        pl.col("len").cast(pl.Int64).alias("count"),
    ).with_columns(
        (pl.col("_ts") // b).cast(pl.UInt32).alias("tid"),
        (pl.col("_ts") % b).cast(pl.UInt16).alias("src"),
        (pl.col("_ts") != pl.col("_ts").shift(1)).fill_null(True).alias("lead"),
        (pl.col("_ts") != pl.col("_ts").shift(-1)).fill_null(True).alias("_tail"),
        pl.col("count").cum_sum().alias("_cs"),
    )
    # transitions out of (tid, src), broadcast over its contiguous run of rows: exact integer
    # differences of a running sum, no hashing.
    gid = (pl.col("lead").cum_sum() - 1).cast(pl.UInt32)
    cs = pl.col("_cs")
    n_out = (cs.filter(pl.col("_tail")) - (cs - pl.col("count")).filter(pl.col("lead"))).gather(gid)
    return per.with_columns(n_out.alias("n_out")).select(
        "tid", "src", "tgt", "count", "n_out", "lead"
    )


def transition_counts(transitions: pl.DataFrame | pl.LazyFrame | Visits) -> pl.DataFrame:
    """The observed chain counted per trace: ``trace, source, target, count``.

    Includes ``INITIAL → first state`` and ``last state → TERMINAL``; ``source``/``target`` have
    dtype :data:`LABEL_DTYPE`. Sorted by trace, source, target.
    """
    v = _visits(transitions)
    if v.n_visits == 0:
        return pl.DataFrame(schema=TRANSITION_COUNTS_SCHEMA)
    return v.pair_counts().select(
        v.trace_names(), _label_of("src").alias("source"), _label_of("tgt").alias("target"), "count"
    )


def wilson_interval(p: pl.Expr, n: pl.Expr, *, z: float = Z95) -> tuple[pl.Expr, pl.Expr]:
    """Wilson score interval for a proportion ``p`` over ``n`` (possibly fractional) trials."""
    z2 = z * z
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = (z / denom) * ((p * (1 - p) / n + z2 / (4 * n * n)).clip(lower_bound=0)).sqrt()
    return (center - half).clip(lower_bound=0.0), (center + half).clip(upper_bound=1.0)


def transition_probabilities(transitions: pl.DataFrame | pl.LazyFrame | Visits) -> pl.DataFrame:
    """Transition probabilities of the observed chain with 95 % cluster-robust Wilson intervals.

    Columns ``source, target, count, traces, probability, ci_low, ci_high``: ``count`` transitions
    in total, found in ``traces`` traces; ``probability = count / (transitions out of source)``.
    See the module docstring for the interval. Sorted by source, target.
    """
    v = _visits(transitions)
    if v.n_visits == 0:
        return pl.DataFrame(schema=TRANSITION_PROBABILITIES_SCHEMA)
    per = v.pair_counts().lazy()
    cnt = pl.col("count").cast(pl.Float64)
    pairs = per.group_by("src", "tgt").agg(
        pl.col("count").sum().alias("count"),
        pl.len().cast(pl.Int64).alias("traces"),
        (cnt * cnt).sum().alias("syy"),
        (cnt * pl.col("n_out")).sum().alias("syn"),
    )
    n_out = pl.col("n_out").cast(pl.Float64)
    sources = (
        per.filter(pl.col("lead"))
        .group_by("src")
        .agg(
            n_out.sum().alias("n"),
            (n_out * n_out).sum().alias("snn"),
            pl.len().cast(pl.Float64).alias("m"),
        )
    )
    p = pl.col("count") / pl.col("n")
    df = pairs.join(sources, on="src").with_columns(p.alias("probability"))
    p = pl.col("probability")
    resid = (pl.col("syy") - 2 * p * pl.col("syn") + p * p * pl.col("snn")).clip(lower_bound=0)
    var_cluster = pl.col("m") / (pl.col("m") - 1) * resid / (pl.col("n") ** 2)
    var_binom = p * (1 - p) / pl.col("n")
    deff = (
        pl.when((pl.col("m") > 1) & (var_binom > 0))
        .then(var_cluster / var_binom)
        .otherwise(1.0)
        .clip(lower_bound=1.0)
    )
    df = df.with_columns((pl.col("n") / deff).alias("n_eff"))
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
    p90_ms`` over all visits (censored ones included, cut at ``end_ms``). Sorted by state."""
    v = _visits(transitions)
    if v.n_visits == 0:
        return pl.DataFrame(schema=DWELL_SUMMARY_SCHEMA)
    d = pl.col("dwell_ms")
    return (
        v.frame.lazy()
        .group_by("code")
        .agg(
            pl.len().cast(pl.Int64).alias("visits"),
            pl.col("last").sum().cast(pl.Int64).alias("censored"),
            d.mean().alias("mean_ms"),
            d.median().alias("median_ms"),
            d.quantile(0.1, "linear").alias("p10_ms"),
            d.quantile(0.9, "linear").alias("p90_ms"),
        )
        .sort("code")
        .select(_state_of().alias("state"), pl.exclude("code"))
        .collect()
        .cast(DWELL_SUMMARY_SCHEMA)  # type: ignore[arg-type]
    )


@dataclass(frozen=True, eq=False)
class Stats:
    """The statistics a :class:`quicsm.model.Model` carries (aggregated over traces).

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
