"""Sans-I/O scanner for record-per-line qlog: JSON-SEQ (RFC 7464) and NDJSON.

Feed it bytes in any chunking with :meth:`SeqScanner.feed`, then call :meth:`SeqScanner.close`;
it never opens a file. Results do not depend on how the input was chunked.

Speed comes from *not* decoding records that cannot matter. Within each block the scanner uses
``bytes.find`` (C speed) to locate:

- header candidates: records containing ``_format`` (every JSON-SEQ/NDJSON header names its
  ``qlog_format`` or ``serialization_format``) that do not begin like an event (``{"time":``,
  ``{"name":`` or ``{"data":``); a candidate that decodes to an object with a ``trace`` member
  and no ``name`` is a header and starts a new trace (the stream's first record is always taken
  as its header). In large regions the record starts are located with one vectorised pass
  over the separator byte instead of searching the needle;
- records containing a congestion-relevant event name (:data:`quicsm.qlog.events.STATE_NEEDLES`,
  and :data:`~quicsm.qlog.events.DERIVE_NEEDLES` when metrics are wanted or the trace has no
  explicit state events yet);
- records that may hold a packet event (:data:`PACKET_NEEDLES`), when a reader of packets
  hooked them (:attr:`~quicsm.qlog.trace.TraceBuilder.packet_hook`);
- the first and the last record of each trace (their times give the trace's span).

Only those records are decoded and validated; every other record is checked for framing only
(it lies between two separators). ``full=True`` decodes and validates every record instead
(used by ``quicsm inspect`` and for ``delta`` time formats, where every time is needed).

RFC 7464 section 2.3: consecutive separators denote no record, and a final record without its
trailing LF may be truncated: a last record that does not decode is reported as truncation, and
every complete record before it is kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING, Any

import orjson

from quicsm.core import native
from quicsm.core.diagnostics import (
    MAX_KEPT_PROBLEMS,
    RecordProblem,
    RecordTooLarge,
    describe,
)
from quicsm.core.errors import released
from quicsm.qlog import budget
from quicsm.qlog.events import DERIVE_NEEDLES, STATE_NEEDLES, TIMER_NEEDLE, TIMER_REQUIRED
from quicsm.qlog.trace import (
    MetricSink,
    NativePackets,
    NativeScan,
    TraceBuilder,
    TraceData,
    is_header,
    object_event,
)

if TYPE_CHECKING:
    import numpy as np

#: records that may hold an event a reader of packets hooks (:data:`quicsm.qlog.trace.
#: PACKET_EVENTS`, ``packet_lost`` and the transport parameters' ``parameters_set``; qlog 0.1
#: converters wrote ``PACKET_TX``/``PACKET_RX``): decoded when they are hooked
#: (:attr:`quicsm.qlog.trace.TraceBuilder.packet_hook` and the others)
PACKET_NEEDLES: tuple[bytes, ...] = (
    b"packet_sent",
    b"packet_received",
    b"packet_lost",
    b"packet_tx",
    b"packet_rx",
    b"PACKET_",
    b"parameters_set",
)

#: what the scanner is fed: the I/O side reuses one bytearray for every block
Buffer = bytes | bytearray

RS = b"\x1e"
LF = b"\n"
#: every JSON-SEQ/NDJSON header names its format: ``qlog_format`` (draft-02 to 0.4) or
#: ``serialization_format`` (main schema); ``_format`` finds both in one pass
_HEADER_NEEDLE = b"_format"


#: how event records begin in every producer seen (quic-go, quiche, neqo: ``time`` first;
#: aioquic and our packs of it: ``data`` first); a record that begins so is an event, never a
#: header, and is not looked into for the header needle
_EVENT_PREFIXES: tuple[bytes, ...] = (b'{"time":', b'{"name":', b'{"data":')


@cache
def _event_prefix_words() -> np.ndarray:
    """:data:`_EVENT_PREFIXES` as little-endian words (numpy is imported only where used: a
    read by the native core needs none of it)."""
    import numpy as np

    return np.frombuffer(b"".join(_EVENT_PREFIXES), dtype="<u8")


#: regions at least this large locate record starts with numpy (one vectorised pass over the
#: separator byte, ~3 GB/s) instead of searching the 7-byte header needle (~1.2 GB/s)
_VECTOR_MIN_BYTES = 1 << 20


def _header_candidates(buf: Buffer, a: int, b: int, sep: bytes) -> Iterator[tuple[int, int]]:
    """``(rs, re)`` of each record between the separators at ``buf[a]`` and ``buf[b]`` that
    contains :data:`_HEADER_NEEDLE` and does not begin like an event; ``buf[rs]`` and
    ``buf[re]`` are its separators. The three strategies (native, ``bytes.find``, numpy) give
    the same records, whatever the block boundaries."""
    ext = native.module()
    if ext is not None:
        yield from ext.header_candidates(buf, a, b, sep[0], _HEADER_NEEDLE, list(_EVENT_PREFIXES))
        return
    if b - a < _VECTOR_MIN_BYTES:
        hit = buf.find(_HEADER_NEEDLE, a, b)
        while hit != -1:
            rs = buf.rfind(sep, a, hit)
            re_ = buf.find(sep, hit, b + 1)
            if not buf.startswith(_EVENT_PREFIXES, rs + 1):
                yield rs, re_
            hit = buf.find(_HEADER_NEEDLE, re_, b)
        return
    import numpy as np

    view = np.frombuffer(buf, dtype=np.uint8)
    seps = np.flatnonzero(view[a:b] == sep[0]) + a  # separators at a <= i < b
    starts = seps + 1
    # the first 8 bytes of every record, as one little-endian word (padded past the buffer end)
    idx = np.minimum(starts[:, None] + np.arange(8), len(view) - 1)
    words = np.ascontiguousarray(view[idx]).view("<u8").ravel()
    del view, idx  # release the export of ``buf`` (the I/O side reuses and resizes it)
    maybe = np.flatnonzero(~np.isin(words, _event_prefix_words()))
    ends = np.append(seps[1:], b)
    for i in maybe.tolist():
        rs, re_ = int(seps[i]), int(ends[i])
        if buf.find(_HEADER_NEEDLE, rs + 1, re_) != -1:
            yield rs, re_


#: what ``bytes.strip`` removes: a record holding only these is empty
_BLANK = b" \t\n\r\x0b\x0c"
#: the first window searched for a non-blank byte (doubling after each blank window)
_BLANK_WINDOW = 4 << 10


def _next_record(buf: Buffer, pos: int, b: int, sep: bytes) -> int:
    """The separator opening the first non-empty record after ``buf[pos]`` (a separator),
    up to the separator at ``buf[b]``; ``b`` if there is none. Runs of empty records are
    skipped at C speed (``bytes.lstrip`` over doubling windows), not one at a time."""
    blank = _BLANK + sep
    lo, window = pos + 1, _BLANK_WINDOW
    while lo < b:
        hi = min(b, lo + window)
        rest = len(bytes(buf[lo:hi]).lstrip(blank))
        if rest:
            return buf.rfind(sep, pos, hi - rest)
        lo, window = hi, window * 2
    return b


def _last_record(buf: Buffer, a: int, b: int, sep: bytes) -> int:
    """The separator opening the last non-empty record between the separators at ``buf[a]``
    and ``buf[b]``; ``-1`` if every record there is empty (skipped as :func:`_next_record`)."""
    blank = _BLANK + sep
    hi, window = b, _BLANK_WINDOW
    while hi > a + 1:
        lo = max(a + 1, hi - window)
        rest = len(bytes(buf[lo:hi]).rstrip(blank))
        if rest:
            return buf.rfind(sep, a, lo + rest)
        hi, window = lo, window * 2
    return -1


class SeqScanner:
    """Splits a JSON-SEQ (``sep=RS``) or NDJSON (``sep=LF``) stream into traces."""

    def __init__(
        self,
        *,
        sep: bytes = RS,
        want_metrics: bool = False,
        full: bool = False,
        count: bool = False,
        lenient: bool = False,
        max_record_bytes: int = 64 << 20,
        metric_sink: MetricSink | None = None,
        first_index: int = 0,
        offset: int = 0,
    ) -> None:
        """``first_index`` numbers the first trace found (later ones count on from it), and
        ``offset`` is where the first byte fed lies in the whole stream: a reader that feeds
        only some traces' bytes (their :attr:`starts`, found by an earlier read) gets the trace
        numbers and record locations of a read of the whole stream."""
        if sep not in (RS, LF):
            raise ValueError("sep must be RS or LF")
        self.sep = sep
        self.serialization = "JSON-SEQ" if sep == RS else "NDJSON"
        self.want_metrics = want_metrics
        self.metric_sink = metric_sink
        self.full = full
        self.count = count or full
        self.lenient = lenient
        self.traces: list[TraceData] = []
        self.problems: list[RecordProblem] = []
        #: how many records a lenient read skipped (only the first few are in ``problems``)
        self.skipped = 0
        #: stream offset of a final record that did not decode (the file was cut there)
        self.truncated_at: int | None = None
        # the record in progress, as pieces (joined once its end is seen: no quadratic copying)
        self._carry: list[bytes] = []
        self._carry_size = 0
        self._carry_offset = offset
        self.max_record_bytes = max_record_bytes
        self._fed = offset
        self.first_index = first_index
        #: where each trace's bytes begin in the stream: its header record's separator
        #: (JSON-SEQ) or first byte (NDJSON); the next trace's start (or :attr:`fed`) ends them
        self.starts: list[int] = []
        self._seen_sep = sep == LF  # NDJSON has no preamble: its first line is a record
        self._trace: TraceBuilder | None = None
        self._last: tuple[Buffer, int] | None = None  # last event record of the current trace
        self._closed = False
        self._reported: set[int] = set()  # offsets of records already reported
        #: records to derive states from, kept undecoded until the trace shows it logs no state
        self._pending: list[tuple[Buffer, int]] = []

    # -- public ---------------------------------------------------------------------------------
    @property
    def fed(self) -> int:
        """The stream offset just after the last byte fed."""
        return self._fed

    def feed(self, data: Buffer) -> None:
        if self._closed:
            raise ValueError("feed() after close()")
        if not data:
            return
        base = self._fed
        self._fed += len(data)
        sep = self.sep
        first = data.find(sep)
        if first == -1:
            self._carry.append(bytes(data))
            self._carry_size += len(data)
            if self._carry_size > self.max_record_bytes:
                raise RecordTooLarge(self._carry_offset, self._carry_size)
            return
        # the record that straddled the previous block boundary (or the JSON-SEQ preamble)
        if self._carry_size + first > self.max_record_bytes:
            raise RecordTooLarge(self._carry_offset, self._carry_size + first)
        head = b"".join(self._carry) + data[:first]
        if self._seen_sep:
            self._records_of(sep + head + sep, self._carry_offset - 1)
        else:
            self._preamble(head, self._carry_offset)
            self._seen_sep = True
        last = data.rfind(sep)
        if last - first > self.max_record_bytes:
            self._check_lengths(data, first, last, base)
        if last > first:
            self._region(data, first, last, base)
        self._carry = [bytes(data[last + 1 :])]
        self._carry_size = len(data) - last - 1
        self._carry_offset = base + last + 1
        if self._carry_size > self.max_record_bytes:
            raise RecordTooLarge(self._carry_offset, self._carry_size)

    def close(self) -> list[TraceData]:
        """Finish: the final record may be truncated. Returns every trace read."""
        if self._closed:
            return self.traces
        self._closed = True
        tail = b"".join(self._carry)
        self._carry = []
        self._carry_size = 0
        if not self._seen_sep:
            self._preamble(tail, self._carry_offset)
        elif tail.strip():
            try:
                if budget.over_budget(tail) is None:  # else reported when it is decoded
                    orjson.loads(tail)
            except orjson.JSONDecodeError:
                if self.sep == LF or not tail.endswith(b"\n"):
                    self.truncated_at = self._carry_offset
                    tail = b""
            if tail:
                self._records_of(self.sep + tail + self.sep, self._carry_offset - 1)
        self._finish_trace()
        return self.traces

    # -- internals ------------------------------------------------------------------------------
    def _check_lengths(self, data: Buffer, first: int, last: int, base: int) -> None:
        """Every record between the separators at ``data[first]`` and ``data[last]`` within
        ``max_record_bytes`` (looked at only when the block could hold a longer one)."""
        import numpy as np

        view = np.frombuffer(data, dtype=np.uint8, count=last + 1 - first, offset=first)
        seps = np.flatnonzero(view == self.sep[0])
        del view  # release the export of ``data`` (the I/O side reuses and resizes it)
        sizes = np.diff(seps) - 1
        longest = int(np.argmax(sizes)) if len(sizes) else 0
        if len(sizes) and sizes[longest] > self.max_record_bytes:
            raise RecordTooLarge(base + first + int(seps[longest]) + 1, int(sizes[longest]))

    def _preamble(self, head: Buffer, offset: int) -> None:
        stripped = head.lstrip()
        if stripped:
            where = offset + len(head) - len(stripped)
            self._problem(
                RecordProblem(
                    where,
                    "a record separator (0x1E) before each JSON-SEQ record",
                    _got_bytes(stripped),
                )
            )

    @property
    def skipped_keys(self) -> set[int]:
        """The offsets of the records a lenient read skipped (the rest of ``skipped`` had
        none: :data:`quicsm.core.diagnostics.RecordKey`)."""
        return self._reported

    def _problem(self, problem: RecordProblem) -> None:
        if problem.offset is not None:
            if problem.offset in self._reported:
                return
            self._reported.add(problem.offset)
        if not self.lenient:
            raise problem
        self.skipped += 1
        if len(self.problems) < MAX_KEPT_PROBLEMS:
            released(problem)  # kept: without the decoder's error (it holds the record's text)
            self.problems.append(problem)

    def _decode(self, buf: Buffer, start: int, end: int, base: int) -> Any:
        """Decode record content ``buf[start:end]``; ``RecordProblem`` if it is not JSON."""
        if end - start > budget.MAX_RECORD_VALUES:  # else it cannot be over: no copy made
            values = budget.over_budget(buf[start:end])
            if values is not None:
                raise RecordProblem(base + start, budget.expected(), f"{values:,}")
        try:
            return orjson.loads(buf[start:end])
        except orjson.JSONDecodeError:
            raise RecordProblem(base + start, "a JSON text", _got_bytes(buf[start:end])) from None

    def _records_of(self, buf: Buffer, base: int) -> None:
        """``buf`` = sep + content + sep (one record, built around a block boundary)."""
        self._region(buf, 0, len(buf) - 1, base)

    def _region(self, buf: Buffer, a: int, b: int, base: int) -> None:
        """Records between the separators at ``buf[a]`` and ``buf[b]``: split at headers."""
        sep = self.sep
        pos = a
        if self._trace is None:
            first = self._start_first_trace(buf, a, b, base)
            if first is None:
                return
            pos = first
        if self.full:
            self._full_region(buf, pos, b, base)
            return
        for rs, re_ in _header_candidates(buf, pos, b, sep):
            try:
                obj = self._decode(buf, rs + 1, re_, base)
            except RecordProblem as problem:
                obj = None
                self._problem(problem)
            if is_header(obj):
                self._segment(buf, pos, rs, base)
                self._new_trace(obj, base + rs + 1)
                pos = re_
        self._segment(buf, pos, b, base)

    def _start_first_trace(self, buf: Buffer, a: int, b: int, base: int) -> int | None:
        """The stream's first record must be a header; returns where its events begin."""
        sep = self.sep
        pos = _next_record(buf, a, b, sep)
        while pos < b:
            nxt = buf.find(sep, pos + 1, b + 1)
            if buf[pos + 1 : nxt].strip():
                try:
                    obj = self._decode(buf, pos + 1, nxt, base)
                except RecordProblem as problem:
                    self._problem(problem)
                    pos = _next_record(buf, nxt, b, sep)
                    continue
                if is_header(obj):
                    self._new_trace(obj, base + pos + 1)
                    return nxt
                self._problem(
                    RecordProblem(
                        base + pos + 1, 'a qlog header record (with "trace") first', describe(obj)
                    )
                )
                self._new_trace({}, base + pos + 1)
                return pos
            pos = _next_record(buf, nxt, b, sep)
        return None

    def _new_trace(self, header: dict[str, Any], offset: int) -> None:
        self._finish_trace()
        trace = header.get("trace")
        if not isinstance(trace, dict):
            traces = header.get("traces")
            trace = (
                traces[0]
                if isinstance(traces, list) and traces and isinstance(traces[0], dict)
                else {}
            )
        self.starts.append(offset - (self.sep == RS))
        self._trace = TraceBuilder(
            self.first_index + len(self.traces),
            header,
            trace,
            self.serialization,
            want_metrics=self.want_metrics,
            full=self.full,
            metric_sink=self.metric_sink,
        )
        self._last = None

    def _finish_trace(self) -> None:
        trace = self._trace
        if trace is None:
            return
        if not trace.states:
            for record, offset in self._pending:
                self._decode_event(trace, record, offset)
        self._pending.clear()
        if self._last is not None and not (self.full or trace.delta):
            record, offset = self._last
            try:
                values = budget.over_budget(record)
                if values is not None:
                    raise RecordProblem(offset, budget.expected(), f"{values:,}")
                obj = orjson.loads(record)
                _, raw_time, _ = object_event(obj, offset)
                trace.end_at(trace.event_time(raw_time, offset), offset)
            except orjson.JSONDecodeError:
                self._problem(RecordProblem(offset, "a JSON text", _got_bytes(record)))
            except RecordProblem as problem:
                self._problem(problem)
        self.traces.append(trace.finish())
        self._trace = None
        self._last = None

    def _event(self, trace: TraceBuilder, obj: Any, offset: int) -> None:
        name, raw_time, data = object_event(obj, offset)
        t = trace.event_time(raw_time, offset)
        trace.observe(t, offset)
        trace.add(name, t, data, offset)

    def _full_region(self, buf: Buffer, pos: int, b: int, base: int) -> None:
        """Decode every record (inspect, and traces with delta times); a full read's records
        are read by the native core while it can (:meth:`_native_census`)."""
        sep = self.sep
        ext = native.module() if self.full else None
        while True:
            if ext is not None and self._trace is not None:
                pos = self._native_census(ext, self._trace, buf, pos, b)
            pos = _next_record(buf, pos, b, sep)
            if pos >= b:
                return
            nxt = buf.find(sep, pos + 1, b + 1)
            start, end = pos + 1, nxt
            pos = nxt
            if not buf[start:end].strip():
                continue
            try:
                obj = self._decode(buf, start, end, base)
                if is_header(obj):
                    self._new_trace(obj, base + start)
                    continue
                trace = self._trace
                assert trace is not None
                trace.n_events += 1
                self._event(trace, obj, base + start)
            except RecordProblem as problem:
                self._problem(problem)

    def _native_census(self, ext: Any, trace: TraceBuilder, buf: Buffer, pos: int, b: int) -> int:
        """The records after the separator at ``buf[pos]`` read natively
        (``native/src/census.rs``) while the native core reads them exactly as
        :meth:`_full_region` would; returns the separator before the first it did not read
        (``b``: none), which :meth:`_full_region` reads."""
        while pos < b:
            plan = trace.native_census()
            if plan is None:
                return pos
            stop, again, events, clock, counts, states, seen = ext.census_records(
                buf,
                pos,
                b,
                self.sep[0],
                trace.scale,
                trace.delta,
                trace._previous,
                trace.first_time,
                trace.last_time,
                trace.latest,
                trace.last_derive_time,
                *plan,
            )
            if events:
                trace.read_natively(clock, events, counts, states)
                if plan[0]:
                    trace.census_read(*seen)
            pos = stop
            if not again:
                break
        return pos

    def _decode_hits(
        self,
        trace: TraceBuilder,
        buf: Buffer,
        s: int,
        e: int,
        base: int,
        needles: tuple[bytes, ...],
        done: set[int],
        *,
        defer: bool = False,
    ) -> int:
        """Decodes the records between the separators at ``buf[s]`` and ``buf[e]`` that hold
        one of ``needles`` (once each: ``done``); returns how many hold one."""
        sep = self.sep
        starts: dict[int, int] = {}
        timer_only: dict[int, bool] = {}  # records found only by the timer needle
        ext = native.module() if TIMER_NEEDLE not in needles else None
        if ext is not None:
            # no timer needle: the native search finds the same records (memchr's SIMD search),
            # one needle at a time
            for needle in needles:
                for rs, re_ in ext.records_with(buf, s, e, sep[0], needle):
                    starts[rs] = re_
                    timer_only[rs] = False
            needles = ()
        for needle in needles:
            hit = buf.find(needle, s, e)
            while hit != -1:
                rs = buf.rfind(sep, s, hit)
                if rs not in starts:
                    starts[rs] = buf.find(sep, hit, e + 1)
                    timer_only[rs] = needle == TIMER_NEEDLE
                else:
                    timer_only[rs] = timer_only[rs] and needle == TIMER_NEEDLE
                hit = buf.find(needle, starts[rs], e)
        for rs in sorted(starts):
            if rs in done:
                continue
            done.add(rs)
            offset = base + rs + 1
            end = starts[rs]
            if timer_only[rs] and buf.find(TIMER_REQUIRED, rs, end) == -1:
                continue  # a timer set or cancelled: nothing to derive from
            if defer:
                self._pending.append((buf[rs + 1 : starts[rs]], offset))
                continue
            self._decode_event(trace, buf[rs + 1 : starts[rs]], offset)
        return len(starts)

    def _native_pass(
        self,
        trace: TraceBuilder,
        scan: NativeScan,
        buf: Buffer,
        s: int,
        e: int,
        base: int,
        no_states: bool = False,
    ) -> None:
        """The derive pass of :meth:`_decode_hits` done by the trace's native deriver: it
        visits the same records in the same order, and hands back each record it cannot
        decode exactly as :meth:`_decode_event` would; that record is decoded here.
        ``no_states``: the state pass found no record with a state needle between ``s`` and
        ``e`` (the native pass does not search for one again)."""
        sep = self.sep[0]
        pos = s
        while True:
            rs, re_, latest, latest_other, checked, _ = scan(
                buf,
                pos,
                e,
                sep,
                trace.scale,
                trace.latest,
                trace.latest_of_others(),
                trace.sink_wants(),
                no_states,
            )
            if checked:
                trace.set_latest(latest, latest_other)
            if rs < 0:
                return
            self._decode_event(trace, buf[rs + 1 : re_], base + rs + 1)
            pos = re_

    def _native_packets(
        self,
        trace: TraceBuilder,
        columns: NativePackets,
        ext: Any,
        buf: Buffer,
        s: int,
        e: int,
        base: int,
        done: set[int],
    ) -> None:
        """The packet pass of :meth:`_decode_hits` done by the native core
        (``native/src/packets.rs``): it visits the same records in the same order, reads the
        packet events into ``columns`` (and the ``packet_lost`` events, when the columns are
        the trace's loss hook, their times checked as :meth:`TraceBuilder.add` checks them)
        and hands back each record it cannot read exactly as the Python reader would
        (``parameters_set``, any unusual shape or a bad record); that record is decoded
        here, its hook fed between the chunks read natively."""
        import numpy as np  # (a reader of packets has imported it: the columns are numpy's)

        pairs = ext.packet_candidates(buf, s, e, self.sep[0], list(PACKET_NEEDLES))
        at = np.frombuffer(pairs, dtype=np.int64).reshape(-1, 2)
        if done:  # records the state pass decoded are not read again
            at = at[~np.isin(at[:, 0], np.fromiter(done, dtype=np.int64))]
            pairs = at.tobytes()
        keep = not trace.discards()  # a derive pass follows: it skips what was read here
        # the loss events too, when they go to these columns (their times checked as add does)
        losses = trace.loss_hook is not None and trace.loss_hook == columns.loss
        n, start = len(at), 0
        while start < n:
            stop, scid, sizes, chunk, lost, clock = ext.packet_records(
                buf,
                pairs,
                start,
                trace.scale,
                columns.first_scid,
                columns.rows(),
                losses,
                trace.loss_clock(),
            )
            columns.absorb(scid, sizes, chunk)
            if clock[3]:  # loss events were read
                columns.absorb_losses(*lost)
                trace.set_loss_clock(*clock[:3])
            if keep:
                done.update(at[start:stop, 0].tolist())
            if stop >= n:
                return
            rs, re_ = int(at[stop, 0]), int(at[stop, 1])
            done.add(rs)
            self._decode_event(trace, buf[rs + 1 : re_], base + rs + 1)
            start = stop + 1

    def _decode_event(self, trace: TraceBuilder, record: Buffer, offset: int) -> None:
        values = budget.over_budget(record)
        if values is not None:
            self._problem(RecordProblem(offset, budget.expected(), f"{values:,}"))
            return
        try:
            obj = orjson.loads(record)
        except orjson.JSONDecodeError:
            self._problem(RecordProblem(offset, "a JSON text", _got_bytes(record)))
            return
        try:
            if type(obj) is dict and type(obj.get("name")) is str and "time" in obj:
                # the common case without the checks of object_event
                t = trace.event_time(obj["time"], offset)
                trace.add(obj["name"], t, obj.get("data", {}), offset)
                return
            name, raw_time, data = object_event(obj, offset)
            trace.add(name, trace.event_time(raw_time, offset), data, offset)
        except RecordProblem as problem:
            self._problem(problem)

    def _segment(self, buf: Buffer, s: int, e: int, base: int) -> None:
        """Event records of the current trace between separators at ``s`` and ``e``."""
        trace = self._trace
        if trace is None or s >= e:
            return
        if trace.delta:
            self._full_region(buf, s, e, base)
            return
        sep = self.sep
        if self.count:
            trace.n_events += _count_records(buf, s, e, sep)
        # the trace's first event gives its start time
        if trace.first_time is None:
            pos = _next_record(buf, s, e, sep)
            while pos < e and trace.first_time is None:
                nxt = buf.find(sep, pos + 1, e + 1)
                if buf[pos + 1 : nxt].strip():
                    try:
                        obj = self._decode(buf, pos + 1, nxt, base)
                        _, raw_time, _ = object_event(obj, base + pos + 1)
                        trace.observe(trace.event_time(raw_time, base + pos + 1), base + pos + 1)
                    except RecordProblem as problem:
                        self._problem(problem)
                pos = _next_record(buf, nxt, e, sep)
        # the records worth decoding, in file order: state events first; the events states are
        # derived from only while the trace has shown no explicit state (or metrics are wanted)
        done: set[int] = set()
        states = self._decode_hits(trace, buf, s, e, base, STATE_NEEDLES, done)
        hooks = (trace.packet_hook, trace.loss_hook, trace.parameters_hook)
        hooked = any(h is not None for h in hooks)
        if hooked:
            # packets wanted (a reader of packets hooked them): the records that may name a
            # packet event are decoded too (each once: the derive pass below skips them)
            columns = trace.native_packets() if trace.counts is None else None
            ext = native.module() if columns is not None else None
            if columns is not None and ext is not None:
                self._native_packets(trace, columns, ext, buf, s, e, base, done)
            else:
                self._decode_hits(trace, buf, s, e, base, PACKET_NEEDLES, done)
        if trace.metrics_wanted() or (
            not self.want_metrics and not trace.states and not trace.discards()
        ):
            # without explicit states so far, the events states are derived from are kept
            # undecoded until the trace ends: decoded only if the trace never logs a state
            scan = trace.native_scan() if self.want_metrics and not hooked else None
            if scan is not None:
                self._native_pass(trace, scan, buf, s, e, base, no_states=not states)
            else:
                self._decode_hits(
                    trace, buf, s, e, base, DERIVE_NEEDLES, done, defer=not self.want_metrics
                )
        # remember the last record: its time ends the trace
        rs = _last_record(buf, s, e, sep)
        if rs >= 0:
            end = buf.find(sep, rs + 1, e + 1)
            self._last = (buf[rs + 1 : end], base + rs + 1)


def _count_records(buf: Buffer, s: int, e: int, sep: bytes) -> int:
    """How many records lie between the separators at ``buf[s]`` and ``buf[e]``: the
    separators in ``buf[s:e]`` less the non-overlapping pairs of them in ``buf[s:e + 1]`` (the
    native core counts them so in one pass over the bytes, ``native/src/scan.rs``)."""
    ext = native.module()
    if ext is not None:
        return int(ext.count_records(buf, s, e, sep[0]))
    return buf.count(sep, s, e) - buf.count(sep + sep, s, e + 1)


def _got_bytes(data: Buffer) -> str:
    text = data.strip()[:40].decode("utf-8", "replace")
    return f"{text!r}" if text else "nothing"
