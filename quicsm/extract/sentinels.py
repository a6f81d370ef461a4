"""Values a producer logs that are not measurements: sentinels, placeholders and units.

A stack logs some fields before it has a value for them, and writes a stand-in:

- ``ssthresh`` as u64::MAX (1.8e19) until the first congestion event (quiche, quinn through
  the qlog crate): "not set", not a window of 18 exabytes;
- RTTs as RFC 9002's initial RTT of 333 ms (section 6.2.2, ``kInitialRtt``) before the first
  RTT sample (quiche: smoothed, minimum and latest RTT), or as 0 (quic-go: smoothed and
  minimum RTT before the first sample);
- a pacing rate of 0 before the pacer has a rate (quinn, quiche);
- RTTs in seconds where the qlog drafts say milliseconds (quinn 0.11: its first smoothed RTT
  is the placeholder written as 0.333).

:func:`normalise_part` turns these into what they mean — null ("not known yet") and
milliseconds — in the rows of :func:`quicsm.extract.read.read_metrics`, so that no view
(plots, the report, identify) reads a stand-in as a measurement. It works a part of a trace at
a time, carrying what it learnt (the unit, whether a real RTT was seen) in ``carry``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # imported where used: the constants are read without it
    import polars as pl

#: an ``ssthresh`` at or above this, bytes, means "not set" (u64::MAX and its float image)
SSTHRESH_UNSET_FROM: Final[float] = 2.0**62
#: RFC 9002 section 6.2.2 ``kInitialRtt``, ms: the RTT a stack assumes before any sample
INITIAL_RTT_MS: Final[float] = 333.0
#: the RTT columns of the metrics frame (smoothed and minimum carried forward; the sample not)
RTT_COLUMNS: Final[tuple[str, ...]] = ("smoothed_rtt_ms", "min_rtt_ms", "latest_rtt_ms")
#: columns in which 0 means "no value yet": no RTT or pacing rate is 0
ZERO_IS_UNSET: Final[tuple[str, ...]] = (*RTT_COLUMNS, "pacing_rate_bps")

#: ``carry`` key of the trace's RTT unit (1000.0: logged in seconds)
_SCALE = "_rtt_scale"


def _real(column: str) -> str:
    return f"_real_{column}"


def normalise_part(columns: dict[str, pl.Series], carry: dict[str, Any]) -> None:
    """Null the stand-ins of one part of a trace's metric rows (``columns``, replaced in place;
    ``carry`` holds what the trace's earlier parts showed). Polars only: no numpy imported."""
    import polars as pl

    present = [c for c in NORMALISED_COLUMNS if c in columns]
    if not present:
        return
    frame = pl.DataFrame([columns[c].alias(c) for c in present]).lazy()
    exprs, aggregates = part_plan(carry, present)
    out, learnt = pl.collect_all([frame.select(exprs), frame.select(aggregates)])
    learn(carry, learnt.row(0, named=True))
    for column in out.columns:
        columns[column] = out.get_column(column)


#: the columns :func:`part_plan` normalises
NORMALISED_COLUMNS: Final[tuple[str, ...]] = (*RTT_COLUMNS, "ssthresh_bytes", "pacing_rate_bps")
#: the aggregates of :func:`part_plan` that :func:`learn` reads
_FIRST_RTT = "_first_rtt"


def part_plan(carry: dict[str, Any], present: list[str]) -> tuple[list[pl.Expr], list[pl.Expr]]:
    """What :func:`normalise_part` does to one part of a trace, as polars expressions over its
    columns ``present`` (of :data:`NORMALISED_COLUMNS`): the normalised columns, and the aggregates
    that :func:`learn` adds to ``carry`` (the trace's RTT unit when this part decides it, the
    columns where a real RTT was seen). One query can hold both, with the rest of a part's
    work (:func:`quicsm.extract.metric_columns._finish`)."""
    import polars as pl

    rtt = [c for c in RTT_COLUMNS if c in present]
    aggregates: list[pl.Expr] = []
    if _SCALE in carry:
        scale: pl.Expr = pl.lit(carry[_SCALE], dtype=pl.Float64)
    elif rtt:  # decided by the part's first non-zero RTT (the earliest row; then column order)
        values = [pl.when(pl.col(c) != 0).then(pl.col(c).cast(pl.Float64)) for c in rtt]
        first = pl.coalesce(values).drop_nulls().first()
        aggregates.append(first.alias(_FIRST_RTT))
        seconds = ((first - INITIAL_RTT_MS / 1000.0).abs() < 1e-9).fill_null(False)
        scale = pl.when(seconds).then(1000.0).otherwise(1.0)
    else:
        scale = pl.lit(1.0)
    exprs: list[pl.Expr] = []
    for column in rtt:
        v = pl.col(column).cast(pl.Float64) * scale
        unset = v == 0.0
        if not carry.get(_real(column)):
            # the placeholder before the first real value of this column
            near = (v - INITIAL_RTT_MS).abs() <= 1e-6
            real = ((v != 0.0) & ~near).fill_null(False)
            unset = unset | (near & (real.cum_sum() == 0))
            aggregates.append(real.any().alias(_real(column)))
        exprs.append(pl.when(unset).then(None).otherwise(v).alias(column))
    if "ssthresh_bytes" in present:  # u64::MAX: not set
        ssthresh = pl.col("ssthresh_bytes")
        exprs.append(
            pl.when(ssthresh >= SSTHRESH_UNSET_FROM)
            .then(None)
            .otherwise(ssthresh)
            .alias("ssthresh_bytes")
        )
    if "pacing_rate_bps" in present:  # no rate yet
        pacing = pl.col("pacing_rate_bps")
        exprs.append(pl.when(pacing == 0).then(None).otherwise(pacing).alias("pacing_rate_bps"))
    if not aggregates:
        aggregates.append(pl.len().alias("_rows"))
    return exprs, aggregates


def learn(carry: dict[str, Any], learnt: dict[str, Any]) -> None:
    """What the aggregates of :func:`part_plan` showed, added to ``carry``."""
    first = learnt.get(_FIRST_RTT)
    if first is not None and _SCALE not in carry:
        carry[_SCALE] = 1000.0 if abs(first - INITIAL_RTT_MS / 1000.0) < 1e-9 else 1.0
    for column in RTT_COLUMNS:
        if learnt.get(_real(column)):
            carry[_real(column)] = True


def normalise_batch(columns: dict[str, pl.Series], owner: pl.Series) -> None:
    """:func:`normalise_part` for the rows of many whole traces at once (``columns``, replaced
    in place): ``owner`` holds each row's trace (the rows of a trace together, in order). The
    same rows as :func:`normalise_part` applied to each trace on its own, with no call per
    trace."""
    import polars as pl

    n = len(owner)
    if n == 0:
        return
    present = [c for c in RTT_COLUMNS if c in columns]
    frame = pl.DataFrame(
        {"_owner": owner, **{c: columns[c].cast(pl.Float64) for c in present}}
    ).with_row_index("_row")
    # each trace's unit, decided by its first non-zero RTT (any RTT column, the earliest row;
    # at one row the first column of RTT_COLUMNS)
    firsts = [pl.when((pl.col(c) != 0.0).fill_null(False)).then(pl.col(c)) for c in present]
    first_value = pl.coalesce(firsts).drop_nulls().first().over("_owner") if firsts else None
    seconds = (
        ((first_value - INITIAL_RTT_MS / 1000.0).abs() < 1e-9).fill_null(False)
        if first_value is not None
        else pl.lit(False)
    )
    scale = pl.when(seconds).then(1000.0).otherwise(1.0)
    scaled = frame.with_columns(_scale=scale)
    out: list[pl.Expr] = []
    for column in present:
        if columns[column].null_count() == n:
            continue
        v = pl.col(column) * pl.col("_scale")
        unset = v == 0.0
        near = (v - INITIAL_RTT_MS).abs() <= 1e-6
        real = ((v != 0.0) & ~near).fill_null(False)
        # the placeholder before the first real value of this column, in its trace
        unset = unset | (near & (real.cum_sum().over("_owner") == 0))
        out.append(pl.when(unset).then(None).otherwise(v).alias(column))
    if out:
        done = scaled.select(out)
        for column in done.columns:
            columns[column] = done.get_column(column)
    _null_unset_windows_and_rates(columns)


def _null_unset_windows_and_rates(columns: dict[str, pl.Series]) -> None:
    """u64::MAX ssthresh and a zero pacing rate as null: row by row, whatever the trace."""
    ssthresh = columns.get("ssthresh_bytes")
    if ssthresh is not None and ssthresh.null_count() < len(ssthresh):
        columns["ssthresh_bytes"] = ssthresh.set(ssthresh >= SSTHRESH_UNSET_FROM, None)
    pacing = columns.get("pacing_rate_bps")
    if pacing is not None and pacing.null_count() < len(pacing):
        columns["pacing_rate_bps"] = pacing.set(pacing == 0, None)


def is_stand_in(column: str, value: float) -> bool:
    """Whether ``value`` of ``column`` (after :func:`normalise_part`) could be a stand-in
    that should have been nulled: the check of the tests and of :mod:`quicsm.extract.account`."""
    if column == "ssthresh_bytes":
        return value >= SSTHRESH_UNSET_FROM
    return column in ZERO_IS_UNSET and value == 0
