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
:class:`PacketTimeline`. :func:`read_packet_timelines` reads the chosen traces of some files in
full, strict or lenient, and keeps only those traces' packets.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from quicsm.core.diagnostics import Diagnostics
from quicsm.extract.wire import lost_packet_of, packet_of
from quicsm.qlog.blocks import DEFAULT_LIMITS, ReadLimits
from quicsm.qlog.paths import PathLike, expand_paths
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
    #: the data packets: (times, packet numbers), in time order
    sent: tuple[list[float], list[int]]
    #: each ACK that raised the largest acknowledged packet number: (times, that number)
    largest_acked: tuple[list[float], list[int]]
    #: data packets acknowledged at least once
    acknowledged: int
    #: packets of the data direction declared lost: (time, number, spurious, trigger); spurious:
    #: acknowledged by an ACK that arrived after the declaration
    lost: list[tuple[float, int, bool, str | None]] = field(default_factory=list)
    #: whether this log holds the data sender's loss declarations (its own sends)
    losses_here: bool = True
    #: packet events of the data direction that name no packet number (not drawn)
    unnumbered: int = 0

    @property
    def spurious(self) -> int:
        return sum(1 for _, _, s, _ in self.lost if s)


class PacketColumns:
    """One trace's packet and loss events as columns of numbers (a ``metric_sink`` that keeps
    no metrics; :attr:`TraceBuilder.packet_hook` and :attr:`TraceBuilder.loss_hook` feed it)."""

    __slots__ = (
        "ack_hi",
        "ack_lo",
        "ack_of",
        "bytes",
        "first_scid",
        "flags",
        "lost_numbers",
        "lost_times",
        "lost_triggers",
        "numbers",
        "times",
        "trigger_names",
    )

    def __init__(self) -> None:
        self.times = array("d")
        self.numbers = array("q")
        self.flags = array("B")
        #: ACK ranges of application-space packets: the packet row they came in, lowest, highest
        self.ack_of = array("q")
        self.ack_lo = array("q")
        self.ack_hi = array("q")
        self.lost_times = array("d")
        self.lost_numbers = array("q")
        self.lost_triggers = array("H")  # 0: none, else 1 + index in trigger_names
        self.trigger_names: dict[str, int] = {}
        self.first_scid: str | None = None
        #: ack-eliciting bytes by (logged as sent, sent by the capture's first sender)
        self.bytes = [0, 0, 0, 0]

    def packet(self, time: float, short: str, data: object, scale: float) -> None:
        """A ``packet_sent`` / ``packet_received`` event (``TraceBuilder.packet_hook``)."""
        p = packet_of(time, short, data, scale)
        if p is None:
            return
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
        row = len(self.times)
        self.times.append(time)
        self.numbers.append(p.number if p.number is not None else -1)
        self.flags.append(flags)
        if p.space == "application":
            for lo, hi in p.acks:
                self.ack_of.append(row)
                self.ack_lo.append(lo)
                self.ack_hi.append(hi)

    def loss(self, time: float, short: str, data: object, scale: float) -> None:
        """A ``packet_lost`` event (``TraceBuilder.loss_hook``)."""
        space, number, trigger = lost_packet_of(data)
        if space != "application" or number is None:
            return
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

    def timeline(self, start: float) -> PacketTimeline:
        """The timeline, times counted from ``start`` (the trace's first event, ms)."""
        flags = self.flags
        sides = {f & _SENT for f in flags}
        captured = len(sides) == 1 and self.first_scid is not None
        if captured:  # direction: sent by the capture's first sender (the client)
            own = self.bytes[1] + self.bytes[3] >= self.bytes[0] + self.bytes[2]
            bit = _FROM_FIRST
        else:
            own = self.bytes[2] + self.bytes[3] >= self.bytes[0] + self.bytes[1]
            bit = _SENT
        want = _ELICITING | _APPLICATION

        def data(f: int) -> bool:
            return bool(f & bit) == own and f & want == want

        order = sorted(range(len(self.times)), key=self.times.__getitem__)  # stable
        sent_t: list[float] = []
        sent_n: list[int] = []
        unnumbered = 0
        for i in order:
            f = flags[i]
            if data(f):
                if f & _NUMBERED:
                    sent_t.append(round(self.times[i] - start, 3))
                    sent_n.append(self.numbers[i])
                else:
                    unnumbered += 1
        # ACKs travel the other way: their ranges, in the time order of their packets
        acks = sorted(
            (self.times[self.ack_of[k]], k)
            for k in range(len(self.ack_of))
            if bool(flags[self.ack_of[k]] & bit) != own
        )
        largest_t: list[float] = []
        largest_n: list[int] = []
        top = -1
        for t, k in acks:
            if self.ack_hi[k] > top:
                top = self.ack_hi[k]
                if largest_t and largest_t[-1] == round(t - start, 3):
                    largest_n[-1] = top
                else:
                    largest_t.append(round(t - start, 3))
                    largest_n.append(top)
        acknowledged = _covered(
            sorted(set(sent_n)), [(self.ack_lo[k], self.ack_hi[k]) for _, k in acks]
        )
        # losses: only the data sender's own declarations are about the data packets
        losses_here = own and not captured
        lost: list[tuple[float, int, bool, str | None]] = []
        if losses_here:
            names = [None, *self.trigger_names]
            later = _acknowledged_after(
                [(self.lost_times[j], self.lost_numbers[j]) for j in range(len(self.lost_times))],
                [(t, self.ack_lo[k], self.ack_hi[k]) for t, k in acks],
            )
            lost = sorted(
                (
                    round(self.lost_times[j] - start, 3),
                    self.lost_numbers[j],
                    later[j],
                    names[self.lost_triggers[j]],
                )
                for j in range(len(self.lost_times))
            )
        return PacketTimeline(
            own_sends=own,
            captured=captured,
            sent=(sent_t, sent_n),
            largest_acked=(largest_t, largest_n),
            acknowledged=acknowledged,
            lost=lost,
            losses_here=losses_here,
            unnumbered=unnumbered,
        )


def _covered(numbers: list[int], ranges: Iterable[tuple[int, int]]) -> int:
    """How many of the sorted distinct ``numbers`` some range covers."""
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return sum(
        bisect.bisect_right(numbers, hi) - bisect.bisect_left(numbers, lo) for lo, hi in merged
    )


def _acknowledged_after(
    lost: list[tuple[float, int]], acks: list[tuple[float, int, int]]
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
) -> dict[str, PacketTimeline]:
    """The :class:`PacketTimeline` of each trace id in ``traces`` (``<file>#<nnnn>``, as
    :func:`quicsm.extract.read.read_transitions` names them) that logs packets. Files holding
    none of ``traces`` are not read; only the chosen traces' packets are kept.

    Every record of a file holding a chosen trace is decoded: strict (``on_error="raise"``),
    the first bad record raises a :class:`~quicsm.core.errors.QlogError` naming the file and the
    record; lenient (``"skip"``), bad records are skipped and reported in ``diagnostics``."""
    from quicsm.extract.read import trace_id

    lenient = on_error == "skip"
    wanted = set(traces)
    out: dict[str, PacketTimeline] = {}
    for path in expand_paths(paths):
        file = str(path)
        prefix = file + "#"
        indices = {int(t[len(prefix) :]) for t in wanted if t.startswith(prefix)}
        if not indices:
            continue
        columns: dict[int, PacketColumns] = {}

        def sink(
            builder: TraceBuilder,
            indices: set[int] = indices,
            columns: dict[int, PacketColumns] = columns,
        ) -> PacketColumns | _Discard:
            if builder.index not in indices:
                return _Discard()  # another trace of the file: nothing of it is kept
            kept = columns[builder.index] = PacketColumns()
            builder.packet_hook = kept.packet
            builder.loss_hook = kept.loss
            return kept

        read = read_qlog(Path(path), full=True, lenient=lenient, limits=limits, metric_sink=sink)
        if read.kind in (CSV, PARQUET):
            continue
        if read.skipped and diagnostics is not None:
            n = read.skipped
            diagnostics.note(
                f"{file}: {n} record{'s' * (n != 1)} could not be decoded when its packets were "
                f"read and {'were' if n != 1 else 'was'} left out of the packets panel (first: "
                f"{read.problems[0] if read.problems else 'not recorded'})"
            )
        for trace in read.traces:
            kept = columns.get(trace.index)
            if kept is None or not len(kept.times):
                continue
            start = trace.first_time if trace.first_time is not None else 0.0
            out[trace_id(file, trace.index)] = kept.timeline(start)
            del columns[trace.index]  # its columns let go once its timeline is made
    return out


__all__ = ["PacketColumns", "PacketTimeline", "read_packet_timelines"]
