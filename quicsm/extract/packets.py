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

import bisect
from array import array
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from quicsm.core.diagnostics import Diagnostics
from quicsm.extract.sendable import SendableTimeline, sendable_timeline
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
        streams, limits, blocked = frames[:6], frames[6:10], frames[10:]
        if streams[0]:
            self._streams.stream_rows.extend(zip(*_lists(streams), strict=True))
        if limits[0]:
            self._streams.limits.extend(zip(*_lists(limits), strict=True))
        if blocked[0]:
            self._streams.blocked.extend(zip(*_lists(blocked), strict=True))

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
            declared = list(zip(self.lost_times, self.lost_numbers, strict=True))
            later = _acknowledged_after(declared, _rows(ack_t, lo, hi))
            lost = sorted(
                (round(when - start, 3), number, late, names[code])
                for (when, number), late, code in zip(
                    declared, later, self.lost_triggers, strict=True
                )
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
            sendable=None if captured else sendable_timeline(self._streams, start),
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
        self._flush()
        return self._streams


#: chunks :meth:`PacketColumns.absorb` holds back at most (a contained-JSON trace gives one per
#: packet event)
_PENDING_CHUNKS = 256

_NO_INTS = np.empty(0, dtype=np.int64)


def _lists(columns: Sequence[bytes]) -> list[list[object]]:
    """Native frame columns (a float64 time, an int64 ``sent`` read as a bool, then int64
    columns) as lists of Python values."""
    times, sent, *rest = columns
    return [
        np.frombuffer(times, dtype=np.float64).tolist(),
        (np.frombuffer(sent, dtype=np.int64) != 0).tolist(),
        *(np.frombuffer(c, dtype=np.int64).tolist() for c in rest),
    ]


#: ACK ranges turned into Python numbers at a time (bounded transient objects)
_CHUNK = 1 << 14


def _rows(times: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> Iterator[tuple[float, int, int]]:
    """``(time, lo, hi)`` of each ACK range, a chunk at a time."""
    for i in range(0, len(times), _CHUNK):
        j = i + _CHUNK
        yield from zip(times[i:j].tolist(), lo[i:j].tolist(), hi[i:j].tolist(), strict=True)


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
    lost: Sequence[tuple[float, int]], acks: Iterable[tuple[float, int, int]]
) -> list[bool]:
    """For each loss ``(time, number)``: whether an ACK range ``(time, lo, hi)`` (in time
    order) arriving after it covers its number. Each loss leaves the pending list once, so the
    cost is about (ACK ranges + losses) x log(losses)."""
    out = [False] * len(lost)
    by_time = sorted(range(len(lost)), key=lambda j: lost[j])
    pending: list[tuple[int, int]] = []  # (number, loss index), sorted
    i = 0
    for t, lo, hi in acks:
        while i < len(by_time) and lost[by_time[i]][0] < t:
            j = by_time[i]
            bisect.insort(pending, (lost[j][1], j))
            i += 1
        if not pending:
            continue
        a = bisect.bisect_left(pending, (lo, -1))
        b = bisect.bisect_right(pending, (hi, len(lost)))
        if a < b:
            for _, j in pending[a:b]:
                out[j] = True
            del pending[a:b]
    return out


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
