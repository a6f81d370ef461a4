"""Contained qlog: one JSON document with a ``traces`` array (draft-00 to 0.3 and main schema).

Two event encodings exist inside ``traces[i].events``:

- draft-00/01 (main-schema-00/01 section "event_fields"): each event is an *array* whose
  positions are named by the trace's ``event_fields``, e.g.
  ``["relative_time", "category", "event", "data"]``; the time column is ``relative_time``,
  ``delta_time`` or ``time``; ``configuration.time_units`` is ``ms`` or ``us``; some producers
  upper-case categories (``RECOVERY``, ``METRIC_UPDATE``) or write times as strings;
- draft-02 and later: each event is an object ``{time, name, data}``.

The parser is sans-I/O and streaming: it is fed the document in blocks of any size
(:meth:`ContainedParser.feed`) and keeps only the value being read (one event, or one member of
the file or trace object), so its memory is bounded by the largest event, not the document.
Each block is scanned once with numpy for the structural characters outside strings and their
nesting depth; only those at the depth of the file, ``traces``, trace and ``events`` containers
are looked at in Python, and each event is decoded on its own with orjson.

A document cut mid-write (quiche and picoquic write the closing brackets only at the end) keeps
every complete event and every complete member; the truncation is reported. Converter exports
that end ``events`` with an empty ``[]`` are accepted (the empty event is ignored).

When a trace names members that change how its times are read (``event_fields``,
``configuration.time_units``, ``common_fields.time_format``) only *after* its events,
:attr:`ContainedParser.reread` lists those traces with their complete headers: feeding the
document again to a parser given them as ``headers`` reads the events right.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from quicsm.core import native
from quicsm.core.diagnostics import (
    MAX_KEPT_PROBLEMS,
    RecordKey,
    RecordProblem,
    RecordTooLarge,
    describe,
    record_key,
)
from quicsm.core.errors import released
from quicsm.qlog import budget
from quicsm.qlog.trace import MetricSink, TraceBuilder, TraceData, object_event

_STRUCTURAL = np.zeros(256, dtype=bool)
_STRUCTURAL[list(b"{}[],:")] = True
_DEPTH_DELTA = np.zeros(256, dtype=np.int64)
_DEPTH_DELTA[list(b"{[")] = 1
_DEPTH_DELTA[list(b"}]")] = -1
_QUOTE, _BACKSLASH = 34, 92
_LBRACE, _LBRACKET, _COMMA = ord("{"), ord("["), ord(",")
#: end whole events of an ``events`` array at once (:meth:`ContainedParser._chars`); the tests
#: turn it off to check that both ways read the same
FAST_EVENTS = True
_OPEN = {ord("{"): ord("}"), ord("["): ord("]")}
#: structural characters deeper than this are inside an event (or a member value) as a whole
_VISIBLE_DEPTH = 4
#: bytes scanned for structure at once (bounds the scanner's index arrays to a few MB each)
_SCAN_SLICE = 1 << 20
#: with the native core: the first window scanned in Python after the native reader stopped
#: at an element (doubling up to :data:`_SCAN_SLICE` while the element goes on)
_NATIVE_WINDOW = 4 << 10
#: elements left to the Python parser after a native call that read none (doubling with each
#: such call, up to this many): an array of elements the native reader hands back costs no
#: more than reading it in Python
_MAX_BACKOFF = 256

_TOP, _TRACES, _TRACE, _EVENTS, _SKIP = range(5)
#: qlog 0.1's name of the traces array (pcap2qlog: one element per connection)
_CONNECTIONS = "connections"

#: (file header members, trace members) of a trace, by its position in ``traces``
Headers = dict[int, tuple[dict[str, Any], dict[str, Any]]]


@dataclass
class _Ctx:
    kind: int
    closer: int
    #: stream offset of the last structural character of this container that was handled:
    #: the pending key or value starts right after it
    mark: int
    members: dict[str, Any] = field(default_factory=dict)
    expecting_key: bool = True
    key: str | None = None
    descended: bool = False
    count: int = 0
    index: int = 0  # traces: the position in traces[]; trace: its own position
    builder: TraceBuilder | None = None
    columns: list[str] | None = None
    #: problems of events read before the trace's header was known to be complete
    pending: list[RecordProblem] = field(default_factory=list)
    pending_more: int = 0  # beyond the ones kept in ``pending``
    #: lenient: the places (``traces[i].events[j]``) of those beyond, so that each is known by
    #: its :data:`~quicsm.core.diagnostics.RecordKey` as every other skipped record is (another
    #: read of the file that skips it does not count it again)
    pending_keys: list[RecordKey] = field(default_factory=list)
    #: array events met before event_fields: the trace must be read again
    deferred: bool = False
    #: a skipped container: the nesting depth inside it (its closer goes below it)
    depth: int = -1
    #: an events array whose elements the native core may read (``_native_events``)
    native: bool = False
    #: events: elements left to the Python parser before the native core is tried again
    backoff: int = 0
    skip: int = 0


def _skip_inside(depths: np.ndarray, i: int, inside: int) -> int:
    """The first index from ``i`` whose depth is below ``inside`` (``len(depths)`` if none),
    searched in doubling windows: the work is proportional to the characters passed over."""
    n, window = len(depths), 64
    while i < n:
        below = np.flatnonzero(depths[i : i + window] < inside)
        if len(below):
            return i + int(below[0])
        i, window = i + window, window * 2
    return n


class ContainedParser:
    """Parses a contained-JSON qlog document, fed in blocks, into traces."""

    def __init__(
        self,
        *,
        want_metrics: bool = False,
        lenient: bool = False,
        max_record_bytes: int = 64 << 20,
        headers: Headers | None = None,
        metric_sink: MetricSink | None = None,
    ) -> None:
        self.want_metrics = want_metrics
        self.metric_sink = metric_sink
        self.lenient = lenient
        self.max_record_bytes = max_record_bytes
        self.problems: list[RecordProblem] = []
        #: how many records a lenient read skipped (only the first few are in ``problems``)
        self.skipped = 0
        #: the :data:`~quicsm.core.diagnostics.RecordKey` of each record skipped that has one
        self.skipped_keys: set[int | str] = set()
        #: stream offset where a document cut mid-write was cut, and its 1-based line
        self.truncated_at: int | None = None
        self.truncated_line: int | None = None
        self.traces: list[TraceData] = []
        #: traces whose time conventions were named only after their events (see the module)
        self.reread: Headers = {}
        self._headers = headers or {}
        #: the bytes not let go yet: ``_buf[:_len]`` (with the native core a bytearray of a fixed
        #: capacity, filled and emptied in place: no fresh block-sized object, and so no fresh
        #: pages, per block)
        self._buf: bytes | bytearray = b""
        self._len = 0
        self._base = 0  # stream offset of _buf[0]
        self._lines = 0  # line feeds before the stream offset _lines_at
        self._lines_at = 0  # at most one past _buf[0] (the native core counts what it reads)
        self._scanned = 0  # stream offset up to which structural characters were handled
        self._depth = 0
        self._in_string = False
        self._backslashes = 0  # trailing backslashes of the bytes scanned so far, in a string
        self._stack: list[_Ctx] = []
        self._done = False
        self._started = False
        self._closed = False
        self._end_of_top = 0
        self._top_ctx = _Ctx(_TOP, ord("}"), 0)
        self._trace_members: list[dict[str, Any]] = []
        self._late: dict[int, dict[str, Any]] = {}
        #: the line of the file's "qlog_version" member (errors about the version name it)
        self._version_line: int | None = None
        #: ``quicsm._native`` when events arrays are read natively (``_native_events``)
        self._native = native.module()

    # -- public ---------------------------------------------------------------------------------
    def parse(self, data: bytes) -> list[TraceData]:
        """The whole document at once."""
        self.feed(data)
        return self.close()

    def feed(self, data: bytes) -> None:
        if self._closed:
            raise ValueError("feed() after close()")
        if not data:
            return
        start = self._base + self._len
        self._append(data)
        end = start + len(data)
        if self._native is None:
            # scanned a slice at a time: the index arrays of a slice made only of brackets (a
            # nesting bomb) are eight times its size, per array
            for offset in range(0, len(data), _SCAN_SLICE):
                piece = data[offset : offset + _SCAN_SLICE]
                positions, chars, depths = self._structure(piece)
                self._chars((positions + (start + offset)).tolist(), chars.tolist(), depths)
        else:
            self._feed_native(start, end)
        self._scanned = end
        self._trim()

    def _feed_native(self, pos: int, end: int) -> None:
        """The stream from ``pos`` to ``end`` (in ``_buf``), the elements of events arrays read
        by the native core: the Python scan stops after each ``[`` or ``,`` of such an array
        (:meth:`_chars`), the native core reads from there (:meth:`_native_events`) and the
        scan resumes where it stopped, in small windows first (it stops at an element)."""
        window = _NATIVE_WINDOW
        while pos < end:
            hi = min(end, pos + window)
            piece = bytes(self._buf[pos - self._base : hi - self._base])
            positions, chars, depths = self._structure(piece)
            stopped = self._chars((positions + pos).tolist(), chars.tolist(), depths)
            if stopped is None:
                pos, window = hi, min(window * 2, _SCAN_SLICE)
                continue
            # after the '[' or ',' at positions[stopped]: outside strings, at its depth
            self._depth, self._in_string, self._backslashes = int(depths[stopped]), False, 0
            pos = self._native_events(pos + int(positions[stopped]) + 1)
            window = _NATIVE_WINDOW

    def _native_events(self, pos: int) -> int:
        """Elements of the events array on top of the stack, from stream offset ``pos`` (just
        after its ``[`` or a comma), read by the native core while it can read them exactly as
        :meth:`_element` would (``native/src/contained.rs``); returns where the Python scan
        resumes: the first element it did not read."""
        ext = self._native
        assert ext is not None
        ctx = self._stack[-1]
        builder = self._stack[-2].builder
        assert builder is not None
        read = 0
        while True:
            plan = builder.native_plan()
            if plan is None:
                ctx.native = False  # this trace's events are the Python parser's
                return pos
            feed, deriver = plan
            if self._lines_at < pos:  # the line feeds the Python parser read before pos
                self._lines += self._buf.count(b"\n", self._lines_at - self._base, pos - self._base)
                self._lines_at = pos
            (
                nxt,
                events,
                lines,
                again,
                *clock,
                counts,
                states,
            ) = ext.contained_events(
                self._buf,
                pos - self._base,
                self._len,
                self.max_record_bytes,
                builder.scale,
                builder.delta,
                builder._previous,
                builder.first_time,
                builder.last_time,
                builder.latest,
                builder.last_derive_time,
                builder.repairs_backward,
                feed,
                deriver,
            )
            if events:
                builder.read_natively(tuple(clock), events, counts, states)
                ctx.count += events
                pos = self._base + nxt
                self._lines, self._lines_at = self._lines + lines, pos
                ctx.mark = pos - 1  # the comma after the last element read
                read += events
            if not again:  # else: after a state (the sink may want no more), or names to count
                break
        if read:
            ctx.backoff = 0
        else:  # nothing read: leave the next elements to the Python parser for a while
            ctx.backoff = min(max(1, 2 * ctx.backoff), _MAX_BACKOFF)
            ctx.skip = ctx.backoff
        return pos

    def close(self) -> list[TraceData]:
        if self._closed:
            return self.traces
        self._closed = True
        end = self._base + self._len
        if self._done:
            rest = self._slice(self._end_of_top, end)
            if rest.strip():
                raise self._fatal(self._end_of_top, "the end of the document", _got_bytes(rest))
        elif not self._started:
            raise RecordProblem(None, "a JSON document", "nothing", line=1)
        else:
            self._truncated(end)
        return self.traces

    # -- scanning -------------------------------------------------------------------------------
    def _structure(self, data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Positions (in ``data``), bytes and nesting depths (after each) of the structural
        characters outside strings that are at most :data:`_VISIBLE_DEPTH` deep; updates the
        carried scanner state."""
        v = np.frombuffer(data, dtype=np.uint8)
        quotes = np.flatnonzero(v == _QUOTE)
        if len(quotes) and (self._backslashes or np.any(v == _BACKSLASH)):
            quotes = self._unescaped(data, quotes)
        trailing = len(data) - len(data.rstrip(b"\\"))
        self._backslashes = trailing + (self._backslashes if trailing == len(data) else 0)
        candidates = np.flatnonzero(_STRUCTURAL[v])
        outside = (np.searchsorted(quotes, candidates) + self._in_string) % 2 == 0
        self._in_string = bool((len(quotes) + self._in_string) % 2)
        positions = candidates[outside]
        chars = v[positions]
        delta = _DEPTH_DELTA[chars]
        after = np.cumsum(delta) + self._depth
        if len(after):
            self._depth = int(after[-1])
        visible = np.minimum(after - delta, after) <= _VISIBLE_DEPTH
        return positions[visible], chars[visible], after[visible]

    def _unescaped(self, data: bytes, quotes: np.ndarray) -> np.ndarray:
        """The quotes not escaped by an odd run of backslashes (runs may cross blocks)."""
        v = np.frombuffer(data, dtype=np.uint8)
        after_backslash = np.zeros(len(quotes), dtype=bool)
        inner = quotes > 0
        after_backslash[inner] = v[quotes[inner] - 1] == _BACKSLASH
        if quotes[0] == 0 and self._backslashes:
            after_backslash[0] = True
        keep = np.ones(len(quotes), dtype=bool)
        for k in np.flatnonzero(after_backslash).tolist():
            i = int(quotes[k]) - 1
            run = 0
            while i >= 0 and data[i] == _BACKSLASH:
                run += 1
                i -= 1
            if i < 0:
                run += self._backslashes
            keep[k] = run % 2 == 0
        return quotes[keep]

    def _trim(self) -> None:
        """Drop the bytes no pending key or value needs."""
        keep = self._scanned if self._started else self._base
        for ctx in reversed(self._stack):
            if ctx.kind != _SKIP:
                keep = ctx.mark
                break
        if self._done:
            keep = self._end_of_top
            rest = self._slice(keep, self._base + self._len)
            if rest.strip():  # content after the document: fail now, not at close()
                raise self._fatal(keep, "the end of the document", _got_bytes(rest))
        cut = keep - self._base
        if cut > 0:
            if keep > self._lines_at:
                self._lines += self._buf.count(b"\n", self._lines_at - self._base, cut)
                self._lines_at = keep
            if isinstance(self._buf, bytearray):
                self._len -= cut
                with memoryview(self._buf) as view:
                    view[: self._len] = view[cut : cut + self._len]
            else:
                self._buf = self._buf[cut:]
                self._len = len(self._buf)
            self._base = keep
        if self._len > self.max_record_bytes:
            raise RecordTooLarge(self._base, self._len)

    def _append(self, data: bytes) -> None:
        """``data`` after the bytes kept."""
        if self._native is None:
            self._buf += data
            self._len = len(self._buf)
            return
        end = self._len + len(data)
        if end > len(self._buf):  # grown (in steps of at least a block): rarely
            grown = bytearray(max(end, 2 * len(data), 2 * len(self._buf)))
            grown[: self._len] = memoryview(self._buf)[: self._len]
            self._buf = grown
        with memoryview(self._buf) as view:  # copied in place (a bytearray slice would first
            view[self._len : end] = data  # copy ``data`` into a fresh bytearray)
        self._len = end

    def _slice(self, a: int, b: int) -> bytes:
        return bytes(self._buf[a - self._base : b - self._base])

    def _line(self, offset: int) -> int:
        at, base = self._lines_at, self._base
        if offset >= at:
            return self._lines + self._buf.count(b"\n", at - base, max(0, offset - base)) + 1
        return self._lines - self._buf.count(b"\n", max(0, offset - base), at - base) + 1

    def _fatal(self, offset: int, expected: str, got: str | None = None) -> RecordProblem:
        return RecordProblem(None, expected, got, line=self._line(offset))

    def _value(self, a: int, b: int) -> Any:
        """The JSON value between two structural characters (exclusive)."""
        if b - a - 1 > self.max_record_bytes:
            raise RecordTooLarge(a + 1, b - a - 1)
        text = self._slice(a + 1, b)
        values = budget.over_budget(text)
        if values is not None:
            raise self._fatal(a + 1, budget.expected(), f"{values:,}")
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise self._fatal(a + 1, "a JSON value", _got_bytes(text, str(exc))) from None

    def _problem(self, problem: RecordProblem) -> None:
        if not self.lenient:
            raise problem
        self.skipped += 1
        key = record_key(problem)
        if key is not None:
            self.skipped_keys.add(key)
        if len(self.problems) < MAX_KEPT_PROBLEMS:
            released(problem)  # kept: without the decoder's error (it holds the record's text)
            self.problems.append(problem)

    # -- the state machine ----------------------------------------------------------------------
    def _chars(self, positions: list[int], chars: list[int], depths: np.ndarray) -> int | None:
        """Every structural character, in order. Inside an ``events`` array an event that is
        one container followed by a comma (``{...},`` or ``[...],``: its opener, its matching
        closer and the comma are consecutive structural characters) is ended at once, as the
        three :meth:`_char` calls would end it (they push and pop a skipped container, then
        end the element): most of a document's characters are these. The characters inside a
        skipped container (a member or element decoded as a whole) are passed over in numpy
        (:func:`_skip_inside`), not one at a time: only its closer is looked at."""
        stack = self._stack
        n = len(chars)
        i = 0
        natively = self._native is not None
        while i < n:
            c = chars[i]
            if stack and stack[-1].kind == _SKIP and stack[-1].depth >= 0:
                inside = stack[-1].depth
                if depths[i] >= inside:
                    i = _skip_inside(depths, i, inside)
                    continue
            if (
                FAST_EVENTS
                and c in (_LBRACE, _LBRACKET)
                and i + 2 < n
                and chars[i + 1] == c + 2  # '}' / ']' follow '{' / '[' in ASCII, two apart
                and chars[i + 2] == _COMMA
                and stack
                and stack[-1].kind == _EVENTS
                and not stack[-1].descended
            ):
                ctx = stack[-1]
                comma = positions[i + 2]
                self._element(ctx, ctx.mark + 1, comma)
                ctx.mark = comma
                i += 3
                if natively and self._native_next(ctx, comma):
                    return i - 1
                continue
            self._char(positions[i], c)
            if stack:
                top = stack[-1]
                if top.kind == _SKIP and top.depth < 0:
                    top.depth = int(depths[i])
                elif natively and top.kind == _EVENTS and self._native_next(top, positions[i]):
                    return i
            i += 1
        return None

    @staticmethod
    def _native_next(ctx: _Ctx, pos: int) -> bool:
        """Whether the native core reads the elements of events array ``ctx`` after the
        structural character at ``pos`` (its ``[`` or a comma, just handled)."""
        if not ctx.native or ctx.mark != pos or ctx.descended:
            return False
        if ctx.skip:
            ctx.skip -= 1
            return False
        return True

    def _char(self, pos: int, c: int) -> None:
        stack = self._stack
        if not stack:
            if self._done or self._started:
                raise self._fatal(pos, "the end of the document", f"{chr(c)!r}")
            before = self._slice(self._base, pos)
            if c != ord("{") or before.strip():
                got = "an array" if c == ord("[") and not before.strip() else None
                if got is None:
                    got = _got_bytes(self._slice(self._base, pos + 1))
                raise RecordProblem(None, 'a qlog object with "traces"', got, line=1)
            self._started = True
            self._top_ctx = _Ctx(_TOP, ord("}"), pos)
            stack.append(self._top_ctx)
            return
        ctx = stack[-1]
        if ctx.kind == _SKIP:
            if c in _OPEN:
                stack.append(_Ctx(_SKIP, _OPEN[c], pos))
            elif c in (ord("}"), ord("]")):
                if c != ctx.closer:
                    raise self._fatal(pos, f"{chr(ctx.closer)!r}", f"{chr(c)!r}")
                stack.pop()
                self._child_closed(pos)
            return
        if ctx.kind in (_TOP, _TRACE):
            self._object_char(ctx, pos, c)
        else:
            self._array_char(ctx, pos, c)

    def _object_char(self, ctx: _Ctx, pos: int, c: int) -> None:
        if c == ord(":"):
            if not ctx.expecting_key:
                raise self._fatal(pos, "',' or '}'", "':'")
            key = self._value(ctx.mark, pos)
            if not isinstance(key, str):
                raise self._fatal(ctx.mark + 1, "a member name", describe(key))
            ctx.key, ctx.expecting_key, ctx.descended, ctx.mark = key, False, False, pos
            if ctx.kind == _TOP and key == "qlog_version":
                self._version_line = self._line(pos)
            return
        if c in (ord(","), ord("}")):
            if not ctx.expecting_key:
                self._member_done(ctx, pos)
            elif c == ord(",") or ctx.count or self._slice(ctx.mark + 1, pos).strip():
                raise self._fatal(pos, "a member name and ':'", f"{chr(c)!r}")
            if c == ord(","):
                ctx.expecting_key, ctx.mark = True, pos
                return
            self._stack.pop()
            self._object_closed(ctx, pos)
            self._child_closed(pos)
            return
        if c == ord("]"):
            raise self._fatal(pos, "'}'", "']'")
        # an opener
        if ctx.expecting_key:
            raise self._fatal(pos, "a member name", f"{chr(c)!r}")
        fresh = not self._slice(ctx.mark + 1, pos).strip()
        if (
            fresh
            and ctx.kind == _TOP
            and (ctx.key, c)
            in (("traces", ord("[")), (_CONNECTIONS, ord("[")), ("trace", ord("{")))
        ):
            ctx.descended = True
            if c == ord("["):
                self._stack.append(_Ctx(_TRACES, ord("]"), pos))
            else:
                self._open_trace(pos, 0)
        elif (
            fresh
            and ctx.key == "events"
            and c == ord("[")
            and (ctx.kind == _TRACE or (ctx.kind == _TOP and ctx.builder is None))
        ):
            # qlog 0.1 (2018, pcap2qlog): the file is its only trace, "fields" names the
            # positions of its array events
            ctx.descended = True
            self._open_events(ctx, pos)
        else:
            self._stack.append(_Ctx(_SKIP, _OPEN[c], pos))

    def _array_char(self, ctx: _Ctx, pos: int, c: int) -> None:
        if c in (ord(","), ord("]")):
            if ctx.descended:
                if self._slice(ctx.mark + 1, pos).strip():
                    raise self._fatal(pos, "',' or ']'", _got_bytes(self._slice(ctx.mark + 1, pos)))
            else:
                text = self._slice(ctx.mark + 1, pos)
                if text.strip():
                    self._element(ctx, ctx.mark + 1, pos)
                elif c == ord(",") or ctx.count:
                    raise self._fatal(pos, "a value", f"{chr(c)!r}")
            if c == ord(","):
                ctx.mark, ctx.descended = pos, False
                return
            self._stack.pop()
            self._child_closed(pos)
            return
        if c in (ord(":"), ord("}")):
            raise self._fatal(pos, "',' or ']'", f"{chr(c)!r}")
        if ctx.kind == _TRACES and c == ord("{") and not self._slice(ctx.mark + 1, pos).strip():
            ctx.descended = True
            self._open_trace(pos, ctx.index)
            return
        self._stack.append(_Ctx(_SKIP, _OPEN[c], pos))

    def _child_closed(self, pos: int) -> None:
        """A container ended at ``pos``: its parent's pending value continues after it."""
        if self._stack:
            parent = self._stack[-1]
            if parent.descended:
                parent.mark = pos

    def _member_done(self, ctx: _Ctx, pos: int) -> None:
        key = ctx.key
        assert key is not None
        ctx.count += 1
        if ctx.descended:
            if self._slice(ctx.mark + 1, pos).strip():
                raise self._fatal(pos, "',' or '}'", _got_bytes(self._slice(ctx.mark + 1, pos)))
            if ctx.kind == _TOP and key in ("traces", _CONNECTIONS):
                ctx.members["traces"] = []
            return
        value = self._value(ctx.mark, pos)
        ctx.members[key] = value
        if ctx.kind == _TOP and key in ("traces", _CONNECTIONS) and not isinstance(value, list):
            self._no_traces(ctx, pos)
        if ctx.kind == _TRACE and key == "events":
            self._problem(
                RecordProblem(
                    None, 'an "events" array', describe(value), where=f"traces[{ctx.index}]"
                )
            )

    def _element(self, ctx: _Ctx, a: int, b: int) -> None:
        """A complete element of ``traces`` (not an object: a problem) or of ``events``."""
        if b - a > self.max_record_bytes:
            raise RecordTooLarge(a, b - a)
        index = ctx.count
        ctx.count += 1
        if ctx.kind == _TRACES:
            ctx.index += 1
            text = self._slice(a, b)
            values = budget.over_budget(text)
            if values is not None:
                raise self._fatal(a, budget.expected(), f"{values:,}")
            try:
                value: Any = orjson.loads(text)
            except orjson.JSONDecodeError:
                raise self._fatal(a, "a JSON value", _got_bytes(text)) from None
            self._problem(
                RecordProblem(None, "a trace object", describe(value), where=f"traces[{index}]")
            )
            return
        trace = self._stack[-2]
        where = (
            f"events[{index}]" if trace.kind == _TOP else f"traces[{trace.index}].events[{index}]"
        )
        text = self._slice(a, b)
        values = budget.over_budget(text)
        if values is not None:
            self._problem(RecordProblem(None, budget.expected(), f"{values:,}", where=where))
            return
        builder = trace.builder
        assert builder is not None
        provisional = trace.index not in self._headers
        if self._native is not None and self._native_packet(trace, builder, text, where):
            return
        try:
            event = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            self._problem(
                RecordProblem(None, "a JSON value", _got_bytes(text, str(exc)), where=where)
            )
            return
        if event == []:  # converter exports end their events with an empty array
            return
        if provisional and trace.columns is None and isinstance(event, list):
            trace.deferred = True  # event_fields may follow the events
            return
        try:
            if trace.columns is not None and isinstance(event, list):
                name, raw_time, data = _array_event(trace.columns, event, where)
            else:
                name, raw_time, data = object_event(event, None, where=where)
            t = builder.repair(builder.event_time(raw_time, None, where=where), where)
            builder.observe(t, None, where=where)
            builder.n_events += 1
            builder.add(name, t, data, None, where=where)
        except RecordProblem as problem:
            self._event_problem(trace, problem)

    def _event_problem(self, trace: _Ctx, problem: RecordProblem) -> None:
        if trace.index in self._headers:
            self._problem(problem)
        elif len(trace.pending) < (MAX_KEPT_PROBLEMS if self.lenient else 1):
            trace.pending.append(problem)  # raised or kept once the header is complete
        else:
            trace.pending_more += 1
            key = record_key(problem)
            if self.lenient and key is not None:
                trace.pending_keys.append(key)

    def _native_packet(self, trace: _Ctx, builder: TraceBuilder, text: bytes, where: str) -> bool:
        """A ``packet_sent`` / ``packet_received`` event read by the native core into the
        trace's packet columns (``quicsm._native.packet_event``, the reader of
        ``native/src/packets.rs``), as :meth:`_element` would read it: whether it was (else the
        Python parser reads it). Not for times summed (delta) or repaired."""
        columns = builder.native_packets()
        if columns is None or builder.delta or builder.repairs_backward:
            return False
        assert self._native is not None
        got = self._native.packet_event(text, builder.scale, columns.first_scid, columns.rows())
        if got is None:
            return False
        name, t, scid, sizes, chunk = got
        try:
            builder.observe(t, None, where=where)
        except RecordProblem as problem:
            self._event_problem(trace, problem)
            return True
        builder.n_events += 1
        if builder.counts is not None:
            builder.counts[name] += 1
        columns.absorb(scid, sizes, chunk)
        return True

    def _open_trace(self, pos: int, index: int) -> None:
        self._stack.append(_Ctx(_TRACE, ord("}"), pos, index=index))

    def _top(self) -> dict[str, Any]:
        return {
            k: v
            for k, v in self._top_ctx.members.items()
            if k not in ("traces", "trace", _CONNECTIONS)
        }

    def _open_events(self, ctx: _Ctx, pos: int) -> None:
        top, members = self._headers.get(ctx.index, (self._top(), ctx.members))
        ctx.builder = self._builder(len(self.traces), top, members, sink=True)
        ctx.columns = _columns(members)
        # array events (event_fields) are the Python parser's
        self._stack.append(_Ctx(_EVENTS, ord("]"), pos, native=ctx.columns is None))

    def _builder(
        self, index: int, top: dict[str, Any], trace: dict[str, Any], *, sink: bool = False
    ) -> TraceBuilder:
        """A trace's builder; only the one that reads the events gets the metric sink (the
        others only compare headers)."""
        builder = TraceBuilder(
            index,
            top,
            trace,
            "JSON",
            want_metrics=self.want_metrics,
            full=True,
            metric_sink=self.metric_sink if sink else None,
        )
        columns = _columns(trace)
        if columns is not None and "delta_time" in columns:
            builder.delta = True
        return builder

    def _object_closed(self, ctx: _Ctx, pos: int) -> None:
        if ctx.kind == _TOP:
            self._done = True
            self._end_of_top = pos + 1
            if ctx.builder is not None:
                self._finish_trace(ctx)  # qlog 0.1: the file is the trace
            elif "traces" not in ctx.members and not isinstance(ctx.members.get("trace"), dict):
                self._no_traces(ctx, pos)
            self._final_headers()
        else:
            self._finish_trace(ctx)
            parent = self._stack[-1]
            if parent.kind == _TRACES:
                parent.index += 1
                parent.count += 1
            else:
                parent.members["trace"] = {}

    def _no_traces(self, top: _Ctx, pos: int) -> None:
        version = top.members.get("qlog_version")
        if isinstance(version, str | int | float) and str(version).startswith("0.1"):
            raise RecordProblem(
                None,
                f'an "events" array (the header says qlog_version "{version}", whose events '
                "are at the top level)",
                describe(top.members.get("events")),
                line=self._version_line or self._line(pos),
            )
        raise self._fatal(pos, 'a "traces" array', describe(top.members.get("traces")))

    def _finish_trace(self, ctx: _Ctx) -> None:
        members = {k: v for k, v in ctx.members.items() if k != "events"}
        builder = ctx.builder
        if builder is None:  # no events array
            builder = self._builder(len(self.traces), self._top(), members, sink=True)
        final = self._builder(builder.index, self._top(), members)
        late = ctx.builder is not None and (
            ctx.deferred or final.timing != builder.timing or _columns(members) != ctx.columns
        )
        if late and ctx.index not in self._headers:
            self._late[ctx.index] = members
        else:
            for problem in ctx.pending:
                self._problem(problem)
            self.skipped += ctx.pending_more
            self.skipped_keys.update(ctx.pending_keys)
        self._trace_members.append(members)
        self.traces.append(builder.finish())

    def _final_headers(self) -> None:
        """Header fields from the complete file and trace objects; traces whose time
        conventions were named after their events are listed in :attr:`reread`."""
        top = self._top()
        for trace, members in zip(self.traces, self._trace_members, strict=True):
            final = self._builder(trace.index, top, members)
            trace.vantage, trace.title = final.vantage, final.title
            trace.code_version, trace.labels = final.code_version, final.labels
            trace.cc_algorithm, trace.format = final.cc_algorithm, final.format
        self.reread = {index: (top, members) for index, members in self._late.items()}

    def _complete_pending(self, end: int) -> None:
        """At a cut: an event or trace member that is complete but not yet followed by ',' or
        a closing bracket is kept."""
        ctx = self._stack[-1]
        if ctx.kind not in (_EVENTS, _TRACE) or ctx.descended:
            return
        if ctx.kind == _TRACE and ctx.expecting_key:
            return
        text = self._slice(ctx.mark + 1, end)
        if budget.over_budget(text) is not None:
            return
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return
        if not isinstance(value, dict | list | str):
            return  # a number or literal may have been cut
        if ctx.kind == _EVENTS:
            self._element(ctx, ctx.mark + 1, end)
            self.truncated_at = end
            self.truncated_line = self._line(end)
        elif ctx.key is not None:
            ctx.members[ctx.key] = value

    def _truncated(self, end: int) -> None:
        """The document ends inside it: keep every complete event and member."""
        last = end
        for ctx in self._stack:
            if ctx.kind == _EVENTS:
                last = ctx.mark
        self.truncated_at = last
        self.truncated_line = self._line(last)
        top = self._top_ctx
        self._complete_pending(end)
        open_traces = [c for c in self._stack if c.kind == _TRACE]
        if top.builder is not None:
            open_traces = [top]  # qlog 0.1: the file is the trace
        for ctx in open_traces:
            self._finish_trace(ctx)
        self._final_headers()


_TIME_COLUMNS = ("relative_time", "delta_time", "time")


def _columns(trace: dict[str, Any]) -> list[str] | None:
    """A draft-00/01 trace's ``event_fields`` (qlog 0.1: the file's ``fields``), lower-cased."""
    fields = trace.get("event_fields", trace.get("fields"))
    if isinstance(fields, list) and all(isinstance(f, str) for f in fields):
        return [f.lower() for f in fields]
    return None


def _array_event(columns: list[str], event: list[Any], where: str) -> tuple[str, object, object]:
    """A draft-00/01 array event, its positions named by ``event_fields``.

    ``trigger`` is an optional field (main-schema-01 section "trigger"): an event one value
    short of ``event_fields`` that names it, whose value in the ``data`` position (the fields
    without ``trigger``) is an object, leaves it out (pcap2qlog's converter writes
    ``ALPN_update`` and ``connection_id_update`` so)."""
    if len(event) == len(columns) - 1 and "trigger" in columns and "data" in columns:
        without = [c for c in columns if c != "trigger"]
        if isinstance(event[without.index("data")], dict):
            columns = without
    if len(event) != len(columns):
        raise RecordProblem(
            None,
            f"an array of {len(columns)} values (event_fields)",
            f"{len(event)} values",
            where=where,
        )
    row = dict(zip(columns, event, strict=True))
    raw_time = next((row[c] for c in _TIME_COLUMNS if c in row), None)
    # draft-00/01 "event"; qlog 0.1 "type" (e.g. "PACKET_SENT")
    event_name = row.get("event", row.get("event_type", row.get("type")))
    if raw_time is None or not isinstance(event_name, str):
        raise RecordProblem(
            None, 'event_fields with a time column and "event"', ", ".join(columns), where=where
        )
    category = row.get("category")
    name = f"{category}:{event_name}" if isinstance(category, str) else event_name
    data = row.get("data", {})
    trigger = row.get("trigger")
    if isinstance(data, dict) and isinstance(trigger, str) and "trigger" not in data:
        data = {**data, "trigger": trigger}
    return name, raw_time, data


def _got_bytes(data: bytes, error: str | None = None) -> str:
    text = data.strip()[:40].decode("utf-8", "replace")
    if not text:
        return "nothing"
    if error is not None and "unexpected end" not in error:
        return f"{text!r} ({error.split(':')[0]})"
    return repr(text)
