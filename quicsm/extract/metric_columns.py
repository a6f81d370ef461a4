"""Metric streaming: each trace's metric, loss and timer events kept as columns of numbers while
its file is read, and turned into the rows of :func:`quicsm.extract.read.read_metrics`.

Where the native core is used, the events are decoded natively into columns by a recorder
(``quicsm._native.Deriver.recorder()``), which the JSON-SEQ/NDJSON scan and the contained-JSON
reader fill as they fill the derived path's deriver. The rows of short traces are built
together (:class:`MetricsBatch`: one frame for many traces, whatever their number), those of a
long trace one block at a time.
"""

from __future__ import annotations

import math
from array import array
from typing import Any

import numpy as np
import polars as pl

from quicsm.core import tables
from quicsm.core.frames import EVENT_DTYPE, METRICS_SCHEMA
from quicsm.extract.native import make_recorder
from quicsm.extract.sentinels import normalise_batch, normalise_part
from quicsm.extract.times import round_ms
from quicsm.qlog.events import METRIC_FIELDS, MetricEvent
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
        "native_deriver",
        "ordered",
        "parts",
        "present",
        "pto",
        "scan_records",
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
        #: where the native core is used, a recorder that the native scan and contained-JSON
        #: reader fill with the events they decode (they find it as the derived path finds its
        #: deriver); records handed back to Python are fed to it by :meth:`__call__`, in order
        self.native_deriver = make_recorder()
        self.scan_records = self._scan if self.native_deriver is not None else None
        self._new_block()

    def _scan(
        self,
        buf: Any,
        pos: int,
        end: int,
        sep: int,
        scale: float,
        latest: float | None,
        latest_other: float | None,
        feed: bool,
        no_states: bool = False,
    ) -> tuple[int, int, float | None, float | None, bool, int]:
        """The native pass over a region (``NativeDeriver.scan_records``), its events
        recorded; a block of them becomes a frame part."""
        result: tuple[int, int, float | None, float | None, bool, int] = self.native_deriver.scan(
            buf, pos, end, sep, scale, latest, latest_other, feed, no_states
        )
        if self.native_deriver.recorded() >= METRIC_BLOCK:
            self._flush()
        return result

    def _new_block(self) -> None:
        self.times = array("d")
        self.events = array("B")
        #: per float column, NaN where the event does not carry it (JSON has no NaN)
        self.values = {c: array("d") for c in (*METRIC_COLUMNS, _SAMPLE) if c != "pto_count"}
        self.pto = array("q")
        self.present = array("B")  # whether the event carries pto_count
        self.triggers = array("H")  # 0: none, else 1 + index in trigger_codes

    def __call__(self, event: MetricEvent) -> None:
        if self.native_deriver is not None:
            values = event.values
            self.native_deriver.feed(
                float(event.time),
                _FEED_CODES[event.event],
                [values.get(name) for name in _FEED_METRICS],
                event.app_limited,
                event.trigger,
            )
            return
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
        if self.native_deriver is not None and self.native_deriver.recorded() >= METRIC_BLOCK:
            self._flush()  # the contained-JSON reader asks between its native calls
        return True

    def __len__(self) -> int:
        held = self.native_deriver.recorded() if self.native_deriver is not None else 0
        return sum(p.height for p in self.parts) + len(self.times) + held

    def _block(self) -> _Block | None:
        """The events not yet in a part, as arrays (and let go here); ``None`` if none."""
        if self.native_deriver is not None:
            times, kinds, values, triggers, names = self.native_deriver.take_columns()
            t = np.frombuffer(times, dtype=np.float64)
            if not len(t):
                return None
            if t[0] < self.last or (len(t) > 1 and bool((t[1:] < t[:-1]).any())):
                self.ordered = False
            self.last = float(t[-1])
            metric = {
                name: np.frombuffer(v, dtype=np.float64)
                for name, v in zip(_FEED_METRICS, values, strict=True)
            }
            pto = metric["pto_count"]
            present = ~np.isnan(pto)
            return _Block(
                t,
                _FEED_EVENT_CODES[np.frombuffer(kinds, dtype=np.uint8)],
                metric,
                np.where(present, pto, 0).astype(np.int64),
                present,
                np.frombuffer(triggers, dtype=np.uint16),
                names,
            )
        if not len(self.times):
            return None
        block = _Block(
            np.frombuffer(self.times, dtype=np.float64),
            np.frombuffer(self.events, dtype=np.uint8),
            {c: np.frombuffer(v, dtype=np.float64) for c, v in self.values.items()},
            np.frombuffer(self.pto, dtype=np.int64),
            np.frombuffer(self.present, dtype=np.uint8).astype(bool),
            np.frombuffer(self.triggers, dtype=np.uint16),
            list(self.trigger_codes),
        )
        self._new_block()
        return block

    def _flush(self) -> None:
        """The current block as a frame part; its arrays are let go."""
        block = self._block()
        if block is not None:
            self.parts.append(block.raw_part())

    def take_short(self) -> _Block | None:
        """All of a short trace's events as one block (for :class:`MetricsBatch`), if it is
        short (no part made yet) and in time order; else ``None`` (it is finished on its own:
        :meth:`frames`)."""
        if self.parts or not self.ordered:
            return None
        block = self._block()
        if block is None or not self.ordered:
            if block is not None:
                self.parts.append(block.raw_part())
            return None
        return block

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


class _Block:
    """A block of a trace's events as arrays: times, event codes (``_EVENT_SERIES``), the float
    metrics and the sample (NaN: absent), the PTO counts and where they are present, trigger
    codes (0: none, else 1 + the position in ``trigger_names``)."""

    __slots__ = ("events", "present", "pto", "times", "trigger_names", "triggers", "values")

    def __init__(
        self,
        times: np.ndarray,
        events: np.ndarray,
        values: dict[str, np.ndarray],
        pto: np.ndarray,
        present: np.ndarray,
        triggers: np.ndarray,
        trigger_names: list[str],
    ) -> None:
        self.times = times
        self.events = events
        self.values = values
        self.pto = pto
        self.present = present
        self.triggers = triggers
        self.trigger_names = trigger_names

    def raw_part(self) -> pl.DataFrame:
        """The block as a raw frame part (:meth:`MetricColumns.frames` finishes it)."""
        n = len(self.times)
        columns: dict[str, pl.Series] = {
            "_t": pl.Series(self.times),
            "event": _codes_to_names(self.events, _EVENT_SERIES),
        }
        for column in METRIC_COLUMNS:
            if column == "pto_count":
                columns[column] = _present_ints(self.pto, self.present, n)
            else:
                columns[column] = _floats(self.values[column])
        columns[_SAMPLE] = _floats(self.values[_SAMPLE])
        names = pl.Series([None, *self.trigger_names], dtype=pl.String)
        columns["trigger"] = _codes_to_names(self.triggers, names)
        return pl.DataFrame({k: v.alias(k) for k, v in columns.items()})


def _present_ints(values: np.ndarray, present: np.ndarray, n: int) -> pl.Series:
    if not present.any():
        return pl.repeat(None, n, dtype=pl.Int64, eager=True)
    series = pl.Series(values)
    return series if present.all() else series.set(pl.Series(~present), None)


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
#: the metrics in the order the native core holds them, and the codes of its event kinds
_FEED_METRICS: tuple[str, ...] = tuple(METRIC_FIELDS)
_FEED_CODES: dict[str, int] = {kind: i for i, kind in enumerate(tables.FEED_KINDS)}
#: a native event kind (its position in the feed kinds) -> its code in ``_EVENT_SERIES``
_FEED_EVENT_CODES = np.asarray([_EVENT_CODES[k] for k in tables.FEED_KINDS], dtype=np.uint8)


def _finish(
    part: pl.DataFrame,
    file: str,
    tid: str,
    vantage: str,
    start: float,
    carry: dict[str, Any],
) -> pl.DataFrame:
    """A raw part as rows of :func:`read_metrics`: time from the trace's start, the file and
    trace, every metric carried forward from the part before (``carry``, updated), stand-ins
    for "not set yet" as null (:mod:`quicsm.extract.sentinels`)."""
    n = part.height
    time_ms = round_ms(part.get_column("_t").to_numpy() - start)  # as Python rounds
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
    normalise_part(columns, carry)  # sentinels and placeholders as null, RTTs in ms
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


def _carried(
    values: np.ndarray, valid: np.ndarray, firsts: np.ndarray, owner: np.ndarray
) -> np.ndarray:
    """Per row, the position of the last valid row at or before it within its trace, -1 where
    there is none (``firsts``: each trace's first row; ``owner``: each row's trace)."""
    at = np.where(valid, np.arange(len(values)), -1)
    np.maximum.accumulate(at, out=at)
    at[at < firsts[owner]] = -1
    return at


#: rows a short trace may have to be built with others (:class:`MetricsBatch`); longer ones are
#: built on their own, a block at a time
SHORT_TRACE_ROWS = METRIC_BLOCK


class MetricsBatch:
    """The rows of many short traces, kept as their blocks of arrays and built into ONE frame
    when they hold :data:`METRIC_BLOCK` rows (and at the end): no polars call per trace, so a
    file of thousands of short connections costs what one connection of the same rows costs.
    Long traces are finished on their own (:meth:`MetricColumns.frames`), in order."""

    def __init__(self) -> None:
        self.out: list[pl.DataFrame] = []
        self._blocks: list[_Block] = []
        self._keys: list[tuple[str, str, str, float]] = []  # file, trace, vantage, start
        self._rows = 0

    def add(self, columns: MetricColumns, file: str, tid: str, vantage: str, start: float) -> None:
        block = columns.take_short() if len(columns) < SHORT_TRACE_ROWS else None
        if block is None:
            self.flush()  # the order of traces is kept
            self.out += columns.frames(file, tid, vantage, start)
            return
        self._blocks.append(block)
        self._keys.append((file, tid, vantage, start))
        self._rows += len(block.times)
        if self._rows >= METRIC_BLOCK:
            self.flush()

    def flush(self) -> None:
        """The traces held, as one frame of :data:`METRICS_SCHEMA`."""
        if not self._blocks:
            return
        blocks, keys = self._blocks, self._keys
        self._blocks, self._keys, self._rows = [], [], 0
        lengths = np.asarray([len(b.times) for b in blocks], dtype=np.int64)
        k = len(blocks)
        owner = np.repeat(np.arange(k, dtype=np.int64), lengths)
        firsts = np.zeros(k, dtype=np.int64)
        np.cumsum(lengths[:-1], out=firsts[1:])
        starts = np.asarray([key[3] for key in keys], dtype=np.float64)
        times = np.concatenate([b.times for b in blocks])
        columns: dict[str, pl.Series] = {}
        for name, i in (("file", 0), ("trace", 1), ("vantage", 2)):
            per_trace = pl.Series(name, [key[i] for key in keys], dtype=pl.String)
            columns[name] = per_trace.cast(METRICS_SCHEMA[name]).gather(owner)
        columns["time_ms"] = pl.Series("time_ms", round_ms(times - starts[owner]))
        del times
        columns["event"] = _codes_to_names(
            np.concatenate([b.events for b in blocks]), _EVENT_SERIES
        )
        for column in METRIC_COLUMNS:  # every value carried forward within its trace
            if column == "pto_count":
                counts = np.concatenate([b.pto for b in blocks])
                valid = np.concatenate([b.present for b in blocks])
                at = _carried(counts, valid, firsts, owner)
                series = pl.Series(counts[np.maximum(at, 0)])
                unset = at < 0
                columns[column] = series.set(pl.Series(unset), None) if unset.any() else series
            else:
                floats = np.concatenate([b.values[column] for b in blocks])
                at = _carried(floats, ~np.isnan(floats), firsts, owner)
                columns[column] = _floats(np.where(at >= 0, floats[np.maximum(at, 0)], np.nan))
        sample = np.concatenate([b.values[_SAMPLE] for b in blocks])
        columns[_SAMPLE] = _floats(sample)  # the event's own: not carried
        # each trace's trigger codes index its own names: mapped to one table of names
        table: dict[str, int] = {}
        lookups = [
            np.asarray([0, *(table.setdefault(t, len(table) + 1) for t in b.trigger_names)])
            for b in blocks
        ]
        codes = np.concatenate(
            [lookup[b.triggers] for lookup, b in zip(lookups, blocks, strict=True)]
        )
        names = pl.Series([None, *table], dtype=pl.String)
        columns["trigger"] = _codes_to_names(codes, names)
        normalise_batch(columns, firsts, owner)  # stand-ins as null, RTTs in ms, per trace
        self.out.append(pl.DataFrame({c: columns[c].alias(c) for c in METRICS_SCHEMA}))
