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

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from quicsm.extract.profiles import Profile, detect_profile
from quicsm.qlog.blocks import DEFAULT_LIMITS, ReadLimits
from quicsm.qlog.events import MetricEvent
from quicsm.qlog.source import read_qlog
from quicsm.qlog.trace import TraceBuilder, TraceData

if TYPE_CHECKING:
    from quicsm.qlog.inspect import Inspection

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
    "TraceCapabilities",
    "CapabilityReader",
    "capability_lines",
    "file_capabilities",
    "inspect_capabilities",
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


@dataclass(frozen=True)
class TraceCapabilities:
    """One trace's capabilities, its producer's profile and what can be derived."""

    index: int
    profile: str
    capabilities: frozenset[str]
    derivations: list[str]
    #: the profile expects probe timeouts in its traces, and this one logs none
    missing_pto: bool


class _TraceSeen:
    """What one trace shows of its capabilities as it is read: its metric sink (no event is
    kept) and its packet hook; a native full read hands over what it saw
    (:meth:`native_capabilities`)."""

    def __init__(self, builder: TraceBuilder) -> None:
        #: the threshold a native read compares with (the header is read: JSON-SEQ and NDJSON
        #: name no member after their events)
        self.ssthresh_unset_from = _profile_of(builder).ssthresh_unset_from
        self.seen: set[str] = set()
        #: the least slow-start threshold seen in Python (compared once the header is whole)
        self.least_ssthresh = math.inf
        self.packets = 0
        self.ack_frames = 0
        builder.packet_hook = self.packet_hook

    def __call__(self, event: MetricEvent) -> None:
        self.seen |= from_events([event], ssthresh_unset_from=-math.inf)
        ssthresh = event.values.get("ssthresh_bytes")
        if ssthresh is not None and ssthresh < self.least_ssthresh:
            self.least_ssthresh = ssthresh

    def wanted(self) -> bool:
        return True

    def packet_hook(self, time: float, short: str, data: object, scale: float) -> None:
        self.packets += 1
        frames = data.get("frames") if isinstance(data, dict) else None
        if isinstance(frames, list) and any(
            isinstance(f, dict)
            and str(f.get("frame_type", f.get("type", ""))).lower() in ("ack", "ack_ecn")
            for f in frames
        ):
            self.ack_frames += 1

    def native_capabilities(self, bits: int, packets: int, ack_frames: bool) -> None:
        """What a native full read saw: capability bits in :data:`CAPABILITIES` order (the
        slow-start threshold compared with :attr:`ssthresh_unset_from`), packet events, and
        whether one held an ACK frame (looked for only while none had: :attr:`ack_frames` is
        a count of them in Python, at least 1 once one is seen natively)."""
        self.seen |= {c for i, c in enumerate(CAPABILITIES) if bits >> i & 1}
        self.packets += packets
        self.ack_frames += ack_frames

    def capabilities(self, unset_from: float) -> frozenset[str]:
        out = set(self.seen)
        if self.least_ssthresh < unset_from:
            out.add(SSTHRESH)
        if self.packets:
            out.add(PACKETS)
        if self.ack_frames:
            out.add(ACK_FRAMES)
        return frozenset(out)


def _profile_of(trace: TraceBuilder | TraceData) -> Profile:
    return detect_profile(title=trace.title, code_version=trace.code_version, labels=trace.labels)


class CapabilityReader:
    """The metric sink of a full read (``metric_sink=reader.sink``) that sees every trace's
    capabilities without keeping its events; :meth:`found` after the read."""

    def __init__(self) -> None:
        self._seen: dict[int, _TraceSeen] = {}

    def sink(self, builder: TraceBuilder) -> _TraceSeen:
        seen = self._seen[builder.index] = _TraceSeen(builder)
        return seen

    def found(self, traces: Iterable[TraceData]) -> list[TraceCapabilities]:
        """Each trace's capabilities, its profile taken from its whole header."""
        out = []
        for trace in traces:
            seen = self._seen.get(trace.index)
            profile = _profile_of(trace)
            caps = frozenset() if seen is None else seen.capabilities(profile.ssthresh_unset_from)
            out.append(
                TraceCapabilities(
                    trace.index,
                    profile.name,
                    caps,
                    derivations(caps, profile_logs_pto=profile.logs_pto),
                    profile.logs_pto and PTO not in caps and METRICS in caps,
                )
            )
        return out


def file_capabilities(
    path: str | Path, *, limits: ReadLimits = DEFAULT_LIMITS
) -> list[TraceCapabilities]:
    """Every trace's capabilities, reading the whole file (every record decoded, as
    ``quicsm inspect`` does); bad records are skipped."""
    reader = CapabilityReader()
    read = read_qlog(
        Path(path),
        full=True,
        want_metrics=True,
        lenient=True,
        limits=limits,
        metric_sink=reader.sink,
    )
    return reader.found(read.traces)


def inspect_capabilities(path: str | Path) -> tuple[Inspection, list[TraceCapabilities]]:
    """What ``quicsm inspect`` prints of a file, in one read: its inspection
    (:func:`quicsm.qlog.inspect.inspect_file`) and every trace's capabilities."""
    from quicsm.qlog.inspect import inspect_file

    reader = CapabilityReader()
    inspection = inspect_file(path, metric_sink=reader.sink)
    return inspection, reader.found(inspection.read)


def capability_lines(found: list[TraceCapabilities]) -> list[str]:
    """What ``quicsm inspect`` prints."""
    out = ["capabilities by trace (what each logs decides what can be derived):"]
    for t in found:
        out.append(f"  #{t.index} [{t.profile}]: {render(t.capabilities)}")
        for phrase in t.derivations or ["nothing can be derived: no metrics and no ACK frames"]:
            out.append(f"    - {phrase}")
        if t.missing_pto:
            out.append(
                f"    ! no probe timeout is logged although {t.profile} traces usually log "
                "them: probes are looked for in its packets after its last acknowledgement"
            )
    return out
