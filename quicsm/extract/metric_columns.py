"""Metric streaming: each trace's metric, loss and timer events kept as columns of numbers while
its file is read, and turned into the rows of :func:`quicsm.extract.read.read_metrics`."""

from __future__ import annotations

import math
from array import array
from typing import Any

import numpy as np
import polars as pl

from quicsm.core.frames import EVENT_DTYPE, METRICS_SCHEMA
from quicsm.extract.loading import TIME_DECIMALS
from quicsm.qlog.events import MetricEvent
from quicsm.qlog.trace import TraceBuilder

METRIC_COLUMNS = (
    "cwnd_bytes",
    "bytes_in_flight",
    "ssthresh_bytes",
    "smoothed_rtt_ms",
    "min_rtt_ms",
    "pto_count",
    "pacing_rate_bps",
)


#: the RTT sample of a metrics event: a column of read_metrics, not carried forward
_SAMPLE = "latest_rtt_ms"
_EVENT_NAMES: tuple[str, ...] = tuple(EVENT_DTYPE.categories.to_list())
_EVENT_CODES = {name: i for i, name in enumerate(_EVENT_NAMES)}


#: events a trace's columns take before they become a compact frame part (:class:`MetricColumns`)
METRIC_BLOCK = 1 << 16


class MetricColumns:
    """One trace's metric, loss and timer events as columns of numbers, filled as they are
    decoded (about 70 bytes per event instead of a Python object per event and value), and
    every :data:`METRIC_BLOCK` events turned into a compact frame part (absent values as
    nulls that take no memory, the event names shared), so a long trace is held about as
    compactly as the frame :func:`read_metrics` returns, not once as numbers and once as a
    frame."""

    __slots__ = (
        "events",
        "last",
        "ordered",
        "parts",
        "present",
        "pto",
        "times",
        "trigger_codes",
        "triggers",
        "values",
    )

    def __init__(self) -> None:
        #: the finished blocks: raw time ``_t``, ``event``, the metric columns (not carried
        #: forward yet), the sample and ``trigger``
        self.parts: list[pl.DataFrame] = []
        #: whether every event so far came at or after the one before it (then no sort)
        self.ordered = True
        self.last = -math.inf
        self.trigger_codes: dict[str, int] = {}
        self._new_block()

    def _new_block(self) -> None:
        self.times = array("d")
        self.events = array("B")
        #: per float column, NaN where the event does not carry it (JSON has no NaN)
        self.values = {c: array("d") for c in (*METRIC_COLUMNS, _SAMPLE) if c != "pto_count"}
        self.pto = array("q")
        self.present = array("B")  # whether the event carries pto_count
        self.triggers = array("H")  # 0: none, else 1 + index in trigger_codes

    def __call__(self, event: MetricEvent) -> None:
        values = event.values
        time = event.time
        if time < self.last:
            self.ordered = False
        self.last = time
        self.times.append(time)
        self.events.append(_EVENT_CODES.get(event.event, 0))
        for column, out in self.values.items():
            value = values.get(column)
            out.append(math.nan if value is None else value)
        pto = values.get("pto_count")
        self.pto.append(0 if pto is None else int(pto))
        self.present.append(pto is not None)
        trigger = event.trigger
        if trigger is None:
            self.triggers.append(0)
        else:
            code = self.trigger_codes.setdefault(trigger, len(self.trigger_codes) + 1)
            self.triggers.append(code)
        if len(self.times) >= METRIC_BLOCK:
            self._flush()

    def wanted(self) -> bool:
        return True

    def __len__(self) -> int:
        return sum(p.height for p in self.parts) + len(self.times)

    def _flush(self) -> None:
        """The current block as a frame part; its arrays are let go."""
        n = len(self.times)
        if not n:
            return
        columns: dict[str, pl.Series] = {
            "_t": pl.Series(np.frombuffer(self.times, dtype=np.float64)),
            "event": _codes_to_names(np.frombuffer(self.events, dtype=np.uint8), _EVENT_SERIES),
        }
        for column in METRIC_COLUMNS:
            if column == "pto_count":
                present = np.frombuffer(self.present, dtype=np.uint8).astype(bool)
                if not present.any():
                    columns[column] = pl.repeat(None, n, dtype=pl.Int64, eager=True)
                else:
                    pto = pl.Series(np.frombuffer(self.pto, dtype=np.int64))
                    columns[column] = pto if present.all() else pto.set(pl.Series(~present), None)
            else:
                columns[column] = _floats(np.frombuffer(self.values[column], dtype=np.float64))
        columns[_SAMPLE] = _floats(np.frombuffer(self.values[_SAMPLE], dtype=np.float64))
        names = pl.Series([None, *self.trigger_codes], dtype=pl.String)
        columns["trigger"] = _codes_to_names(np.frombuffer(self.triggers, dtype=np.uint16), names)
        self.parts.append(pl.DataFrame({k: v.alias(k) for k, v in columns.items()}))
        self._new_block()

    def frames(self, file: str, tid: str, vantage: str, start: float) -> list[pl.DataFrame]:
        """The trace's rows of :func:`read_metrics`, in time order (stable: equal times keep
        their file order), every value carried forward; as parts, each finished (and the raw
        one let go) before the next."""
        self._flush()
        parts, self.parts = self.parts, []
        if not self.ordered:  # times went backwards: sorted at once (the only full copy)
            whole = pl.concat(parts, rechunk=False)
            parts.clear()
            order = np.argsort(whole.get_column("_t").to_numpy(), kind="stable")
            parts = [whole[order]]
            del whole, order
        carry: dict[str, Any] = {}
        out: list[pl.DataFrame] = []
        parts.reverse()
        while parts:  # each raw part let go once finished
            out.append(_finish(parts.pop(), file, tid, vantage, start, carry))
        return out


def _floats(values: np.ndarray) -> pl.Series:
    """A float column with NaN (absent) as null; a column with no value takes no memory."""
    absent = np.isnan(values)
    if absent.all():
        return pl.repeat(None, len(values), dtype=pl.Float64, eager=True)
    series = pl.Series(values)
    return series.fill_nan(None) if absent.any() else series


def _codes_to_names(codes: np.ndarray, names: pl.Series) -> pl.Series:
    """``names[codes]``; one code throughout is one name repeated (its text stored once)."""
    n = len(codes)
    if n and (codes == codes[0]).all():
        return pl.repeat(names[int(codes[0])], n, dtype=names.dtype, eager=True)
    return names.gather(codes.astype(np.uint32))


_EVENT_SERIES = pl.Series(list(_EVENT_NAMES), dtype=EVENT_DTYPE)


def _finish(
    part: pl.DataFrame,
    file: str,
    tid: str,
    vantage: str,
    start: float,
    carry: dict[str, Any],
) -> pl.DataFrame:
    """A raw part as rows of :func:`read_metrics`: time from the trace's start, the file and
    trace, every metric carried forward from the part before (``carry``, updated)."""
    n = part.height
    times = part.get_column("_t").to_numpy()
    # rounded as Python rounds (correctly), one part at a time (bounded transient objects)
    time_ms = np.array([round(t - start, TIME_DECIMALS) for t in times.tolist()], np.float64)
    del times
    columns: dict[str, pl.Series] = {
        "file": pl.repeat(file, n, dtype=METRICS_SCHEMA["file"], eager=True),
        "trace": pl.repeat(tid, n, dtype=METRICS_SCHEMA["trace"], eager=True),
        "vantage": pl.repeat(vantage, n, dtype=METRICS_SCHEMA["vantage"], eager=True),
        "time_ms": pl.Series(time_ms, dtype=pl.Float64),
        "event": part.get_column("event"),
    }
    for column in METRIC_COLUMNS:  # every value carried forward within the trace
        series = part.get_column(column)
        before = carry.get(column)
        if series.null_count() == n:
            if before is not None:
                series = pl.repeat(before, n, dtype=series.dtype, eager=True)
        elif series.null_count():
            series = series.forward_fill()
            if before is not None and series.null_count():
                series = series.fill_null(before)
        carry[column] = series[-1] if n else before
        columns[column] = series
    columns[_SAMPLE] = part.get_column(_SAMPLE)  # the event's own: not carried
    columns["trigger"] = part.get_column("trigger")
    return pl.DataFrame({name: columns[name].alias(name) for name in METRICS_SCHEMA})


class MetricsStream:
    """The metric sink of :func:`read_metrics`: each trace's events as :class:`MetricColumns`
    (a trace read again, in contained JSON, starts afresh)."""

    def __init__(self) -> None:
        self.traces: dict[int, MetricColumns] = {}

    def __call__(self, builder: TraceBuilder) -> MetricColumns:
        columns = MetricColumns()
        self.traces[builder.index] = columns
        return columns
