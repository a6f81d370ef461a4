"""Metric streaming: each trace's metric, loss and timer events kept as columns of numbers while
its file is read, and turned into the rows of :func:`quicsm.extract.read.read_metrics`.

Where the native core is used, the events are decoded natively into columns by a recorder
(``quicsm._native.Deriver.recorder()``), which the JSON-SEQ/NDJSON scan and the contained-JSON
reader fill as they fill the derived path's deriver. The rows of short traces are built
together (:class:`MetricsBatch`: one frame for many traces, whatever their number), those of a
long trace one block at a time.

The native core hands its columns to polars through the Arrow C data interface
(``quicsm._native.ArrowBlock``), and every step after is a polars expression: numpy is not
imported on this path (it costs a process about as much again as polars' own import).
"""

from __future__ import annotations

import math
from array import array
from typing import Any

import polars as pl

from quicsm.core import native, tables
from quicsm.core.frames import EVENT_DTYPE, METRICS_SCHEMA
from quicsm.extract.sentinels import NORMALISED_COLUMNS, learn, normalise_batch, part_plan
from quicsm.extract.times import round_ms, round_ms_exprs
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
        "trigger_names",
        "triggers",
        "values",
    )

    def __init__(self) -> None:
        #: the finished blocks, as the native core's columns (:func:`_frame`: raw time ``_t``,
        #: ``kind``, the metrics as logged, ``trigger`` codes into ``trigger_names``, which only
        #: grows, so its last state names the codes of every block)
        self.parts: list[pl.DataFrame] = []
        self.trigger_names: list[str] = []
        #: whether every event so far came at or after the one before it (then no sort)
        self.ordered = True
        self.last = -math.inf
        self.trigger_codes: dict[str, int] = {}
        #: where the native core is used, a recorder (``quicsm._native.Deriver.recorder()``: it
        #: derives nothing and keeps the events as columns) that the native scan and
        #: contained-JSON reader fill with the events they decode (they find it as the derived
        #: path finds its deriver); records handed back to Python are fed to it by
        #: :meth:`__call__`, in order
        ext = native.module()
        self.native_deriver: Any = None if ext is None else ext.Deriver.recorder()
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

    def _block(self) -> _Pending | None:
        """The events not yet in a part (let go here), ``None`` if none: as the native core's
        columns (``take_arrow``: ``_t``, ``kind``, the metrics by name, ``trigger`` codes) or,
        read by Python, as arrays of the same names; with the trigger names and the length."""
        if self.native_deriver is not None:
            source, names = self.native_deriver.take_arrow()
            n = source.length
            if not n:
                return None
            first, last, ordered = source.first, source.last, source.ordered
        else:
            n = len(self.times)
            if not n:
                return None
            source, names = self._python_arrays(), list(self.trigger_codes)
            self._new_block()
            t = source["_t"]
            first, last, ordered = float(t[0]), float(t[-1]), not bool((t[1:] < t[:-1]).any())
        if first < self.last or not ordered:
            self.ordered = False
        self.last = last
        return source, names, n

    def _python_arrays(self) -> dict[str, Any]:
        """The Python reader's arrays as numpy arrays named as the native core's columns."""
        import numpy as np  # the Python reader's path only

        n = len(self.times)
        columns: dict[str, Any] = {
            "_t": np.frombuffer(self.times, dtype=np.float64),
            "kind": np.frombuffer(self.events, dtype=np.uint8),
        }
        for name in _FEED_METRICS:  # the native core's columns, in its order
            if name == "pto_count":
                pto = np.frombuffer(self.pto, dtype=np.int64).astype(np.float64)
                present = np.frombuffer(self.present, dtype=np.uint8).astype(bool)
                columns[name] = np.where(present, pto, np.nan)
            elif name in self.values:
                columns[name] = np.frombuffer(self.values[name], dtype=np.float64)
            else:
                columns[name] = np.full(n, np.nan)
        columns["trigger"] = np.frombuffer(self.triggers, dtype=np.uint16)
        return columns

    def _flush(self) -> None:
        """The current block as a frame part; its arrays are let go."""
        block = self._block()
        if block is not None:
            self._keep(block)

    def _keep(self, block: _Pending) -> None:
        self.parts.append(_kept(block[0]))
        self.trigger_names = block[1]

    def take_short(self) -> _Pending | None:
        """All of a short trace's events as one block (for :class:`MetricsBatch`), if it is
        short (no part made yet) and in time order; else ``None`` (it is finished on its own:
        :meth:`frames`)."""
        if self.parts or not self.ordered:
            return None
        block = self._block()
        if block is None or not self.ordered:
            if block is not None:
                self._keep(block)
            return None
        return block

    def frames(self, file: str, tid: str, vantage: str, start: float) -> list[pl.DataFrame]:
        """The trace's rows of :func:`read_metrics`, in time order (stable: equal times keep
        their file order), every value carried forward; as parts, each finished (and the raw
        one let go) before the next."""
        self._flush()
        parts, self.parts = self.parts, []
        if not self.ordered:  # times went backwards: sorted at once (the only full copy)
            whole = pl.concat(parts, how="diagonal", rechunk=False)  # compact parts differ
            parts.clear()
            parts = [whole.sort("_t", maintain_order=True)]  # stable: equal times keep order
            del whole
        carry: dict[str, Any] = {}
        out: list[pl.DataFrame] = []
        names = pl.Series([None, *self.trigger_names], dtype=pl.String)
        parts.reverse()
        while parts:  # each raw part let go once finished
            out.append(_finish(parts.pop(), file, tid, vantage, start, carry, names))
        return out


#: a block of events not yet in a frame: its columns (a ``quicsm._native.ArrowBlock``, or numpy
#: arrays by name), the trigger names its codes index, its length
_Pending = tuple[Any, list[str], int]


def _frame(sources: list[Any]) -> pl.DataFrame:
    """Blocks of events (:data:`_Pending`'s columns, all of one kind) as ONE frame: native
    blocks joined by the native core and handed over through the Arrow C data interface (the
    columns of :data:`_KEPT`, each on its own, so a column the frame returned keeps holds only
    itself; a float column of nulls only as one that takes no memory), numpy arrays (the Python
    reader's) joined by numpy."""
    if isinstance(sources[0], dict):
        import numpy as np  # the Python reader's path only

        columns = {name: np.concatenate([s[name] for s in sources]) for name in sources[0]}
        frame = pl.DataFrame(columns)
        return frame.with_columns(pl.col(pl.Float64).exclude("_t").fill_nan(None))
    ext = native.module()
    assert ext is not None  # native blocks come from the native core
    block = sources[0] if len(sources) == 1 else ext.concat_blocks(sources)
    n = block.length
    return pl.DataFrame(
        [
            pl.repeat(None, n, dtype=pl.Float64, eager=True).alias(name)
            if column is None
            else pl.Series(column)
            for name, column in zip(_KEPT, block.take(list(_KEPT)), strict=True)
        ]
    )


def _kept(source: Any) -> pl.DataFrame:
    """A block of events (:data:`_Pending`'s columns) as it is kept until its trace is
    finished: the time, the event kind, and of the metrics, the sample and the trigger codes
    only the columns :func:`read_metrics` returns that hold a value in this block (a metric no
    event of the block carries, or no trigger, is made by :func:`_finish` from the carry), so a
    kept block takes about what its rows finish as, not a float for every metric of every
    event.

    The native core's columns are handed over one by one (``ArrowBlock.take``): polars holds
    the children of an Arrow struct through the struct, so a column left out of a frame of the
    whole block would stay in memory as long as the block's times. Each kept column is copied
    into polars' own memory (:func:`_owned`): the native core's buffers are then freed at once
    and reused by its next block, where kept until the trace is finished they went back to the
    C allocator only when polars' allocator had already grown by the finished rows (the read's
    peak: about 100 bytes per row returned instead of 145, ``tests/test_read_memory.py``)."""
    if isinstance(source, dict):
        frame = _frame([source])
        n = frame.height
        kept = [s for s in frame.get_columns() if s.name in _KEPT and s.null_count() < n]
    else:
        kept = [_owned(pl.Series(c)) for c in source.take(list(_KEPT)) if c is not None]
    return pl.DataFrame([s for s in kept if s.name != "trigger" or s.max() != 0])  # 0: none


def _owned(series: pl.Series) -> pl.Series:
    """``series`` in a buffer of polars' own: two pieces of it joined into one chunk (a copy
    at the speed of memory; a series of one value is returned as it is)."""
    return series.head(1).append(series.slice(1)).rechunk()


#: the columns of a block that are kept (where they hold a value): the time, the event kind,
#: the metrics of read_metrics, the sample and the trigger codes
_KEPT: tuple[str, ...] = ("_t", "kind", *METRIC_COLUMNS, _SAMPLE, "trigger")


def _codes_to_names(codes: pl.Series, names: pl.Series) -> pl.Series:
    """``names[codes]``; one code throughout is one name repeated (its text stored once)."""
    n = len(codes)
    if n and codes.min() == codes.max():
        return names.new_from_index(int(codes[0]), n)
    return names.gather(codes.cast(pl.UInt32))


_EVENT_SERIES = pl.Series(list(_EVENT_NAMES), dtype=EVENT_DTYPE)
#: the metrics in the order the native core holds them, and the codes of its event kinds (the
#: same order as ``EVENT_DTYPE``'s names: checked below)
_FEED_METRICS: tuple[str, ...] = tuple(METRIC_FIELDS)
_FEED_CODES: dict[str, int] = {kind: i for i, kind in enumerate(tables.FEED_KINDS)}
if tuple(tables.FEED_KINDS) != _EVENT_NAMES:
    raise RuntimeError("the native event kinds and EVENT_DTYPE's names differ")


def _finish(
    part: pl.DataFrame,
    file: str,
    tid: str,
    vantage: str,
    start: float,
    carry: dict[str, Any],
    trigger_names: pl.Series,
) -> pl.DataFrame:
    """A kept part (:func:`_kept`) as rows of :func:`read_metrics`: time from the trace's
    start, the file and trace, the event and trigger by name (``trigger_names``: null, then the
    names the codes count from 1), every metric carried forward from the part before
    (``carry``, updated; a metric the part left out is the value carried into it throughout),
    stand-ins for "not set yet" as null (:mod:`quicsm.extract.sentinels`)."""
    # one query for the part (a few, not one per column): carried forward, timed, normalised
    n = part.height
    held = set(part.columns)
    thousands = pl.Series("_k", [1000.0]).new_from_index(0, n)  # a column: not a literal
    frame = part.hstack([thousands]).lazy()
    fills = []
    for column in METRIC_COLUMNS:  # every value carried forward within the trace
        before = carry.get(column)
        dtype = METRICS_SCHEMA[column]
        if column not in held:
            fills.append(pl.lit(before, dtype=dtype).alias(column))
            continue
        logged = part.get_column(column)
        filled = pl.col(column).cast(pl.Int64) if column == "pto_count" else pl.col(column)
        if logged.null_count():  # (a column logged at every event is as it was)
            filled = filled.forward_fill()
            if before is not None and logged[0] is None:
                filled = filled.fill_null(pl.lit(before, dtype=dtype))
        fills.append(filled)
        last: Any = logged.last(ignore_nulls=True)  # what the next part carries in (a float)
        if last is not None:
            carry[column] = int(last) if column == "pto_count" else last
    if _SAMPLE not in held:  # the event's own: null where the part carries none
        fills.append(pl.lit(None, dtype=METRICS_SCHEMA[_SAMPLE]).alias(_SAMPLE))
    trigger = (
        pl.lit(trigger_names).gather(pl.col("trigger").cast(pl.UInt32))
        if "trigger" in held
        else pl.lit(None, dtype=METRICS_SCHEMA["trigger"])
    )
    frame = frame.with_columns(fills)
    # time from the trace's start rounded as Python rounds (quicsm.extract.times: rint of the
    # product, divided by a column of 1000.0; rows near a half or too large are Python's)
    time_ms, slow = round_ms_exprs(pl.col("_t") - start, pl.col("_k"))
    normalised, learning = part_plan(carry, list(NORMALISED_COLUMNS))
    replaced = {e.meta.output_name(): e for e in normalised}
    rows = frame.select(
        pl.lit(file, dtype=METRICS_SCHEMA["file"]).alias("file"),
        pl.lit(tid, dtype=METRICS_SCHEMA["trace"]).alias("trace"),
        pl.lit(vantage, dtype=METRICS_SCHEMA["vantage"]).alias("vantage"),
        time_ms.alias("time_ms"),
        pl.lit(_EVENT_SERIES).gather(pl.col("kind").cast(pl.UInt32)).alias("event"),
        *(replaced.get(c, pl.col(c)).alias(c) for c in METRIC_COLUMNS),
        replaced[_SAMPLE].alias(_SAMPLE),  # the event's own: not carried
        trigger.alias("trigger"),
    )
    learnt = frame.select(slow.alias("_slow"), *learning)
    out, summary = pl.collect_all([rows, learnt], engine="in-memory")
    seen = summary.row(0, named=True)
    learn(carry, seen)  # sentinels and placeholders as null, RTTs in ms: what the part showed
    if seen["_slow"]:  # rare: a time next to a half, or beyond 2**31 ms
        out = out.with_columns(round_ms(part.get_column("_t") - start).alias("time_ms"))
    return out


class MetricsStream:
    """The metric sink of :func:`read_metrics`: each trace's events as :class:`MetricColumns`
    (a trace read again, in contained JSON, starts afresh)."""

    def __init__(self) -> None:
        self.traces: dict[int, MetricColumns] = {}

    def __call__(self, builder: TraceBuilder) -> MetricColumns:
        columns = MetricColumns()
        self.traces[builder.index] = columns
        return columns


#: rows a short trace may have to be built with others (:class:`MetricsBatch`); longer ones are
#: built on their own, a block at a time
SHORT_TRACE_ROWS = METRIC_BLOCK


class MetricsBatch:
    """The rows of many short traces, kept as their blocks of columns and built into ONE frame
    when they hold :data:`METRIC_BLOCK` rows (and at the end): a few polars calls per trace at
    most, so a file of thousands of short connections costs about what one connection of the
    same rows costs. Long traces are finished on their own (:meth:`MetricColumns.frames`), in
    order."""

    def __init__(self) -> None:
        self.out: list[pl.DataFrame] = []
        self._blocks: list[_Pending] = []
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
        self._rows += block[2]
        if self._rows >= METRIC_BLOCK:
            self.flush()

    def flush(self) -> None:
        """The traces held, as one frame of :data:`METRICS_SCHEMA`."""
        if not self._blocks:
            return
        blocks, keys = self._blocks, self._keys
        self._blocks, self._keys, self._rows = [], [], 0
        lengths = [n for _, _, n in blocks]
        k = len(blocks)
        whole = _frame([source for source, _, _ in blocks])
        owner = (
            pl.DataFrame({"i": range(k), "n": lengths}, schema={"i": pl.UInt32, "n": pl.UInt32})
            .select(pl.col("i").repeat_by("n").explode())
            .get_column("i")
        )
        columns: dict[str, pl.Series] = {}
        for name, i in (("file", 0), ("trace", 1), ("vantage", 2)):
            per_trace = pl.Series(name, [key[i] for key in keys], dtype=pl.String)
            columns[name] = per_trace.cast(METRICS_SCHEMA[name]).gather(owner)
        starts = pl.Series([key[3] for key in keys], dtype=pl.Float64).gather(owner)
        columns["time_ms"] = round_ms(whole.get_column("_t") - starts)
        del starts
        columns["event"] = _codes_to_names(whole.get_column("kind"), _EVENT_SERIES)
        carried = whole.with_columns(_owner=owner).select(  # carried forward within each trace
            (pl.col(c).cast(pl.Int64) if c == "pto_count" else pl.col(c))
            .forward_fill()
            .over("_owner")
            for c in METRIC_COLUMNS
        )
        for column in METRIC_COLUMNS:
            columns[column] = carried.get_column(column)
        columns[_SAMPLE] = whole.get_column(_SAMPLE)  # the event's own: not carried
        # each trace's trigger codes index its own names: mapped to one table of names
        table: dict[str, int] = {}
        flat: list[int] = []
        offsets: list[int] = []
        for _, names, _ in blocks:
            offsets.append(len(flat))
            flat += [0, *(table.setdefault(t, len(table) + 1) for t in names)]
        at = pl.Series(offsets, dtype=pl.UInt32).gather(owner) + whole.get_column("trigger").cast(
            pl.UInt32
        )
        codes = pl.Series(flat, dtype=pl.UInt32).gather(at)
        columns["trigger"] = _codes_to_names(codes, pl.Series([None, *table], dtype=pl.String))
        normalise_batch(columns, owner)  # stand-ins as null, RTTs in ms, per trace
        self.out.append(pl.DataFrame([columns[c].alias(c) for c in METRICS_SCHEMA]))
