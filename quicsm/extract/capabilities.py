"""What a trace actually logs, and which derivations that allows, decided from its content.

A producer's profile (:mod:`quicsm.extract.profiles`) says what a stack *usually* logs; a
particular trace may log less (an older release, a converter, a client-side log). The set of
things a trace logs — its **capabilities** — is taken from its events, whatever the producer's
name:

| capability | seen when the trace logs |
|---|---|
| ``metrics`` | any recovery metrics update, loss or timer event |
| ``cwnd`` | a congestion window |
| ``ssthresh`` | a slow-start threshold (below the profile's "unset" value) |
| ``bytes_in_flight`` | bytes in flight |
| ``rtt`` | RTT samples (``latest_rtt``) |
| ``pto`` | a probe timeout: ``pto_count`` or an expired ``pto`` timer |
| ``losses`` | ``packet_lost`` |
| ``app_limited_flag`` | an application-limited flag (picoquic, quiche) |
| ``packets`` | ``packet_sent`` / ``packet_received`` |
| ``ack_frames`` | ACK frames in packets |

:func:`derivations` says which derivations can run with a set of capabilities; the readers use
it to pick the derivation (metrics rules, probes from silences, or states from the wire,
:mod:`quicsm.extract.wire`) and to word what a trace cannot show; ``quicsm inspect`` prints both.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from quicsm.qlog.events import MetricEvent

METRICS = "metrics"
CWND = "cwnd"
SSTHRESH = "ssthresh"
IN_FLIGHT = "bytes_in_flight"
RTT = "rtt"
PTO = "pto"
LOSSES = "losses"
APP_FLAG = "app_limited_flag"
PACKETS = "packets"
ACK_FRAMES = "ack_frames"

#: every capability, in the order they are printed
CAPABILITIES: Final[tuple[str, ...]] = (
    METRICS,
    CWND,
    SSTHRESH,
    IN_FLIGHT,
    RTT,
    PTO,
    LOSSES,
    APP_FLAG,
    PACKETS,
    ACK_FRAMES,
)

__all__ = [
    "CAPABILITIES",
    "derivations",
    "from_events",
    "from_status",
    "render",
]


def from_status(status: tuple[int, bool, bool, bool, bool, bool | None, int]) -> frozenset[str]:
    """The capabilities a deriver saw (``Deriver.status()``, native or Python): every one it
    can see (``ssthresh``, ``losses``, packets and ACK frames are not among them)."""
    events, cwnd, in_flight, rtt, pto, flag, _ = status
    seen = {
        METRICS: events > 0,
        CWND: cwnd,
        IN_FLIGHT: in_flight,
        RTT: rtt,
        PTO: pto,
        APP_FLAG: flag is not None,
    }
    return frozenset(k for k, v in seen.items() if v)


def from_events(
    metrics: Iterable[MetricEvent],
    *,
    packets: int = 0,
    ack_frames: int = 0,
    ssthresh_unset_from: float = 2.0**62,
) -> frozenset[str]:
    """The capabilities of a trace read in full: its metric, loss and timer events, and how
    many packet events and ACK frames it logged."""
    out: set[str] = set()
    for event in metrics:
        out.add(METRICS)
        if event.event == "packet_lost":
            out.add(LOSSES)
        elif event.event == "pto":
            out.add(PTO)
        values = event.values
        if "cwnd_bytes" in values:
            out.add(CWND)
        if values.get("ssthresh_bytes", ssthresh_unset_from) < ssthresh_unset_from:
            out.add(SSTHRESH)
        if "bytes_in_flight" in values:
            out.add(IN_FLIGHT)
        if values.get("latest_rtt_ms", 0) > 0:
            out.add(RTT)
        if "pto_count" in values:
            out.add(PTO)
        if event.app_limited is not None:
            out.add(APP_FLAG)
    if packets:
        out.add(PACKETS)
    if ack_frames:
        out.add(ACK_FRAMES)
    return frozenset(out)


def derivations(caps: frozenset[str], *, profile_logs_pto: bool = True) -> list[str]:
    """Which derivations can run on a trace with ``caps`` (one phrase each, in the order the
    readers try them)."""
    out: list[str] = []
    if METRICS not in caps:
        if PACKETS in caps and ACK_FRAMES in caps:
            out.append("all states from packets and ACK frames (the wire derivation)")
        return out
    if CWND in caps:
        out.append("SlowStart, CongestionAvoidance(Maxed) and Recovery from the window")
    elif LOSSES in caps:
        out.append("Recovery from packet_lost")
    if SSTHRESH not in caps and CWND in caps:
        out.append("ssthresh inferred from cutbacks and slow-start stalls")
    if APP_FLAG in caps:
        out.append("ApplicationLimited from the producer's flag")
    elif IN_FLIGHT in caps and CWND in caps:
        out.append("ApplicationLimited from bytes_in_flight against the window")
    if RTT in caps:
        out.append("the end of Recovery from RTT samples")
    if PTO in caps:
        out.append("TailLossProbe and RetransmissionTimeout from logged probe timeouts")
    elif IN_FLIGHT in caps and not profile_logs_pto:
        out.append("TailLossProbe and RetransmissionTimeout from silences after sends")
    elif PACKETS in caps and ACK_FRAMES in caps:
        out.append("TailLossProbe and RetransmissionTimeout after the last ACK from packets")
    return out


def render(caps: frozenset[str]) -> str:
    """``cwnd, bytes_in_flight, ...`` in :data:`CAPABILITIES` order, ``nothing`` when empty."""
    return ", ".join(c for c in CAPABILITIES if c in caps) or "nothing"
