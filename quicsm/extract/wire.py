"""Congestion states from the wire: the eight states derived from packet events alone.

Captures converted to qlog (pcap2qlog), client-side logs and old producers log packets, their
ACK frames and their times, but no recovery metrics. This module rebuilds what a sender's loss
recovery and congestion controller would have seen (RFC 9002) from those packets:

- the **data direction** is the one whose ack-eliciting packets carry more bytes: a server's
  log sees its own sends (``packet_sent``) and the ACK frames of ``packet_received``; a client's
  log of a download sees the server's packets arriving and its own ACKs leaving, and infers the
  server's sender from them (its times are shifted by the one-way delays);
- **bytes in flight**: ack-eliciting data packets sent and not yet acknowledged (ACK ranges,
  per packet number space) or declared lost;
- **RTT**: when an ACK newly acknowledges its largest packet, the time since that packet was
  sent, less the ACK's ``ack_delay`` when that leaves at least the minimum RTT
  (RFC 9002 section 5.3); smoothed RTT and its variance as in section 5.3;
- **losses** (section 6.1): a packet three packet numbers below the largest acknowledged one, or
  sent more than 9/8 of max(smoothed, latest RTT) before it; a loss of a packet sent after the
  current recovery period began starts a new one (``Recovery``, section 7.3.2), which ends when a
  packet sent after it is acknowledged;
- **probe timeouts** (section 6.2): an ack-eliciting send, with bytes in flight, after a silence
  of at least a PTO period (smoothed RTT + max(4 rttvar, 1 ms) + max_ack_delay, doubled per
  consecutive PTO) since the last ack-eliciting send or acknowledgement: ``TailLossProbe`` for
  the first, ``RetransmissionTimeout`` for later ones until an ACK;
- **the window**: an RFC 9002 NewReno window (initial window, growth by the bytes acknowledged
  in slow start and one datagram per window in congestion avoidance, halved on a congestion
  event), never below the largest flight seen since the last congestion event (a stack whose
  window is larger shows it by sending more);
- **slow start vs congestion avoidance**: slow start until the first congestion event, or until
  a round's flight stops growing (under 1.25x the previous round's while cwnd-limited);
- **application-limited** (section 7.8): an ACK that arrives while the bytes in flight before it
  left more than three datagrams of the window unused (in slow start, half the window counts as
  full, as quic-go's ``isCwndLimited``).

:func:`wire_states` turns a trace's packets into rows ``(time_ms, state, trigger)``;
:class:`PacketCollector` turns decoded packet events into :class:`Packet` rows as a file is
read (``TraceBuilder.packet_hook``). The agreement of these rows with the states instrumented
stacks logged is measured by ``benchmarks/wire_accuracy.py`` (docs/derive.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from quicsm.qlog.blocks import DEFAULT_LIMITS, ReadLimits
from quicsm.qlog.source import read_qlog
from quicsm.qlog.trace import TraceBuilder

INIT = "Init"
SLOW_START = "SlowStart"
CONGESTION_AVOIDANCE = "CongestionAvoidance"
APP_LIMITED = "ApplicationLimited"
RECOVERY = "Recovery"
TLP = "TailLossProbe"
RTO = "RetransmissionTimeout"

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
#: datagram size assumed when a packet's size is not logged, bytes
DEFAULT_DATAGRAM: Final[int] = 1200
#: slack of the cwnd-limited test, datagrams (quic-go maxBurstPackets; RFC 9002 section 7.8)
BURST_DATAGRAMS: Final[int] = 3
#: a round whose flight is below this multiple of the previous round's, while the window was
#: full, ends slow start (slow start doubles the flight per round)
SLOW_START_GROWTH: Final[float] = 1.25

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


def _int(value: object) -> int | None:
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


def _space(packet_type: object) -> str:
    kind = packet_type.lower() if isinstance(packet_type, str) else ""
    if kind.startswith("initial"):
        return "initial"
    if kind.startswith("handshake"):
        return "handshake"
    return "application"


def _ranges(frame: dict[str, Any]) -> tuple[tuple[int, int], ...]:
    raw = frame.get("acked_ranges", frame.get("ack_ranges", frame.get("ranges")))
    out: list[tuple[int, int]] = []
    if isinstance(raw, list):
        for item in raw:
            if isinstance(item, list) and item:
                lo, hi = _int(item[0]), _int(item[-1])
                if lo is not None and hi is not None:
                    out.append((min(lo, hi), max(lo, hi)))
            elif (n := _int(item)) is not None:
                out.append((n, n))
    return tuple(out)


def packet_of(time: float, short: str, data: object, scale: float) -> Packet | None:
    """A :class:`Packet` from a decoded packet event (``None`` when it names no packet)."""
    if not isinstance(data, dict):
        return None
    header = data.get("header")
    header = header if isinstance(header, dict) else {}
    number = _int(header.get("packet_number", data.get("packet_number")))
    raw = data.get("raw")
    size = None
    if isinstance(raw, dict):
        size = _int(raw.get("length"))
    if size is None:
        size = _int(
            header.get(
                "packet_size",
                header.get("length", data.get("packet_size", data.get("length"))),
            )
        )
    frames = data.get("frames")
    acks: list[tuple[int, int]] = []
    delay: float | None = None
    eliciting = True
    if isinstance(frames, list) and frames:
        eliciting = False
        for frame in frames:
            if not isinstance(frame, dict):
                continue
            kind = str(frame.get("frame_type", frame.get("type", ""))).lower()
            if kind in ("ack", "ack_ecn"):
                acks.extend(_ranges(frame))
                d = frame.get("ack_delay")
                if isinstance(d, int | float) and not isinstance(d, bool):
                    delay = float(d) * scale
            if kind not in _NOT_ELICITING:
                eliciting = True
    return Packet(
        time=time,
        sent=short in ("packet_sent", "packet_tx"),
        space=_space(header.get("packet_type", data.get("packet_type"))),
        number=number,
        size=size if size is not None and size > 0 else DEFAULT_DATAGRAM,
        acks=tuple(acks),
        ack_delay_ms=delay,
        eliciting=eliciting,
    )


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


def read_packets(
    path: str | Path, *, limits: ReadLimits = DEFAULT_LIMITS
) -> dict[int, list[Packet]]:
    """Every trace's packets (by the trace's position in the file), read leniently: a record
    the strict reading of the same file accepted is read the same way here."""
    collector = PacketCollector()
    read_qlog(Path(path), full=True, lenient=True, limits=limits, metric_sink=collector)
    return collector.packets


# -- the sender, rebuilt ------------------------------------------------------------------------


@dataclass
class _Round:
    end_number: int | None = None  # the round ends when this packet (or a later one) is acked
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


def data_direction(packets: Sequence[Packet]) -> bool:
    """``True`` when the log owner sent the data (more ack-eliciting bytes sent than
    received)."""
    sent = sum(p.size for p in packets if p.sent and p.eliciting)
    received = sum(p.size for p in packets if not p.sent and p.eliciting)
    return sent >= received


def wire_states(packets: Iterable[Packet], *, own_sends: bool | None = None) -> WireResult:
    """The congestion states of the sender of a trace's data, from its packets alone."""
    packets = sorted(packets, key=lambda p: p.time)  # stable: file order within a time
    if own_sends is None:
        own_sends = data_direction(packets)
    rows: list[tuple[float, str, str]] = []
    state = INIT

    def enter(time: float, new: str, trigger: str) -> None:
        nonlocal state
        if new != state:
            rows.append((time, new, trigger))
            state = new

    outstanding: dict[tuple[str, int], tuple[float, int]] = {}
    largest_acked: dict[str, int] = {}
    in_flight = 0.0
    datagram = float(DEFAULT_DATAGRAM)
    srtt: float | None = None
    rttvar = 0.0
    min_rtt: float | None = None
    latest_rtt: float | None = None
    recovery_start: float | None = None
    in_slow_start = True
    cwnd = 10.0 * DEFAULT_DATAGRAM  # RFC 9002 section 7.2, refined by the datagram size
    flight_since_event = 0.0
    consecutive_ptos = 0
    last_activity: float | None = None  # last ack-eliciting send or acknowledgement
    round_ = _Round()
    previous_round: _Round | None = None
    last_number: dict[str, int] = {}
    n_data = n_acks = n_lost = n_probes = 0
    dropped_initial = confirmed = False

    for p in packets:
        t = p.time
        if p.sent == own_sends:
            # a packet of the data direction
            if not p.eliciting or p.number is None:
                continue
            n_data += 1
            if p.size > datagram and p.size <= 1500:
                datagram = float(p.size)
            if (
                in_flight > 0
                and last_activity is not None
                and p.space == "application"
            ):
                base = srtt if srtt is not None else INITIAL_RTT_MS
                var = rttvar if srtt is not None else INITIAL_RTT_MS / 2
                period = (base + max(4 * var, GRANULARITY_MS) + MAX_ACK_DELAY_MS) * (
                    2.0 ** min(consecutive_ptos, 60)
                )
                if t - last_activity >= PTO_GAP_FRACTION * period:
                    consecutive_ptos += 1
                    n_probes += 1
                    enter(t, TLP if consecutive_ptos == 1 else RTO, "wire:probe_after_silence")
            if p.space != "initial" and not dropped_initial:
                # RFC 9001 section 4.9.1: Initial keys are discarded once Handshake packets
                # flow; what was in flight in that space no longer counts
                dropped_initial = True
                in_flight -= _drop_space(outstanding, "initial")
            outstanding[(p.space, p.number)] = (t, p.size)
            last_number[p.space] = p.number
            in_flight += p.size
            flight_since_event = max(flight_since_event, in_flight)
            round_.max_flight = max(round_.max_flight, in_flight)
            if round_.end_number is None and p.space == "application":
                round_.end_number = p.number
            if in_flight + BURST_DATAGRAMS * datagram >= cwnd:
                round_.cwnd_limited = True
            last_activity = t
            continue
        if not p.acks:
            continue
        # an ACK frame for the data direction
        space = p.space
        newly: list[tuple[int, float, int]] = []
        for lo, hi in p.acks:
            if hi - lo > 100_000:
                lo = hi - 100_000  # a hostile range: at most what could be outstanding
            for n in range(lo, hi + 1):
                found = outstanding.pop((space, n), None)
                if found is not None:
                    newly.append((n, found[0], found[1]))
        if not newly:
            continue
        n_acks += 1
        if space == "application" and not confirmed:
            # an acknowledged 1-RTT packet confirms the handshake (RFC 9001 section 4.1.2):
            # the Initial and Handshake spaces are discarded with their bytes in flight
            confirmed = dropped_initial = True
            in_flight -= _drop_space(outstanding, "initial") + _drop_space(outstanding, "handshake")
        prior_in_flight = in_flight
        acked_bytes = float(sum(size for _, _, size in newly))
        in_flight = max(0.0, in_flight - acked_bytes)
        largest = max(hi for _, hi in p.acks)
        if largest > largest_acked.get(space, -1):
            largest_acked[space] = largest
        top = max(newly)
        if top[0] == largest:
            sample = t - top[1]
            if sample > 0:
                min_rtt = sample if min_rtt is None else min(min_rtt, sample)
                delay = p.ack_delay_ms or 0.0
                if sample - delay >= min_rtt:
                    sample -= delay
                latest_rtt = sample
                if srtt is None:
                    srtt, rttvar = sample, sample / 2
                else:
                    rttvar = 0.75 * rttvar + 0.25 * abs(srtt - sample)
                    srtt = 0.875 * srtt + 0.125 * sample
        consecutive_ptos = 0
        last_activity = t
        # losses (RFC 9002 section 6.1)
        lost_after_recovery = False
        threshold = TIME_THRESHOLD * max(srtt or 0.0, latest_rtt or 0.0, GRANULARITY_MS)
        for key in [k for k in outstanding if k[0] == space]:
            sent_at, size = outstanding[key]
            if key[1] > largest_acked[space]:
                continue
            if key[1] <= largest_acked[space] - PACKET_THRESHOLD or t - sent_at >= threshold:
                del outstanding[key]
                in_flight = max(0.0, in_flight - size)
                n_lost += 1
                if recovery_start is None or sent_at > recovery_start:
                    lost_after_recovery = True
        # recovery ends when a packet sent after it began is acknowledged
        if recovery_start is not None and any(sent > recovery_start for _, sent, _ in newly):
            recovery_start = None
        # the window (RFC 9002 section 7.3, NewReno)
        if recovery_start is None and (
            round_.cwnd_limited or prior_in_flight + BURST_DATAGRAMS * datagram >= cwnd
        ):
            if in_slow_start:
                cwnd += acked_bytes
            else:
                cwnd += datagram * acked_bytes / cwnd
        if lost_after_recovery:
            recovery_start = t
            in_slow_start = False
            cwnd = max(cwnd / 2, 2 * datagram)
            flight_since_event = in_flight
            enter(t, RECOVERY, "wire:loss")
            continue
        cwnd = max(cwnd, flight_since_event)
        # rounds: slow start ends when a cwnd-limited round's flight stops growing
        end = round_.end_number
        if space == "application" and end is not None and largest >= end:
            if (
                in_slow_start
                and previous_round is not None
                and round_.cwnd_limited
                and previous_round.cwnd_limited
                and round_.max_flight < SLOW_START_GROWTH * previous_round.max_flight
            ):
                in_slow_start = False
            previous_round = round_
            round_ = _Round(end_number=last_number.get("application"))
        if recovery_start is not None:
            enter(t, RECOVERY, "wire:recovery")
            continue
        limited = prior_in_flight + BURST_DATAGRAMS * datagram < cwnd and not (
            in_slow_start and prior_in_flight > cwnd / 2
        )
        if limited:
            enter(t, APP_LIMITED, "wire:not_cwnd_limited")
        elif in_slow_start:
            enter(t, SLOW_START, "wire:slow_start")
        else:
            enter(t, CONGESTION_AVOIDANCE, "wire:congestion_avoidance")
    return WireResult(rows, own_sends, n_data, n_acks, n_lost, n_probes)


def _drop_space(outstanding: dict[tuple[str, int], tuple[float, int]], space: str) -> float:
    """Forget a packet number space's packets in flight; their bytes."""
    keys = [k for k in outstanding if k[0] == space]
    return float(sum(outstanding.pop(k)[1] for k in keys))


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
