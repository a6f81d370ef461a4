"""A connection's packets over time, for the packets panel of ``quicsm plot``: the data
packets sent, how far the peer's ACKs have acknowledged them, the packets declared lost, and
which of those were acknowledged later (spurious losses: declared lost, then acknowledged).

Packet events are decoded by :mod:`quicsm.extract.wire` (:func:`~quicsm.extract.wire.packet_of`,
:func:`~quicsm.extract.wire.lost_packet_of`), the same decoding the states derived from the wire
use, and the data direction is chosen the same way (the direction whose ack-eliciting packets
carry more bytes; a capture's directions told by connection IDs). The panel draws the 1-RTT
(application data) packet number space: its numbers rise with every packet sent, so a packet's
number is its place in the sequence.

:class:`PacketColumns` is sans-I/O: it takes one trace's decoded packet and loss events as a
file is read and keeps them as columns of numbers (about 20 bytes per packet, 24 per ACK range),
never as an object per packet; :meth:`PacketColumns.timeline` turns them into a
:class:`PacketTimeline`. :func:`read_packet_timelines` reads the packet events of the chosen
traces of some files, strict or lenient, and keeps only those traces' packets.
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from quicsm.core.diagnostics import Diagnostics
from quicsm.extract.sendable import (
    SendableTimeline,
    native_sendable_timeline,
    sendable_timeline,
)
from quicsm.extract.streams import StreamColumns, StreamTimeline
from quicsm.extract.wire import lost_packet_of, packet_of
from quicsm.qlog.blocks import DEFAULT_LIMITS, ReadLimits
from quicsm.qlog.paths import PathLike, expand_spans
from quicsm.qlog.source import CSV, PARQUET, read_qlog
from quicsm.qlog.trace import TraceBuilder

#: flag bits of a packet row
_SENT, _ELICITING, _APPLICATION, _FROM_FIRST, _NUMBERED = 1, 2, 4, 8, 16


@dataclass(frozen=True)
class PacketTimeline:
    """The 1-RTT data packets of one connection; times in ms from the trace's first event."""

    #: the log owner sent the data (else: the peer did, seen arriving)
    own_sends: bool
    #: a capture seen from the network (every packet logged one way; directions told by
    #: connection IDs): ``own_sends`` then means the client sent the data
    captured: bool
    #: the data packets: (times, packet numbers), in time order (compact arrays)
    sent: tuple[array[float], array[int]]
    #: each ACK that raised the largest acknowledged packet number: (times, that number)
    largest_acked: tuple[array[float], array[int]]
    #: data packets acknowledged at least once
    acknowledged: int
    #: packets of the data direction declared lost: (time, number, spurious, trigger); spurious:
    #: acknowledged by an ACK that arrived after the declaration
    lost: list[tuple[float, int, bool, str | None]] = field(default_factory=list)
    #: whether this log holds the data sender's loss declarations (its own sends)
    losses_here: bool = True
    #: packet events of the data direction that name no packet number (not drawn)
    unnumbered: int = 0
    #: the stream data by byte offset and the flow-control limits (None: no STREAM frames)
    streams: StreamTimeline | None = None
    #: the log owner's sendable data and what held it, over time (None: no STREAM frames, or
    #: a capture, whose sender is not the log owner)
    sendable: SendableTimeline | None = None

    @property
    def spurious(self) -> int:
        return sum(1 for _, _, s, _ in self.lost if s)


class PacketColumns:
    """One trace's packet and loss events as columns of numbers (a ``metric_sink`` that keeps
    no metrics; :attr:`TraceBuilder.packet_hook` and :attr:`TraceBuilder.loss_hook` feed it)."""

    __slots__ = (
        "_ack_hi",
        "_ack_lo",
        "_ack_of",
        "_byte_offsets",
        "_flags",
        "_frames",
        "_numbers",
        "_pending",
        "_pending_rows",
        "_streams",
        "_times",
        "bytes",
        "first_scid",
        "lost_numbers",
        "lost_times",
        "lost_triggers",
        "trigger_names",
    )

    def __init__(self, *, byte_offsets: bool = True) -> None:
        #: keep what only the byte-offset view reads (the ACK ranges as rows of
        #: :attr:`streams`); without it :meth:`timeline` gives no byte-offset view
        self._byte_offsets = byte_offsets
        self._times = array("d")
        self._numbers = array("q")
        self._flags = array("B")
        #: ACK ranges of application-space packets: the packet row they came in, lowest, highest
        self._ack_of = array("q")
        self._ack_lo = array("q")
        self._ack_hi = array("q")
        self.lost_times = array("d")
        self.lost_numbers = array("q")
        self.lost_triggers = array("H")  # 0: none, else 1 + index in trigger_names
        self.trigger_names: dict[str, int] = {}
        self.first_scid: str | None = None
        #: the STREAM, ACK and flow-control frames, for the byte-offset panel
        self._streams = StreamColumns()
        #: without the byte-offset view, the STREAM, MAX_* and *_BLOCKED frames are kept as the
        #: native core read them, chunks of columns in the order read (those decoded here are
        #: put in order among them, :meth:`_seal`), for the native sendable timeline; None: kept
        #: as rows of :attr:`_streams` (the byte-offset view, or a value no column holds)
        self._frames: list[Sequence[bytes]] | None = None if byte_offsets else []
        #: ack-eliciting bytes by (logged as sent, sent by the capture's first sender)
        self.bytes = [0, 0, 0, 0]
        #: chunks the native core read (:meth:`absorb`), not appended yet: appended together
        #: (one call per column, not one per chunk) before the columns are next read
        self._pending: list[Sequence[bytes]] = []
        self._pending_rows = 0

    def packet(self, time: float, short: str, data: object, scale: float) -> None:
        """A ``packet_sent`` / ``packet_received`` event (``TraceBuilder.packet_hook``)."""
        if self._pending:  # the rows read natively before it come first
            self._flush()
        p = packet_of(time, short, data, scale)
        if p is None:
            return
        self._streams.add(time, p, data)
        if self.first_scid is None and p.scid:
            self.first_scid = p.scid
        # from_one_side: packets addressed to the first source connection ID travel back
        from_first = self.first_scid is not None and p.dcid != self.first_scid
        flags = (
            (_SENT if p.sent else 0)
            | (_ELICITING if p.eliciting else 0)
            | (_APPLICATION if p.space == "application" else 0)
            | (_FROM_FIRST if from_first else 0)
            | (_NUMBERED if p.number is not None else 0)
        )
        if p.eliciting:
            self.bytes[2 * p.sent + from_first] += p.size
        row = len(self._times)
        self._times.append(time)
        self._numbers.append(p.number if p.number is not None else -1)
        self._flags.append(flags)
        if p.space == "application":
            for lo, hi in p.acks:
                self._ack_of.append(row)
                self._ack_lo.append(lo)
                self._ack_hi.append(hi)

    def rows(self) -> int:
        """How many packet rows are held (:class:`quicsm.qlog.trace.NativePackets`)."""
        return len(self._times) + self._pending_rows

    def absorb(
        self, first_scid: str | None, sizes: Sequence[int], columns: Sequence[bytes]
    ) -> None:
        """Rows the native core read (``quicsm._native.packet_records``), appended as
        :meth:`packet` appends them, with the STREAM, ACK and flow-control frames given to
        :attr:`streams` as :meth:`StreamColumns.add` keeps them."""
        self.first_scid = first_scid
        for i, size in enumerate(sizes):
            self.bytes[i] += size
        if not columns[0]:  # no row: nothing else either
            return
        self._pending.append(columns)
        self._pending_rows += len(columns[0]) // 8  # float64 times
        if len(self._pending) >= _PENDING_CHUNKS:
            self._flush()

    def _flush(self) -> None:
        """The chunks held back by :meth:`absorb`, appended as one chunk (each column joined)."""
        pending = self._pending
        if not pending:
            return
        self._pending, self._pending_rows = [], 0
        if len(pending) == 1:
            self._take(pending[0])
        else:  # every chunk has the same columns
            self._take([b"".join(c) for c in zip(*pending, strict=True)])

    def _take(self, columns: Sequence[bytes]) -> None:
        (times, numbers, flags, ack_of, ack_lo, ack_hi, *frames) = columns
        if not times:
            return
        base = len(self._times)
        self._times.frombytes(times)
        self._numbers.frombytes(numbers)
        self._flags.frombytes(flags)
        if ack_of:
            self._ack_of.frombytes(ack_of)
            self._ack_lo.frombytes(ack_lo)
            self._ack_hi.frombytes(ack_hi)
        if ack_of and self._byte_offsets:
            rows = np.frombuffer(ack_of, dtype=np.int64) - base
            t = np.frombuffer(times, dtype=np.float64)[rows]
            sent = (np.frombuffer(flags, dtype=np.uint8)[rows] & _SENT) != 0
            lo, hi = np.frombuffer(ack_lo, dtype=np.int64), np.frombuffer(ack_hi, dtype=np.int64)
            self._streams.acks.extend(
                zip(t.tolist(), sent.tolist(), lo.tolist(), hi.tolist(), strict=True)
            )
        if self._frames is not None and (frames[0] or frames[6] or frames[10]):
            self._seal()  # the rows decoded here before this chunk come first
            if self._frames is not None:
                self._frames.append(frames)
                return
        streams, limits, blocked = frames[:6], frames[6:10], frames[10:]
        if streams[0]:
            self._streams.stream_rows.extend(zip(*_lists(streams), strict=True))
        if limits[0]:
            self._streams.limits.extend(zip(*_lists(limits), strict=True))
        if blocked[0]:
            self._streams.blocked.extend(zip(*_lists(blocked), strict=True))

    def _seal(self) -> None:
        """The STREAM, MAX_* and *_BLOCKED rows decoded here (not natively) since the last
        chunk, appended to :attr:`_frames` as a chunk of columns; when a value fits no column
        (an integer beyond 64 bits, a time not a float) every chunk is turned back into rows
        of :attr:`_streams` instead (:meth:`_unseal`)."""
        c = self._streams
        if self._frames is None or not (c.stream_rows or c.limits or c.blocked):
            return
        try:
            chunk = [
                *_columns_of(c.stream_rows, 6),
                *_columns_of(c.limits, 4),
                *_columns_of(c.blocked, 4),
            ]
        except (OverflowError, TypeError):
            self._unseal()
            return
        c.stream_rows, c.limits, c.blocked = [], [], []
        self._frames.append(chunk)

    def _unseal(self) -> None:
        """The chunks of :attr:`_frames` as rows of :attr:`_streams`, in the order read
        (before the rows decoded here since the last chunk); the frames are kept as rows
        from then on."""
        chunks, self._frames = self._frames, None
        if not chunks:
            return
        c = self._streams
        rows, limits, blocked = c.stream_rows, c.limits, c.blocked
        c.stream_rows, c.limits, c.blocked = [], [], []
        for frames in chunks:
            streams, lim, blo = frames[:6], frames[6:10], frames[10:]
            if streams[0]:
                c.stream_rows.extend(zip(*_lists(streams), strict=True))
            if lim[0]:
                c.limits.extend(zip(*_lists(lim), strict=True))
            if blo[0]:
                c.blocked.extend(zip(*_lists(blo), strict=True))
        c.stream_rows += rows
        c.limits += limits
        c.blocked += blocked

    def _sendable(self, start: float) -> SendableTimeline | None:
        """The sendable timeline (:mod:`quicsm.extract.sendable`): in the native core from
        the frames kept as columns where it can, else from the rows."""
        self._seal()
        if self._frames is not None:
            joined = [b"".join(column) for column in zip(*self._frames, strict=True)]
            if not joined:
                joined = [b""] * 14
            peer = self._streams.parameters.get(False, {})
            done, made = native_sendable_timeline(
                joined[:6], joined[6:10], joined[10:], peer, start
            )
            if done:
                return made
            self._unseal()
        return sendable_timeline(self._streams, start)

    def parameters(self, time: float, short: str, data: object, scale: float) -> None:
        """A ``parameters_set`` event (``TraceBuilder.parameters_hook``)."""
        self._streams.transport_parameters(data)

    def loss(self, time: float, short: str, data: object, scale: float) -> None:
        """A ``packet_lost`` event (``TraceBuilder.loss_hook``)."""
        space, number, trigger = lost_packet_of(data)
        if space != "application" or number is None:
            return
        self._streams.losses.append((time, number))
        self.lost_times.append(time)
        self.lost_numbers.append(number)
        code = 0
        if trigger is not None:
            code = self.trigger_names.setdefault(trigger, len(self.trigger_names) + 1)
        self.lost_triggers.append(code)

    def absorb_losses(
        self, times: bytes, numbers: bytes, codes: bytes, triggers: Sequence[str]
    ) -> None:
        """``packet_lost`` events the native core read (``quicsm._native.packet_records``),
        kept as :meth:`loss` keeps them: ``codes`` are 0 (no trigger) or 1 + an index in
        ``triggers`` (in the order the chunk first named them)."""
        if not times:
            return
        lost_t, lost_n, local = array("d"), array("q"), array("H")
        lost_t.frombytes(times)
        lost_n.frombytes(numbers)
        local.frombytes(codes)
        names = self.trigger_names
        code_of = [0, *(names.setdefault(name, len(names) + 1) for name in triggers)]
        self._streams.losses.extend(zip(lost_t.tolist(), lost_n.tolist(), strict=True))
        self.lost_times.extend(lost_t)
        self.lost_numbers.extend(lost_n)
        self.lost_triggers.extend(code_of[c] for c in local)

    def __call__(self, event: object) -> None:  # the metric sink: keeps nothing
        return None

    def wanted(self) -> bool:
        return False

    def timeline(self, start: float, *, byte_offsets: bool = True) -> PacketTimeline:
        """The timeline, times counted from ``start`` (the trace's first event, ms). Computed
        on the columns as arrays (no object per packet); the timeline holds its series as
        compact arrays too. ``byte_offsets``: with the byte-offset view
        (:attr:`PacketTimeline.streams`, which only the plot draws; else None; columns made
        without it give none)."""
        if byte_offsets and not self._byte_offsets:
            raise ValueError("these packet columns were kept without their byte-offset view")
        self._flush()
        times = np.frombuffer(self._times, dtype=np.float64) if self._times else np.empty(0)
        numbers = np.frombuffer(self._numbers, dtype=np.int64) if self._numbers else _NO_INTS
        flags = np.frombuffer(self._flags, dtype=np.uint8) if self._flags else np.empty(0, np.uint8)
        sides = np.unique(flags & _SENT)
        captured = len(sides) == 1 and self.first_scid is not None
        if captured:  # direction: sent by the capture's first sender (the client)
            own = self.bytes[1] + self.bytes[3] >= self.bytes[0] + self.bytes[2]
            bit = _FROM_FIRST
        else:
            own = self.bytes[2] + self.bytes[3] >= self.bytes[0] + self.bytes[1]
            bit = _SENT
        want = _ELICITING | _APPLICATION
        order = np.argsort(times, kind="stable")
        t, n, f = times[order], numbers[order], flags[order]
        data = (((f & bit) != 0) == own) & ((f & want) == want)
        numbered = (f & _NUMBERED) != 0
        sent_t = np.round(t[data & numbered] - start, 3)
        sent_n = n[data & numbered]
        unnumbered = int(np.count_nonzero(data & ~numbered))
        del order, t, n, f, data, numbered
        # ACKs travel the other way: their ranges, in the time order of their packets
        rows = np.frombuffer(self._ack_of, dtype=np.int64) if self._ack_of else _NO_INTS
        lo = np.frombuffer(self._ack_lo, dtype=np.int64) if self._ack_lo else _NO_INTS
        hi = np.frombuffer(self._ack_hi, dtype=np.int64) if self._ack_hi else _NO_INTS
        other = ((flags[rows] & bit) != 0) != own
        rows, lo, hi = rows[other], lo[other], hi[other]
        by_time = np.argsort(times[rows], kind="stable")
        ack_t, lo, hi = times[rows][by_time], lo[by_time], hi[by_time]
        # the largest acknowledged: each ACK that raises it (one point per time, the last)
        top = np.maximum.accumulate(hi) if len(hi) else hi
        rises = np.ones(len(top), dtype=bool)
        rises[1:] = top[1:] > top[:-1]
        rise_t, rise_n = np.round(ack_t[rises] - start, 3), top[rises]
        last_of_time = np.ones(len(rise_t), dtype=bool)
        last_of_time[:-1] = rise_t[1:] != rise_t[:-1]
        acknowledged = _covered(np.unique(sent_n), lo, hi)
        # losses: only the data sender's own declarations are about the data packets
        losses_here = own and not captured
        lost: list[tuple[float, int, bool, str | None]] = []
        if losses_here and self.lost_times:
            names = [None, *self.trigger_names]
            lost_t = np.frombuffer(self.lost_times, dtype=np.float64)
            lost_n = np.frombuffer(self.lost_numbers, dtype=np.int64)
            later = _acknowledged_after(lost_t, lost_n, ack_t, lo, hi).tolist()
            # by time, number, spurious, then trigger (none first: a declaration without one
            # and one with one at the same time and number are ordered, not compared)
            lost = sorted(
                (
                    (round(when - start, 3), number, late, names[code])
                    for when, number, late, code in zip(
                        self.lost_times, self.lost_numbers, later, self.lost_triggers, strict=True
                    )
                ),
                key=lambda r: (r[0], r[1], r[2], r[3] is not None, r[3] or ""),
            )
        return PacketTimeline(
            own_sends=own,
            captured=captured,
            sent=(_floats(sent_t), _ints(sent_n)),
            largest_acked=(_floats(rise_t[last_of_time]), _ints(rise_n[last_of_time])),
            acknowledged=acknowledged,
            lost=lost,
            losses_here=losses_here,
            unnumbered=unnumbered,
            streams=self._streams.timeline(start) if byte_offsets else None,
            sendable=None if captured else self._sendable(start),
        )

    # the columns, with the chunks held back appended first
    @property
    def times(self) -> array[float]:
        self._flush()
        return self._times

    @property
    def numbers(self) -> array[int]:
        self._flush()
        return self._numbers

    @property
    def flags(self) -> array[int]:
        self._flush()
        return self._flags

    @property
    def ack_of(self) -> array[int]:
        self._flush()
        return self._ack_of

    @property
    def ack_lo(self) -> array[int]:
        self._flush()
        return self._ack_lo

    @property
    def ack_hi(self) -> array[int]:
        self._flush()
        return self._ack_hi

    @property
    def streams(self) -> StreamColumns:
        """The frames as rows (those kept as columns are turned into rows first)."""
        self._flush()
        self._unseal()
        return self._streams


#: chunks :meth:`PacketColumns.absorb` holds back at most (a contained-JSON trace gives one per
#: packet event)
_PENDING_CHUNKS = 256

_NO_INTS = np.empty(0, dtype=np.int64)


def _columns_of(rows: Sequence[tuple[object, ...]], width: int) -> list[bytes]:
    """Rows ``(time, sent, int, ...)`` (``width`` values each) as the native core's columns:
    float64 times, int64 for the rest (``sent`` as 0 or 1). Raises OverflowError for an
    integer beyond 64 bits and TypeError for a time that is not a float or a value that is
    not an integer (none is put in a column it would not come back from the same)."""
    if not rows:
        return [b""] * width
    times, sent, *rest = zip(*rows, strict=True)
    if any(type(t) is not float for t in times):
        raise TypeError("a time that is not a float")
    ints = [int(bool(x)) for x in sent]
    out = [array("d", times).tobytes(), array("q", ints).tobytes()]
    for column in rest:
        if any(type(v) is not int for v in column):
            raise TypeError("a value that is not an integer")
        out.append(array("q", column).tobytes())
    return out


def _lists(columns: Sequence[bytes]) -> list[list[object]]:
    """Native frame columns (a float64 time, an int64 ``sent`` read as a bool, then int64
    columns) as lists of Python values."""
    times, sent, *rest = columns
    return [
        np.frombuffer(times, dtype=np.float64).tolist(),
        (np.frombuffer(sent, dtype=np.int64) != 0).tolist(),
        *(np.frombuffer(c, dtype=np.int64).tolist() for c in rest),
    ]


def _floats(values: np.ndarray) -> array[float]:
    out = array("d")
    out.frombytes(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return out


def _ints(values: np.ndarray) -> array[int]:
    out = array("q")
    out.frombytes(np.ascontiguousarray(values, dtype=np.int64).tobytes())
    return out


def _covered(numbers: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> int:
    """How many of the sorted distinct ``numbers`` some range ``[lo, hi]`` covers."""
    if not len(lo) or not len(numbers):
        return 0
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], np.maximum.accumulate(hi[order])
    # a merged interval starts where a range begins past everything before it
    starts = np.ones(len(lo), dtype=bool)
    starts[1:] = lo[1:] > hi[:-1] + 1
    first = lo[starts]
    last = hi[np.r_[np.nonzero(starts)[0][1:] - 1, len(lo) - 1]]
    inside = np.searchsorted(numbers, last, side="right") - np.searchsorted(
        numbers, first, side="left"
    )
    return int(inside.sum())


def _acknowledged_after(
    lost_t: np.ndarray, lost_n: np.ndarray, ack_t: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """For each loss (time ``lost_t[j]``, number ``lost_n[j]``): whether an ACK range
    ``[lo[k], hi[k]]`` that arrived later (``ack_t[k] > lost_t[j]``) covers its number; times
    are finite (:meth:`quicsm.qlog.trace.TraceBuilder.event_time` bounds them).

    That is the latest arrival among the ranges covering the number, compared with the loss's
    time. The latest arrival per number is a range update of a maximum with point queries,
    done on a segment tree over the distinct lost numbers, one level at a time for every range
    at once: about (ACK ranges + losses) x log(losses) steps, each an array operation."""
    if not len(lost_n):
        return np.zeros(0, dtype=bool)
    numbers = np.unique(lost_n)
    # the lost numbers each range covers: those at positions [first, stop) of ``numbers``
    first = np.searchsorted(numbers, lo, side="left")
    stop = np.searchsorted(numbers, hi, side="right")
    some = first < stop
    size = 1 << (len(numbers) - 1).bit_length()  # leaves: a power of two >= len(numbers)
    latest = np.full(2 * size, -np.inf)  # per tree node: the latest range covering it whole
    left, right, when = first[some] + size, stop[some] + size, ack_t[some]
    while len(left):
        # a left end that is a right child, and a right end after a left child, are covered
        # whole here; their parents are not
        take = (left & 1).astype(bool) & (left < right)
        np.maximum.at(latest, left[take], when[take])
        left = left + take
        take = (right & 1).astype(bool) & (left < right)
        right = right - take
        np.maximum.at(latest, right[take], when[take])
        left, right = left >> 1, right >> 1
        live = left < right
        left, right, when = left[live], right[live], when[live]
    level = 2
    while level < 2 * size:  # each node inherits what covers its parent, top down
        nodes = np.arange(level, 2 * level)
        latest[nodes] = np.maximum(latest[nodes], latest[nodes >> 1])
        level *= 2
    return latest[size + np.searchsorted(numbers, lost_n)] > lost_t


class _Discard:
    def __call__(self, event: object) -> None:
        return None

    def wanted(self) -> bool:
        return False


def read_packet_timelines(
    paths: PathLike | Iterable[PathLike],
    traces: Collection[str],
    *,
    on_error: str = "raise",
    diagnostics: Diagnostics | None = None,
    limits: ReadLimits = DEFAULT_LIMITS,
    byte_offsets: bool = True,
) -> dict[str, PacketTimeline]:
    """The :class:`PacketTimeline` of each trace id in ``traces`` (``<file>#<nnnn>``, as
    :func:`quicsm.extract.read.read_transitions` names them) that logs packets. Files holding
    none of ``traces`` are not read; only the chosen traces' packets are kept.

    The records of a file holding a chosen trace that name a packet event are decoded (of
    those traces only, when the file is given as :class:`~quicsm.qlog.paths.TraceSpans`), the
    others checked for framing only (:mod:`quicsm.qlog.seq`): strict (``on_error="raise"``),
    the first bad record raises a :class:`~quicsm.core.errors.QlogError` naming the file and the
    record; lenient (``"skip"``), bad records are skipped and reported in ``diagnostics``.
    With the native core, JSON-SEQ/NDJSON packet events are read by it into the columns
    (:meth:`PacketColumns.absorb`); the records it hands back are decoded here as before.

    ``byte_offsets``: each timeline with its byte-offset view (:attr:`PacketTimeline.streams`;
    the connection account and the ApplicationLimited split read none of it)."""
    from quicsm.extract.loading import report_skipped, trace_id

    lenient = on_error == "skip"
    wanted = set(traces)
    out: dict[str, PacketTimeline] = {}
    for path, spans in expand_spans(paths):
        file = str(path)
        prefix = file + "#"
        indices = {int(t[len(prefix) :]) for t in wanted if t.startswith(prefix)}
        if not indices:
            continue
        if spans is not None:  # only the chosen traces' bytes are read
            spans = tuple(s for s in spans if s[0] in indices)
        columns: dict[int, PacketColumns] = {}

        def sink(
            builder: TraceBuilder,
            indices: set[int] = indices,
            columns: dict[int, PacketColumns] = columns,
        ) -> PacketColumns | _Discard:
            if builder.index not in indices:
                return _Discard()  # another trace of the file: nothing of it is kept
            kept = columns[builder.index] = PacketColumns(byte_offsets=byte_offsets)
            builder.packet_hook = kept.packet
            builder.loss_hook = kept.loss
            builder.parameters_hook = kept.parameters
            builder.packet_columns = kept
            return kept

        read = read_qlog(Path(path), lenient=lenient, limits=limits, metric_sink=sink, spans=spans)
        if read.kind in (CSV, PARQUET):
            continue
        if diagnostics is not None:  # a record the states' read skipped is counted once
            report_skipped(diagnostics, read)
        for trace in read.traces:
            kept = columns.get(trace.index)
            if kept is None or not len(kept.times):
                continue
            start = trace.first_time if trace.first_time is not None else 0.0
            out[trace_id(file, trace.index)] = kept.timeline(start, byte_offsets=byte_offsets)
            del columns[trace.index]  # its columns let go once its timeline is made
    return out


__all__ = ["PacketColumns", "PacketTimeline", "read_packet_timelines"]
