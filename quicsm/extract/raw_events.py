"""The records of one trace as its file has them, for a plot whose marks open the event they
were drawn from: each event record's number in the file (1-based, as error messages count
records: a JSON-SEQ record's separators counted from the file's start, an NDJSON record's
line), its event name, its time in ms from the trace's first event (the plot's time axis),
and its text exactly as written. A contained-JSON file (one document) has no records: there,
each event of the trace's ``events`` list counts (from 1) and its text is the event written
compactly (the document's own layout is not kept).

:func:`trace_records` reads one trace of a JSON-SEQ or NDJSON file (compressed or not);
:meth:`TraceRecords.find` names the record a mark was drawn from, by the mark's time and the
event names (and data) that draw it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from quicsm.core.diagnostics import RecordProblem
from quicsm.qlog.blocks import DEFAULT_LIMITS, DecompressedFile, ReadLimits
from quicsm.qlog.seq import LF, RS
from quicsm.qlog.source import JSON, JSON_SEQ, NDJSON, detect, without_bom
from quicsm.qlog.trace import TraceBuilder, is_header, object_event

#: how event records begin (a header record never does): cheap to test before decoding
_EVENT_STARTS: tuple[bytes, ...] = (b'{"time"', b'{"name"', b'{"data"')
#: the longest record text a page keeps for a click on its mark (characters)
MAX_RECORD_CHARS = 4000


@dataclass
class TraceRecords:
    """The event records of one trace: parallel lists in file order."""

    file: str
    trace: int
    #: what a number counts: ``record`` (JSON-SEQ, NDJSON) or ``event`` (a contained JSON
    #: document's events list)
    unit: str = "record"
    #: each record's number in the file (1-based)
    numbers: list[int] = field(default_factory=list)
    #: each record's event name without its category (``packet_sent``, ``metrics_updated``)
    names: list[str] = field(default_factory=list)
    #: each record's time in ms from the trace's first event, rounded to the µs
    times: list[float] = field(default_factory=list)
    #: each record's decoded data (``None``: not an object)
    data: list[Any] = field(default_factory=list)
    #: each record's text as the file has it
    texts: list[str] = field(default_factory=list)
    _at: dict[float, list[int]] = field(default_factory=dict, repr=False)
    _index: dict[int, int] = field(default_factory=dict, repr=False)

    def add(self, number: int, name: str, time_ms: float, data: Any, text: str) -> None:
        at = round(time_ms, 3)
        self._at.setdefault(at, []).append(len(self.numbers))
        self._index[number] = len(self.numbers)
        self.numbers.append(number)
        self.names.append(name.rpartition(":")[2].lower())
        self.times.append(at)
        self.data.append(data)
        self.texts.append(text)

    def find(
        self,
        time_ms: float,
        names: Collection[str],
        *,
        test: Callable[[Any], bool] | None = None,
        last: bool = False,
    ) -> int | None:
        """The number of the record a mark at ``time_ms`` was drawn from: of the records at
        that time (to the µs) named one of ``names``, those whose data passes ``test`` when
        any does; the first of them (``last``: the last, as a value logged twice at one time
        holds the later one); ``None`` when no record at that time has such a name."""
        at = round(time_ms, 3)
        found: list[int] = []
        for key in (at, round(at - 0.001, 3), round(at + 0.001, 3)):
            found = [i for i in self._at.get(key, ()) if self.names[i] in names]
            if found:
                break
        if not found:
            return None
        if test is not None:
            passing = [i for i in found if test(self.data[i])]
            found = passing or found
        return self.numbers[found[-1] if last else found[0]]

    def names_at(self, time_ms: float) -> frozenset[str]:
        """The names of the events at ``time_ms`` (to the µs)."""
        return frozenset(self.names[i] for i in self._at.get(round(time_ms, 3), ()))

    def name_of(self, number: int) -> str:
        """Record ``number``'s event name."""
        return self.names[self._index[number]]

    def text_of(self, number: int) -> str:
        """Record ``number``'s text (cut to :data:`MAX_RECORD_CHARS`)."""
        text = self.texts[self._index[number]]
        return text if len(text) <= MAX_RECORD_CHARS else text[:MAX_RECORD_CHARS] + " …"

    def heading(self, number: int) -> str:
        """Where record ``number`` is, in words: file, trace, record, event, time."""
        i = self._index[number]
        return (
            f"{self.file}, trace {self.trace}, record {number}: {self.names[i]} at "
            f"{self.times[i]:g} ms"
        )


class _Window:
    """The decompressed content read as far as needed: the bytes from the record being read
    on, more blocks pulled only when a separator is looked for past them (a trace near the
    start of a long file does not decompress the rest of it). Offsets are the content's."""

    def __init__(self, first: bytes, rest: Iterator[bytes]) -> None:
        self.buf = first
        self.base = 0  # the content offset of buf[0]
        self.kept = 0  # what lies before it has been taken
        self.rest = rest
        self.done = False

    def find(self, sep: bytes, start: int) -> int:
        """The offset of the first ``sep`` at or after ``start``, or -1 when the content has
        none (all of it read by then)."""
        while True:
            i = self.buf.find(sep, max(0, start - self.base))
            if i != -1:
                return self.base + i
            if self.done:
                return -1
            block = next(self.rest, None)
            if block is None:
                self.done = True
            else:
                # what was taken is not needed again: dropped once per block, not per record
                self.buf = self.buf[self.kept - self.base :] + block
                self.base = self.kept

    def skip(self, offset: int, sep: bytes) -> tuple[int, int | None]:
        """Passes over the content before ``offset`` without keeping it: how many ``sep`` it
        holds (from what was taken on), and its last byte (None at offset 0, or past the
        content's end)."""
        count = 0
        last: int | None = None
        while self.base + len(self.buf) < offset:
            count += self.buf.count(sep, max(self.kept - self.base, 0))
            if self.buf:
                last = self.buf[-1]
            self.base += len(self.buf)
            self.kept = self.base
            block = next(self.rest, None)
            if block is None:
                self.done = True
                self.buf = b""
                return count, None
            self.buf = block
        at = offset - self.base
        count += self.buf.count(sep, max(self.kept - self.base, 0), at)
        if at > 0:
            last = self.buf[at - 1]
        self.kept = offset
        return count, last if offset > 0 else None

    @property
    def total(self) -> int:
        """The content's length (once :meth:`find` has read all of it)."""
        return self.base + len(self.buf)

    def take(self, start: int, end: int) -> bytes:
        """``content[start:end]``; what lies before ``end`` is not needed again."""
        out = self.buf[start - self.base : end - self.base]
        self.kept = end
        return out


def trace_records(
    path: str | Path,
    index: int,
    *,
    limits: ReadLimits = DEFAULT_LIMITS,
    block_size: int = 0,
    start: int | None = None,
) -> TraceRecords | None:
    """The event records of trace ``index`` (counted from 0, as trace ids count them) of a
    JSON-SEQ or NDJSON file, or the events of a contained JSON document's trace; ``None`` for
    a transitions table, or a trace not found. Times are counted as the readers count them
    (the header's time format, from the trace's first event). A record that does not decode
    is left out (the plot's reading reported it already). The file is decompressed only as
    far as the trace's last record (``block_size``: the blocks read, 0 for the default).

    ``start``: where the trace begins in the decompressed content, from the file's index
    (:attr:`quicsm.qlog.paths.TraceSpans.spans`: its header's separator in JSON-SEQ, its
    first byte in NDJSON): the records before it are not looked at, only their separators
    counted (the numbers stay the file's). A start where no record begins is not trusted:
    the trace is then found by reading from the file's start."""
    if start is not None:
        found = _read(path, index, limits, block_size, start)
        if found is not _MISPLACED:
            return found  # type: ignore[return-value]
    found = _read(path, index, limits, block_size, None)
    return None if found is _MISPLACED else found  # type: ignore[return-value]


#: what a read from a ``start`` where no record begins gives
_MISPLACED = object()


def _read(
    path: str | Path, index: int, limits: ReadLimits, block_size: int, start: int | None
) -> object:
    source = (
        DecompressedFile(Path(path), limits=limits, block_size=block_size)
        if block_size
        else DecompressedFile(Path(path), limits=limits)
    )
    blocks = without_bom(source.blocks())
    try:
        return _trace_records(str(path), blocks, index, start)
    finally:
        close = getattr(blocks, "close", None)
        if close is not None:
            close()


def _trace_records(
    file: str, blocks: Iterator[bytes], index: int, start: int | None = None
) -> object:
    head = b""
    for block in blocks:
        head += block
        if len(head) >= 1 << 16:
            break
    kind = detect(head[: 1 << 16])
    if kind == JSON:
        return _contained(file, head + b"".join(blocks), index)
    if kind not in (JSON_SEQ, NDJSON):
        return None
    sep = RS if kind == JSON_SEQ else LF
    content = _Window(head, blocks)
    out = TraceRecords(file=file, trace=index)
    trace = -1
    builder: TraceBuilder | None = None
    first: float | None = None
    pos = content.find(sep, 0) if kind == JSON_SEQ else -1
    number = 0
    if start is not None and start > max(pos, 0):  # skip to the trace (see trace_records)
        before, last = content.skip(start, sep)
        if kind == JSON_SEQ:
            if content.find(sep, start) != start:
                return _MISPLACED
            pos, number = start, before
        else:
            if last != sep[0]:
                return _MISPLACED
            pos, number = start - 1, before
        trace = index - 1
    while True:
        nxt = content.find(sep, pos + 1)
        if nxt == -1:
            if pos >= content.total:
                break
            nxt = content.total
        number += 1
        record = content.take(pos + 1, nxt).strip()
        pos = nxt
        if not record:
            continue
        if not record.startswith(_EVENT_STARTS):
            try:
                obj = orjson.loads(record)
            except orjson.JSONDecodeError:
                continue
            if is_header(obj):
                trace += 1
                if trace > index:
                    break
                if trace == index:
                    inner = obj.get("trace")
                    if not isinstance(inner, dict):
                        many = obj.get("traces")
                        inner = many[0] if isinstance(many, list) and many else {}
                    builder = TraceBuilder(
                        index, obj, inner if isinstance(inner, dict) else {}, kind,
                        want_metrics=False, full=False,
                    )  # fmt: skip
                continue
        if builder is None:
            continue
        try:
            obj = orjson.loads(record)
            name, raw_time, data = object_event(obj, None)
            t = builder.event_time(raw_time, None)
        except (orjson.JSONDecodeError, RecordProblem):  # the reading reported it already
            continue
        if first is None:
            first = t
        out.add(number, name, t - first, data, record.decode("utf-8", "replace"))
    return out if builder is not None else None


def _contained(file: str, content: bytes, index: int) -> TraceRecords | None:
    """The events of trace ``index`` of a contained JSON document, numbered from 1."""
    try:
        doc = orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
    traces = doc.get("traces") if isinstance(doc, dict) else None
    if not isinstance(traces, list) or not 0 <= index < len(traces):
        return None
    trace = traces[index]
    events = trace.get("events") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        return None
    builder = TraceBuilder(index, doc, trace, JSON, want_metrics=False, full=False)
    out = TraceRecords(file=file, trace=index, unit="event")
    first: float | None = None
    for number, event in enumerate(events, start=1):
        try:
            name, raw_time, data = object_event(event, None)
            t = builder.event_time(raw_time, None)
        except RecordProblem:  # an event the reading reported already (or an array event)
            continue
        first = t if first is None else first
        out.add(number, name, t - first, data, orjson.dumps(event).decode())
    return out


__all__ = ["MAX_RECORD_CHARS", "TraceRecords", "trace_records"]
