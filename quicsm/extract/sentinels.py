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

if TYPE_CHECKING:  # imported where used: the constants are read without them
    import numpy as np
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
    ``carry`` holds what the trace's earlier parts showed)."""
    import numpy as np
    import polars as pl

    if _SCALE not in carry:
        first = _first_rtt(columns)
        if first is not None:  # decided by the trace's first RTT
            carry[_SCALE] = 1000.0 if abs(first - INITIAL_RTT_MS / 1000.0) < 1e-9 else 1.0
    scale = carry.get(_SCALE, 1.0)
    for column in RTT_COLUMNS:
        series = columns.get(column)
        if series is None or series.null_count() == len(series):
            continue
        values = series.to_numpy().astype(np.float64, copy=True)
        if scale != 1.0:
            values *= scale
        unset = values == 0.0
        if not carry.get(_real(column)):
            # the placeholder before the first real value of this column
            known = ~np.isnan(values) & ~unset
            real = known & (np.abs(values - INITIAL_RTT_MS) > 1e-6)
            first_real = int(np.argmax(real)) if real.any() else len(values)
            unset[:first_real] |= np.abs(values[:first_real] - INITIAL_RTT_MS) <= 1e-6
            if real.any():
                carry[_real(column)] = True
        values[unset] = np.nan
        columns[column] = pl.Series(column, values, dtype=pl.Float64).fill_nan(None)
    _null_unset_windows_and_rates(columns)


def normalise_batch(
    columns: dict[str, pl.Series], firsts: np.ndarray, owner: np.ndarray
) -> None:
    """:func:`normalise_part` for the rows of many whole traces at once (``columns``, replaced
    in place): ``firsts`` holds each trace's first row, ``owner`` each row's trace. The same
    rows as :func:`normalise_part` applied to each trace on its own, with no call per trace."""
    import numpy as np
    import polars as pl

    k, n = len(firsts), len(owner)
    if n == 0:
        return
    rows = np.arange(n, dtype=np.int64)
    # each trace's unit, decided by its first non-zero RTT (any RTT column, the earliest row)
    first_row = np.full(k, n, dtype=np.int64)
    first_value = np.full(k, np.nan)
    for column in RTT_COLUMNS:
        series = columns.get(column)
        if series is None:
            continue
        values = series.to_numpy().astype(np.float64)
        at, traces = _first_per_trace(~np.isnan(values) & (values != 0), owner)
        earlier = at < first_row[traces]
        first_row[traces[earlier]] = at[earlier]
        first_value[traces[earlier]] = values[at[earlier]]
    with np.errstate(invalid="ignore"):
        seconds = np.abs(first_value - INITIAL_RTT_MS / 1000.0) < 1e-9
    scale = np.where(seconds, 1000.0, 1.0)[owner]
    for column in RTT_COLUMNS:
        series = columns.get(column)
        if series is None or series.null_count() == len(series):
            continue
        values = series.to_numpy().astype(np.float64, copy=True) * scale
        unset = values == 0.0
        placeholder = np.abs(values - INITIAL_RTT_MS) <= 1e-6
        real = ~np.isnan(values) & ~unset & ~placeholder
        # the placeholder before the first real value of this column, in its trace
        first_real = np.full(k, n, dtype=np.int64)
        at, traces = _first_per_trace(real, owner)
        first_real[traces] = at
        unset |= placeholder & (rows < first_real[owner])
        values[unset] = np.nan
        columns[column] = pl.Series(column, values, dtype=pl.Float64).fill_nan(None)
    _null_unset_windows_and_rates(columns)


def _null_unset_windows_and_rates(columns: dict[str, pl.Series]) -> None:
    """u64::MAX ssthresh and a zero pacing rate as null: row by row, whatever the trace."""
    ssthresh = columns.get("ssthresh_bytes")
    if ssthresh is not None and ssthresh.null_count() < len(ssthresh):
        columns["ssthresh_bytes"] = ssthresh.set(ssthresh >= SSTHRESH_UNSET_FROM, None)
    pacing = columns.get("pacing_rate_bps")
    if pacing is not None and pacing.null_count() < len(pacing):
        columns["pacing_rate_bps"] = pacing.set(pacing == 0, None)


def _first_per_trace(mask: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first row where ``mask`` holds in each trace that has one: (rows, their traces)."""
    import numpy as np

    at = np.flatnonzero(mask)
    traces, first = np.unique(owner[at], return_index=True)
    return at[first], traces


def _first_rtt(columns: dict[str, pl.Series]) -> float | None:
    """The first non-zero RTT of the part (any RTT column, the earliest row), if any."""
    import numpy as np

    best: tuple[int, float] | None = None
    for column in RTT_COLUMNS:
        series = columns.get(column)
        if series is None:
            continue
        values = series.to_numpy()
        known = np.flatnonzero(~np.isnan(values.astype(np.float64)) & (values != 0))
        if len(known) and (best is None or known[0] < best[0]):
            best = (int(known[0]), float(values[known[0]]))
    return None if best is None else best[1]


def is_stand_in(column: str, value: float) -> bool:
    """Whether ``value`` of ``column`` (after :func:`normalise_part`) could be a stand-in
    that should have been nulled: the check of the tests and of :mod:`quicsm.extract.account`."""
    if column == "ssthresh_bytes":
        return value >= SSTHRESH_UNSET_FROM
    return column in ZERO_IS_UNSET and value == 0
