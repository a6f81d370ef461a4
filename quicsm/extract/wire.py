"""Congestion states from the wire: the eight states derived from packet events alone.

Captures converted to qlog (pcap2qlog), client-side logs and old producers log packets, their
ACK frames and their times, but no recovery metrics. This module rebuilds what a sender's loss
recovery and congestion controller would have seen (RFC 9002) from those packets:

- the **data direction** is the one whose ack-eliciting packets carry more bytes: a server's
  log sees its own sends (``packet_sent``) and the ACK frames of ``packet_received``; a client's
  log of a download sees the server's packets arriving and its own ACKs leaving, and infers the
  server's sender from them (its times are shifted by the one-way delays);
- **bytes in flight**: ack-eliciting data packets sent and not yet acknowledged (ACK ranges,
  per packet number space) or declared lost; the Initial space is dropped once Handshake
  packets flow, both handshake spaces once a 1-RTT packet is acknowledged (RFC 9001 4.9);
- **RTT**: when an ACK newly acknowledges its largest packet, the time since that packet was
  sent, less the ACK's ``ack_delay`` when that leaves at least the minimum RTT
  (RFC 9002 section 5.3); smoothed RTT and its variance as in section 5.3;
- **losses** (section 6.1): a packet three packet numbers below the largest acknowledged one, or
  sent more than 9/8 of max(smoothed, latest RTT) before it, checked on every ACK and, as the
  loss timer would, before every later packet; a loss of a packet sent after the current
  recovery period began starts a new one (``Recovery``, section 7.3.2), which ends when a
  packet sent after it is acknowledged. A packet declared lost and acknowledged later was
  reordered: it is counted (:attr:`WireResult.spurious`), and the recovery kept, as the stacks
  measured do with their fixed packet threshold;
- **probe timeouts** (section 6.2): an ack-eliciting send, with bytes in flight, after a silence
  of at least a PTO period (smoothed RTT + max(4 rttvar, 1 ms) + max_ack_delay, doubled per
  consecutive PTO) since the last ack-eliciting send or acknowledgement: ``TailLossProbe`` for
  the first, ``RetransmissionTimeout`` for later ones until an ACK;
- **the window**: the largest flight seen since the last congestion event (a cwnd-limited
  sender fills its window), at least the RFC 9002 initial window before the first one and half
  the previous window after each (section 7.3.2): a lower bound of the sender's window that
  its own sends raise;
- **slow start vs congestion avoidance**: slow start until the first congestion event, or until
  a round's flight stops growing (under 1.25x the previous round's while cwnd-limited); a
  window cap (``CongestionAvoidanceMaxed``) after :data:`PLATEAU_ROUNDS` cwnd-limited rounds in
  congestion avoidance whose flight did not grow;
- **application-limited** (section 7.8): an ACK that arrives while the bytes in flight before it
  left more than three datagrams of the window unused (in slow start, half the window counts as
  full, as quic-go's ``isCwndLimited``).

:func:`wire_states` turns a trace's packets into rows ``(time_ms, state, trigger)``;
:class:`PacketCollector` turns decoded packet events into :class:`Packet` rows as a file is
read (``TraceBuilder.packet_hook``). The agreement of these rows with the states instrumented
stacks logged is measured by ``benchmarks/wire_accuracy.py`` (docs/derive.md).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from quicsm.core.diagnostics import RecordProblem
from quicsm.extract.wire_quicgo import QuicGoController
from quicsm.qlog.blocks import DEFAULT_LIMITS, ReadLimits
from quicsm.qlog.source import FileRead, read_qlog
from quicsm.qlog.trace import TraceBuilder

INIT = "Init"
SLOW_START = "SlowStart"
CONGESTION_AVOIDANCE = "CongestionAvoidance"
APP_LIMITED = "ApplicationLimited"
RECOVERY = "Recovery"
TLP = "TailLossProbe"
RTO = "RetransmissionTimeout"
MAXED = "CongestionAvoidanceMaxed"

#: RFC 9002 section 6.1.1 kPacketThreshold
PACKET_THRESHOLD: Final[int] = 3
#: RFC 9002 section 6.1.2 kTimeThreshold
TIME_THRESHOLD: Final[float] = 9 / 8
#: RFC 9002 section 6.2.1 kGranularity, ms
GRANULARITY_MS: Final[float] = 1.0
#: RFC 9000 section 18.2 max_ack_delay default, ms
MAX_ACK_DELAY_MS: Final[float] = 25.0
#: RFC 9002 section 6.2.2: before an RTT sample, the PTO period starts from 333 ms
INITIAL_RTT_MS: Final[float] = 333.0
#: a send this share of the PTO period after the last one is a probe (timers fire late, never
#: early; the logged send time is after the timer's)
PTO_GAP_FRACTION: Final[float] = 0.9
#: at most this many packet numbers skipped at once are remembered (a larger jump is no
#: deliberate skip)
MAX_SKIPPED: Final[int] = 16
#: the largest packet number (RFC 9000 section 12.3: numbers are integers in 0..2^62-1)
MAX_PACKET_NUMBER: Final[int] = (1 << 62) - 1
#: what a packet number must be (the "expected" of a rejected packet or ACK record)
PACKET_NUMBER_EXPECTED: Final[str] = "a packet number from 0 to 2^62-1 (RFC 9000 section 12.3)"
#: datagram size assumed when a packet's size is not logged, bytes
DEFAULT_DATAGRAM: Final[int] = 1200
#: slack of the cwnd-limited test, datagrams (quic-go maxBurstPackets; RFC 9002 section 7.8)
BURST_DATAGRAMS: Final[int] = 3
#: the window after a congestion event, as a share of the one before (RFC 9002 section 7.3.2
#: kLossReductionFactor); a stack that cuts less shows it by sending more
LOSS_REDUCTION: Final[float] = 0.5
#: congestion avoidance with this many cwnd-limited rounds in a row whose flight did not grow
#: by half a datagram is at a window cap (Reno grows a datagram per round, RFC 9002 7.3.3)
PLATEAU_ROUNDS: Final[int] = 12
#: a round whose flight is below this multiple of the previous round's, while the window was
#: full, ends slow start (slow start doubles the flight per round)
SLOW_START_GROWTH: Final[float] = 1.25

#: models of a producer's own congestion controller, by profile name
#: (:mod:`quicsm.extract.wire_quicgo`)
CONTROLLERS: Final[dict[str, Callable[[str | None, str | None], QuicGoController]]] = {
    "quic-go": QuicGoController.for_version
}
#: the rows' triggers for each state a controller model logs
_MODEL_TRIGGERS: Final[dict[str, str]] = {
    SLOW_START: "wire:slow_start",
    CONGESTION_AVOIDANCE: "wire:congestion_avoidance",
    APP_LIMITED: "wire:not_cwnd_limited",
    RECOVERY: "wire:recovery",
}
#: states a controller model never shows, and why (the readers warn of them): a model's window
#: is the controller's own, so a flight that stops growing below it reads as application-limited
MODEL_NOT_DERIVED: Final[tuple[tuple[tuple[str, ...], str], ...]] = (
    (
        (MAXED,),
        "a window cap below the stack's own cannot be told from an application limit in "
        "packets alone",
    ),
)

_NOT_ELICITING: Final[frozenset[str]] = frozenset(
    {"ack", "ack_ecn", "padding", "connection_close", "ack_frequency_ack"}
)


@dataclass(frozen=True, slots=True)
class Packet:
    """One packet event: when, which way, its number space and number, size, the ACK ranges
    it carries (``(smallest, largest)``, inclusive) and their ack_delay, and whether it is
    ack-eliciting."""

    time: float
    sent: bool
    space: str
    number: int | None
    size: int
    acks: tuple[tuple[int, int], ...] = ()
    ack_delay_ms: float | None = None
    eliciting: bool = True
    #: connection IDs of the header (a capture's direction is told by them)
    dcid: str | None = None
    scid: str | None = None
    #: an ACK frame of the packet names more ranges than were logged (a capture's export)
    partial_acks: bool = False


def _int(value: object) -> int | None:
    if type(value) is int:  # the common case first (bool is not int's type)
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def _number(raw: object, what: str) -> int | None:
    """A packet number as logged (``None``: none logged, or not an integer); one outside
    0..2^62-1 makes its record a :class:`RecordProblem` (the reader names the file and record,
    or skips and counts the record when lenient)."""
    if type(raw) is int and 0 <= raw <= MAX_PACKET_NUMBER:  # the common case
        return raw
    value = _int(raw)
    if value is not None and not 0 <= value <= MAX_PACKET_NUMBER:
        got = f"{raw:.6g}" if isinstance(raw, float) else repr(raw)
        raise RecordProblem(None, f"{PACKET_NUMBER_EXPECTED} in {what}", got)
    return value


def _space(packet_type: object) -> str:
    kind = packet_type.lower() if isinstance(packet_type, str) else ""
    if kind.startswith("initial"):
        return "initial"
    if kind.startswith("handshake"):
        return "handshake"
    return "application"


def _values(value: object) -> list[int | None]:
    """A Wireshark field that occurs once (a value) or several times (a list of values)."""
    if value is None:
        return []
    return [_int(v) for v in value] if isinstance(value, list) else [_int(value)]


def _wireshark_ranges(frame: dict[str, Any], largest: int) -> tuple[list[tuple[int, int]], bool]:
    """The ACK ranges of a frame exported with Wireshark's field names (qlog 0.1, pcap2qlog):
    the largest acknowledged, the first ACK block (how many packets below it are acknowledged
    too), then ``ack_block_count`` pairs of a gap and an ACK block (draft-15 section 19.3.1:
    each block's largest is the previous block's smallest less the gap less 2, and it
    acknowledges that many packets below its largest). Also whether the frame names more
    blocks than were exported (a capture exported with its repeated fields merged away)."""
    first = _int(frame.get("frame_type.ack.fab", frame.get("frame_type.ack.first_ack_range")))
    smallest = largest - max(0, first or 0)
    if smallest < 0:
        return [], True
    out = [(smallest, largest)]
    gaps = _values(frame.get("frame_type.ack.gap"))
    blocks = _values(frame.get("frame_type.ack.ack_block", frame.get("frame_type.ack.ack_range")))
    count = _int(
        frame.get("frame_type.ack.ack_block_count", frame.get("frame_type.ack.ack_range_count"))
    )
    for gap, block in zip(gaps, blocks, strict=False):
        if gap is None or block is None or gap < 0 or block < 0:
            return out, True
        top = smallest - gap - 2
        smallest = top - block
        if smallest < 0:
            return out, True
        out.append((smallest, top))
    expected = count if count is not None and count >= 0 else len(out) - 1
    return out, len(out) - 1 < expected or len(gaps) != len(blocks)


def _ranges(frame: dict[str, Any]) -> tuple[tuple[tuple[int, int], ...], bool]:
    """The ACK ranges of a frame (``(smallest, largest)``, inclusive), and whether some of its
    ranges were not exported (qlog 0.1 captures: see :func:`_wireshark_ranges`)."""
    raw = frame.get("acked_ranges", frame.get("ack_ranges", frame.get("ranges")))
    out: list[tuple[int, int]] = []
    partial = False
    largest = _number(
        frame.get("frame_type.ack.largest_acknowledged"), "an ACK's largest acknowledged"
    )
    if largest is not None:
        out, partial = _wireshark_ranges(frame, largest)
    if isinstance(raw, list):
        for item in raw:
            if isinstance(item, list) and item:
                lo = _number(item[0], "an ACK range")
                hi = _number(item[-1], "an ACK range")
                if lo is not None and hi is not None:
                    out.append((min(lo, hi), max(lo, hi)))
            elif (n := _number(item, "an ACK range")) is not None:
                out.append((n, n))
    return tuple(out), partial


def packet_of(time: float, short: str, data: object, scale: float) -> Packet | None:
    """A :class:`Packet` from a decoded packet event (``None`` when it names no packet)."""
    if not isinstance(data, dict):
        return None
    header = data.get("header")
    header = header if isinstance(header, dict) else {}
    number = _number(header.get("packet_number", data.get("packet_number")), "packet_number")
    dcid, scid = header.get("dcid"), header.get("scid")
    raw = data.get("raw")
    size = None
    if isinstance(raw, dict):
        size = _int(raw.get("length"))
    if size is None:
        size = _int(
            header.get(
                "packet_size",
                header.get(
                    "length",
                    data.get("packet_size", data.get("length", header.get("payload_length"))),
                ),
            )
        )
    frames = data.get("frames")
    acks: list[tuple[int, int]] = []
    partial = False
    delay: float | None = None
    eliciting = True
    if isinstance(frames, list) and frames:
        eliciting = False
        for frame in frames:
            if not isinstance(frame, dict):
                continue
            kind = str(frame.get("frame_type", frame.get("type", ""))).lower()
            if kind in ("ack", "ack_ecn"):
                ranges, cut = _ranges(frame)
                acks.extend(ranges)
                partial = partial or cut
                d = frame.get("ack_delay")
                if isinstance(d, int | float) and not isinstance(d, bool):
                    delay = float(d) * scale
            if kind not in _NOT_ELICITING:
                eliciting = True
    return Packet(
        time=time,
        sent=short in ("packet_sent", "packet_tx"),
        # draft-01 "packet_type" (pcap2qlog: "type" beside the header), qlog 0.1 header "type"
        space=_space(
            header.get("packet_type", data.get("packet_type", header.get("type", data.get("type"))))
        ),
        number=number,
        size=size if size is not None and size > 0 else DEFAULT_DATAGRAM,
        acks=tuple(acks),
        ack_delay_ms=delay,
        eliciting=eliciting,
        partial_acks=partial,
        dcid=dcid if isinstance(dcid, str) and dcid else None,
        scid=scid if isinstance(scid, str) and scid else None,
    )


def lost_packet_of(data: object) -> tuple[str, int | None, str | None]:
    """The number space, packet number and trigger of a decoded ``packet_lost`` event (its
    header, or aioquic's flat ``type`` and ``packet_number``)."""
    if not isinstance(data, dict):
        return "application", None, None
    header = data.get("header")
    header = header if isinstance(header, dict) else {}
    kind = header.get("packet_type", data.get("packet_type", data.get("type")))
    if kind is None:
        kind = data.get("packet_number_space")
    trigger = data.get("trigger")
    number = _number(header.get("packet_number", data.get("packet_number")), "packet_number")
    return _space(kind), number, trigger if isinstance(trigger, str) else None


@dataclass
class PacketCollector:
    """Collects every trace's packets while a file is read in full (a ``metric_sink`` of
    :func:`quicsm.qlog.source.read_qlog` that keeps no metrics)."""

    packets: dict[int, list[Packet]] = field(default_factory=dict)

    def __call__(self, builder: TraceBuilder) -> _NoMetrics:
        kept = self.packets.setdefault(builder.index, [])

        def hook(time: float, short: str, data: object, scale: float) -> None:
            packet = packet_of(time, short, data, scale)
            if packet is not None:
                kept.append(packet)

        builder.packet_hook = hook
        return _NoMetrics()


class _NoMetrics:
    def __call__(self, event: object) -> object:
        return None

    def wanted(self) -> bool:
        return False


@dataclass
class PacketRead:
    """Every trace's packets (by the trace's position in its file), and what the read of the
    file skipped (its traces let go: ``read.traces`` is empty)."""

    packets: dict[int, list[Packet]]
    read: FileRead

    @property
    def skipped(self) -> int:
        return self.read.skipped

    @property
    def first_problem(self) -> str | None:
        return str(self.read.problems[0]) if self.read.problems else None


def read_packets(
    path: str | Path, *, limits: ReadLimits = DEFAULT_LIMITS, lenient: bool = True
) -> PacketRead:
    """Read every record of ``path`` and keep its packets. The readers' fast path checks only
    the framing of packet records: a packet record that does not decode (or names a packet
    number outside 0..2^62-1) raises :class:`~quicsm.core.errors.QlogError` here, naming the
    file and record, or when ``lenient`` is skipped and counted (the caller reports it:
    :func:`quicsm.extract.loading.report_skipped`)."""
    collector = PacketCollector()
    read = read_qlog(Path(path), full=True, lenient=lenient, limits=limits, metric_sink=collector)
    read.traces = []
    return PacketRead(collector.packets, read)


# -- the sender, rebuilt ------------------------------------------------------------------------


@dataclass
class _Round:
    """One round trip of the sender: it ends when its last packet is acknowledged."""

    end_number: int | None = None
    max_flight: float = 0.0
    cwnd_limited: bool = False


@dataclass
class WireResult:
    """The rows derived from a trace's packets and what was seen."""

    rows: list[tuple[float, str, str]]
    #: the packets of the data direction were the log owner's own sends
    own_sends: bool
    data_packets: int
    acks: int
    losses: int
    probes: int
    #: losses later acknowledged (reordering; counted, the recovery kept)
    spurious: int = 0
    #: a capture seen from the network: directions were told by connection IDs, and
    #: ``own_sends`` means the client sent the data
    captured: bool = False
    #: ack-eliciting packets of the data direction that log no packet number (an ACK cannot
    #: name them: they are left out)
    unnumbered: int = 0
    #: ACKs of the data direction that name more ranges than were logged
    partial_acks: int = 0
    #: states these rows never show, and why: ``(states, reason)`` (a controller model's,
    #: :data:`MODEL_NOT_DERIVED`; none for the producer-independent estimate)
    not_derived: tuple[tuple[tuple[str, ...], str], ...] = ()
    #: the producer whose controller model gave the states (``None``: the estimate)
    model: str | None = None


def from_one_side(packets: Sequence[Packet]) -> list[Packet]:
    """Packets of a capture seen from the network (every one logged as received, or every one
    as sent), given a direction by their connection IDs: the first packet's source connection
    ID is its sender's (the client's Initial), so packets addressed to it travel back. Other
    lists are returned as they are."""
    if not packets or len({p.sent for p in packets}) != 1:
        return list(packets)
    first = next((p.scid for p in packets if p.scid), None)
    if first is None:
        return list(packets)
    return [replace(p, sent=p.dcid != first) for p in packets]


def data_direction(packets: Sequence[Packet]) -> bool:
    """``True`` when the log owner sent the data (more ack-eliciting bytes sent than
    received)."""
    sent = sum(p.size for p in packets if p.sent and p.eliciting)
    received = sum(p.size for p in packets if not p.sent and p.eliciting)
    return sent >= received


Key = tuple[str, int]


class _Sender:
    """The data sender's loss recovery and window, rebuilt from its packets and ACKs; with a
    ``model`` of the producer's own controller (:data:`CONTROLLERS`), its states are that
    model's."""

    def __init__(self, model: QuicGoController | None = None, *, own: bool = True) -> None:
        self.model = model
        #: the log owner's own sends: a packet number it never used was skipped (quic-go skips
        #: some on purpose), and is not counted by the packet threshold
        self.own = own
        self.highest_number: dict[str, int] = {}
        self.skipped: dict[str, list[int]] = {}
        self.rows: list[tuple[float, str, str]] = []
        self.state = INIT
        self.outstanding: dict[Key, tuple[float, int]] = {}
        #: packets declared lost: if one is acknowledged later, it was reordered
        self.lost: dict[Key, float] = {}
        self.largest_acked: dict[str, int] = {}
        self.packet_threshold = PACKET_THRESHOLD
        #: a model that adapts loss detection to reordering (quic-go v0.65+): after a spurious
        #: loss the application space's packet threshold is off, and its time threshold,
        #: (8 + eighths) / 8 RTTs, doubles its eighths when a spurious loss came later than it
        self.adaptive = model is not None and model.adaptive_detection
        self.packet_threshold_off = False
        self.time_eighths = 1
        self.relax_from: int | None = None
        self.in_flight = 0.0
        self.datagram = float(DEFAULT_DATAGRAM)
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.min_rtt: float | None = None
        self.latest_rtt: float | None = None
        self.recovery_start: float | None = None
        self.in_slow_start = True
        self.cwnd = 10.0 * DEFAULT_DATAGRAM  # RFC 9002 section 7.2
        self.flight_since_event = 0.0
        self.consecutive_ptos = 0
        self.last_activity: float | None = None  # last ack-eliciting send or acknowledgement
        self.round = _Round()
        self.previous_round: _Round | None = None
        #: consecutive cwnd-limited rounds in congestion avoidance whose flight did not grow
        self.flat_rounds = 0
        self.plateau = 0.0
        self.last_number: dict[str, int] = {}
        self.dropped_initial = self.confirmed = False
        self.n_data = self.n_acks = self.n_lost = self.n_probes = self.n_spurious = 0

    def enter(self, time: float, new: str, trigger: str) -> None:
        if new != self.state:
            self.rows.append((time, new, trigger))
            self.state = new

    def _drop(self, space: str) -> None:
        keys = [k for k in self.outstanding if k[0] == space]
        self.in_flight = max(
            0.0, self.in_flight - float(sum(self.outstanding.pop(k)[1] for k in keys))
        )

    def _pto_period(self) -> float:
        base = self.srtt if self.srtt is not None else INITIAL_RTT_MS
        var = self.rttvar if self.srtt is not None else INITIAL_RTT_MS / 2
        return (base + max(4 * var, GRANULARITY_MS) + MAX_ACK_DELAY_MS) * (
            2.0 ** min(self.consecutive_ptos, 60)
        )

    def _loss_delay(self, space: str = "application") -> float:
        rtt = max(self.srtt or 0.0, self.latest_rtt or 0.0)
        if self.adaptive and space == "application":
            return max((8 + self.time_eighths) / 8 * rtt, GRANULARITY_MS)
        return TIME_THRESHOLD * max(rtt, GRANULARITY_MS)

    def _reordering(
        self, spurious: list[tuple[int, float]], t: float, ack_delay: float | None
    ) -> None:
        """quic-go v0.65 ``detectSpuriousLosses``: a spurious loss turns the packet threshold
        off; one acknowledged later than the time threshold (from the ACK's send time, its
        ack_delay taken off) doubles the threshold's eighths, up to 8."""
        self.packet_threshold_off = True
        sent_by = t - min(ack_delay or 0.0, MAX_ACK_DELAY_MS)
        late = max(
            (
                sent_by - sent
                for n, sent in spurious
                if self.relax_from is not None and n >= self.relax_from
            ),
            default=0.0,
        )
        if late > self._loss_delay("application") and self.time_eighths < 8:
            self.time_eighths = min(2 * self.time_eighths, 8)
            self.relax_from = None

    def send(self, p: Packet) -> None:
        t = p.time
        assert p.number is not None
        self.loss_timer(t)
        self.n_data += 1
        if self.datagram < p.size <= 1500:
            self.datagram = float(p.size)
        if (
            self.in_flight > 0
            and self.last_activity is not None
            and p.space == "application"
            and t - self.last_activity >= PTO_GAP_FRACTION * self._pto_period()
        ):
            self.consecutive_ptos += 1
            self.n_probes += 1
            new = TLP if self.consecutive_ptos == 1 else RTO
            self.enter(t, new, "wire:probe_after_silence")
        if p.space != "initial" and not self.dropped_initial:
            # RFC 9001 section 4.9.1: Initial keys are discarded once Handshake packets flow;
            # what was in flight in that space no longer counts
            self.dropped_initial = True
            self._drop("initial")
        self.outstanding[(p.space, p.number)] = (t, p.size)
        if self.adaptive and p.space == "application" and self.relax_from is None:
            self.relax_from = p.number
        self.numbered(p.space, p.number)
        self.last_number[p.space] = p.number
        self.in_flight += p.size
        if self.model is not None:
            self.model.sent(p.number, p.size)
        self.flight_since_event = max(self.flight_since_event, self.in_flight)
        self.round.max_flight = max(self.round.max_flight, self.in_flight)
        if self.round.end_number is None and p.space == "application":
            self.round.end_number = p.number
        if self.in_flight + BURST_DATAGRAMS * self.datagram >= self.cwnd:
            self.round.cwnd_limited = True
        self.last_activity = t

    def numbered(self, space: str, number: int) -> None:
        """A packet number the sender used (any packet, ack-eliciting or not)."""
        before = self.highest_number.get(space)
        if before is not None and number > before + 1 and self.own:
            gaps = self.skipped.setdefault(space, [])
            gaps.extend(range(before + 1, min(number, before + 1 + MAX_SKIPPED)))
            if len(gaps) > 4 * MAX_SKIPPED:  # bounded: forget the oldest
                del gaps[: 2 * MAX_SKIPPED]
        if before is None or number > before:
            self.highest_number[space] = number

    def _distance(self, space: str, largest: int, number: int) -> int:
        """Packets sent from ``number`` (excluded) to ``largest``: their numbers' difference
        less the numbers skipped between them (quic-go's ``sentPacketHistory.Difference``)."""
        gaps = self.skipped.get(space)
        if not gaps:
            return largest - number
        return largest - number - (bisect_left(gaps, largest) - bisect_right(gaps, number))

    def loss_timer(self, now: float) -> None:
        """RFC 9002 section 6.1.2: packets below the largest acknowledged one are lost once
        the time threshold has passed, whether or not another ACK came."""
        if not self.largest_acked or self.srtt is None:
            return
        delays = {space: self._loss_delay(space) for space in self.largest_acked}
        due = [
            (sent + delays[key[0]], key)
            for key, (sent, _) in self.outstanding.items()
            if key[0] in delays
            and key[1] < self.largest_acked[key[0]]
            and sent + delays[key[0]] <= now
        ]
        if due:
            when = max(d for d, _ in due)
            if self._declare([k for _, k in due]):
                self._congestion_event(when)

    def _declare(self, keys: list[Key]) -> bool:
        """Declare ``keys`` lost; whether one was sent after the recovery period began."""
        new_episode = False
        for key in sorted(keys, key=lambda k: k[1]):
            sent_at, size = self.outstanding.pop(key)
            self.in_flight = max(0.0, self.in_flight - size)
            self.lost[key] = sent_at
            self.n_lost += 1
            if self.model is not None:
                new_episode = self.model.lost(key[1]) or new_episode
            elif self.recovery_start is None or sent_at > self.recovery_start:
                new_episode = True
        if len(self.lost) > 10_000:  # bounded: forget the oldest declarations
            for key in list(self.lost)[:5_000]:
                del self.lost[key]
        return new_episode

    def _congestion_event(self, t: float) -> None:
        self.recovery_start = t
        self.in_slow_start = False
        self.cwnd = max(self.cwnd * LOSS_REDUCTION, 2 * self.datagram)
        self.flight_since_event = 0.0
        self.flat_rounds = 0
        self.enter(t, RECOVERY, "wire:loss")

    def ack(self, p: Packet) -> None:
        t = p.time
        self.loss_timer(t)
        space = p.space
        newly: list[tuple[int, float, int]] = []
        spurious: list[tuple[int, float]] = []  # (number, sent at)
        for lo, hi in p.acks:
            if hi - lo >= len(self.outstanding) + len(self.lost):
                # a range wider than what is known: look up what is known (a hostile ACK
                # range costs no more than the packets in flight)
                numbers: Iterable[int] = sorted(
                    k[1]
                    for k in (*self.outstanding, *self.lost)
                    if k[0] == space and lo <= k[1] <= hi
                )
            else:
                numbers = range(lo, hi + 1)
            for n in numbers:
                key = (space, n)
                found = self.outstanding.pop(key, None)
                if found is not None:
                    newly.append((n, found[0], found[1]))
                elif key in self.lost:
                    # declared lost, then acknowledged: reordered. Counted only: RFC 9002
                    # section 6.1.1 allows an adaptive threshold, but the stacks measured
                    # (quic-go, aioquic) keep kPacketThreshold and still cut their window
                    spurious.append((n, self.lost.pop(key)))
                    self.n_spurious += 1
        adapting = self.adaptive and space == "application" and bool(spurious)
        if not newly:
            if adapting and self.model is not None:
                self._reordering(spurious, t, p.ack_delay_ms)
                for n, _ in spurious:
                    self.model.spurious(n)
                self.enter(t, self.model.state, "wire:spurious_loss")
            return
        self.n_acks += 1
        if space == "application" and not self.confirmed:
            # an acknowledged 1-RTT packet confirms the handshake (RFC 9001 section 4.1.2):
            # the Initial and Handshake spaces are discarded with their bytes in flight
            self.confirmed = self.dropped_initial = True
            self._drop("initial")
            self._drop("handshake")
        prior_in_flight = self.in_flight
        self.in_flight = max(0.0, self.in_flight - float(sum(s for _, _, s in newly)))
        largest = max(hi for _, hi in p.acks)
        if space not in self.largest_acked or largest > self.largest_acked[space]:
            self.largest_acked[space] = largest
        top = max(newly)
        if top[0] == largest and self._rtt_sample(t - top[1], p.ack_delay_ms) and self.model:
            assert self.latest_rtt is not None and self.min_rtt is not None
            self.model.rtt_sample(self.latest_rtt, self.min_rtt)
        self.consecutive_ptos = 0
        self.last_activity = t
        if adapting:
            self._reordering(spurious, t, p.ack_delay_ms)
        # losses (RFC 9002 section 6.1)
        delay = self._loss_delay(space)
        top_acked = self.largest_acked[space]
        by_number = not (self.packet_threshold_off and space == "application")
        lost = [
            key
            for key, (sent_at, _) in self.outstanding.items()
            if key[0] == space
            and key[1] < top_acked
            and (
                t - sent_at >= delay
                or (by_number and self._distance(space, top_acked, key[1]) >= self.packet_threshold)
            )
        ]
        new_episode = self._declare(lost) if lost else False
        if self.model is not None:
            if adapting:  # reported after this ACK's new congestion events, as quic-go does
                for n, _ in spurious:
                    self.model.spurious(n)
            for n, _, _ in sorted(newly):
                self.model.acked(n, prior_in_flight)
            if new_episode:
                self._congestion_event(t)
            else:
                self.enter(t, self.model.state, _MODEL_TRIGGERS[self.model.state])
            return
        # recovery ends when a packet sent after it began is acknowledged
        if self.recovery_start is not None and any(
            sent > self.recovery_start for _, sent, _ in newly
        ):
            self.recovery_start = None
        if new_episode:
            self._congestion_event(t)
            return
        self.cwnd = max(self.cwnd, self.flight_since_event)
        if space == "application":
            self._round_end(largest)
        if self.recovery_start is not None:
            self.enter(t, RECOVERY, "wire:recovery")
            return
        cwnd = self.cwnd
        limited = prior_in_flight + BURST_DATAGRAMS * self.datagram < cwnd and not (
            self.in_slow_start and prior_in_flight > cwnd / 2
        )
        if limited:
            self.enter(t, APP_LIMITED, "wire:not_cwnd_limited")
        elif self.in_slow_start:
            self.enter(t, SLOW_START, "wire:slow_start")
        elif self.flat_rounds >= PLATEAU_ROUNDS:
            self.enter(t, MAXED, "wire:window_plateau")
        else:
            self.enter(t, CONGESTION_AVOIDANCE, "wire:congestion_avoidance")

    def _rtt_sample(self, sample: float, ack_delay: float | None) -> bool:
        """RFC 9002 section 5.3; whether the sample was taken."""
        if sample <= 0:
            return False
        self.min_rtt = sample if self.min_rtt is None else min(self.min_rtt, sample)
        delay = ack_delay or 0.0
        if sample - delay >= self.min_rtt:
            sample -= delay
        self.latest_rtt = sample
        if self.srtt is None:
            self.srtt, self.rttvar = sample, sample / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - sample)
            self.srtt = 0.875 * self.srtt + 0.125 * sample
        return True

    def _round_end(self, largest: int) -> None:
        """Slow start ends when a cwnd-limited round's flight stops growing; in congestion
        avoidance, cwnd-limited rounds whose flight stays flat mean the window is capped."""
        end = self.round.end_number
        if end is None or largest < end:
            return
        done, before = self.round, self.previous_round
        if before is not None and done.cwnd_limited and before.cwnd_limited:
            if self.in_slow_start and done.max_flight < SLOW_START_GROWTH * before.max_flight:
                self.in_slow_start = False
            if not self.in_slow_start:
                if done.max_flight <= self.plateau and self.plateau > 0:
                    self.flat_rounds += 1
                else:
                    self.flat_rounds = 0
                    self.plateau = done.max_flight
        else:
            self.flat_rounds = 0
            self.plateau = done.max_flight
        self.previous_round = done
        self.round = _Round(end_number=self.last_number.get("application"))


def wire_states(
    packets: Iterable[Packet],
    *,
    own_sends: bool | None = None,
    producer: str | None = None,
    version: str | None = None,
    cc: str | None = None,
) -> WireResult:
    """The congestion states of the sender of a trace's data, from its packets alone.
    ``producer`` names the log's producer profile: when the log owner sent the data and
    :data:`CONTROLLERS` has a model of that producer's controller, its states are the model's
    (what the producer would log; ``version``, the trace's ``code_version``, and ``cc``, its
    ``cc_algorithm``, pick the release's and the controller's behaviour); otherwise the
    estimate described in this module's docstring."""
    by_time = sorted(packets, key=lambda p: p.time)  # stable: file order within a time
    ordered = from_one_side(by_time)
    captured = any(a.sent != b.sent for a, b in zip(by_time, ordered, strict=True))
    if own_sends is None:
        own_sends = data_direction(ordered)
    model = CONTROLLERS.get(producer or "") if own_sends else None
    sender = _Sender(model(version, cc) if model is not None else None, own=own_sends)
    unnumbered = partial = 0
    for p in ordered:
        if p.sent == own_sends:
            if p.eliciting and p.number is not None:
                sender.send(p)
            elif p.eliciting:
                unnumbered += 1
            elif p.number is not None:
                sender.numbered(p.space, p.number)
        elif p.acks:
            partial += p.partial_acks
            sender.ack(p)
    return WireResult(
        sender.rows,
        own_sends,
        sender.n_data,
        sender.n_acks,
        sender.n_lost,
        sender.n_probes,
        sender.n_spurious,
        captured,
        unnumbered,
        partial,
        MODEL_NOT_DERIVED if model is not None else (),
        producer if model is not None else None,
    )


def tail_probes(
    packets: Iterable[Packet], *, own_sends: bool | None = None
) -> list[tuple[float, str, str]]:
    """The probe timeouts after a trace's last acknowledgement: the rows of
    :func:`wire_states` from the last ACK of the data direction on (empty when the sender
    sent no probe after it)."""
    result = wire_states(packets, own_sends=own_sends)
    out: list[tuple[float, str, str]] = []
    for row in reversed(result.rows):
        if row[1] not in (TLP, RTO):
            break
        out.append(row)
    return out[::-1]
