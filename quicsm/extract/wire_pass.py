"""The pass over a trace's packets after its deriver: states from packets alone when it logs no
recovery metrics, and the probe timeouts after its last acknowledgement when it logs none that
its profile expects (:mod:`quicsm.extract.capabilities`, :mod:`quicsm.extract.wire`)."""

from __future__ import annotations

from quicsm.core.diagnostics import Diagnostics
from quicsm.extract.capabilities import METRICS, PTO, from_status
from quicsm.extract.derive import Derivation
from quicsm.extract.deriver import DerivedState
from quicsm.extract.loading import LoadedFile, report_skipped
from quicsm.extract.wire import Packet, read_packets, tail_probes, wire_states
from quicsm.qlog.source import CSV, PARQUET
from quicsm.qlog.trace import PACKET_EVENTS, TraceData

#: a trace whose profile says its producer logs probe timeouts, that logged none, and that goes
#: on at least this long (ms) after its last metric, loss or timer event, has its packets read to
#: find the probes sent after its last acknowledgement (quic-go's 2020 traces log no PTO)
PROBE_TAIL_MS = 1000.0


def packets_of(loaded: LoadedFile, index: int, diag: Diagnostics) -> list[Packet]:
    """A trace's packets (the file is read in full once, when a trace first needs them)."""
    if loaded.packets is None:
        # strict: the first packet record that does not decode raises, naming its record
        loaded.packets = read_packets(loaded.path, limits=loaded.limits, lenient=loaded.lenient)
        # a record the first reading skipped too (a lenient read) is counted once
        report_skipped(diag, loaded.packets.read)
    return loaded.packets.packets.get(index, [])


def _logs_no_packets(trace: TraceData) -> bool:
    """Whether the trace is known to log no packet event: every event of it was counted by name
    (contained JSON), and none is a packet event."""
    counts = trace.event_counts
    return counts is not None and not any(
        name.rpartition(":")[2].lower() in PACKET_EVENTS for name in counts
    )


def wire_pass(
    loaded: LoadedFile, trace: TraceData, derivation: Derivation, tid: str, diag: Diagnostics
) -> Derivation:
    """What the trace's content allows beyond the metrics rules (a pass after the deriver, the
    same for the native and the Python one): states from packets alone when it logs no recovery
    metrics, and the probes after its last acknowledgement when it logs no probe timeout that
    its profile expects (:mod:`quicsm.extract.capabilities`, :mod:`quicsm.extract.wire`)."""
    if derivation.status is None or loaded.kind in (CSV, PARQUET):
        return derivation
    caps = from_status(derivation.status)
    profile = derivation.profile
    if METRICS not in caps:
        if _logs_no_packets(trace):
            return derivation  # no packet to read: the file is not read again for them
        packets = packets_of(loaded, trace.index, diag)
        if not any(p.acks for p in packets):
            return derivation
        version = trace.code_version or trace.labels.get("version")
        result = wire_states(
            packets,
            producer=profile.name,
            version=version if isinstance(version, str) else None,
            cc=trace.cc_algorithm,
        )
        if result.captured:
            whose = (
                f"the {'client' if result.own_sends else 'server'}'s sender (a capture: "
                "directions told by connection IDs)"
            )
        elif result.own_sends and result.model is not None:
            whose = f"its own sender, by {result.model}'s congestion controller replayed on them"
        elif result.own_sends:
            whose = "its own sender"
        else:
            whose = "the peer's sender, inferred from the packets it received and the ACKs it sent"
        if result.unnumbered and not result.data_packets:
            # an ACK names packet numbers: packets logged without one cannot be matched to it
            reason = (
                f"its {result.unnumbered} data packets log no packet number (an encrypted "
                "capture?), so no ACK can be matched to them"
            )
            return Derivation(profile, [], [((), reason)], derivation.status)
        if not result.acks and not result.rows:
            sender = "its own" if result.own_sends else "its peer's"
            reason = (
                f"no ACK frame it logs acknowledges a data packet of {sender} sender "
                f"({result.data_packets} data packets)"
            )
            return Derivation(profile, [], [((), reason)], derivation.status)
        diag.note(
            f"{tid}: no recovery metrics are logged: states derived from its packets and ACK "
            f"frames alone, for {whose}"
        )
        if result.unnumbered:
            diag.note(
                f"{tid}: {result.unnumbered} of its data packets log no packet number and were "
                "left out of the states derived from packets"
            )
        if result.partial_acks:
            diag.note(
                f"{tid}: {result.partial_acks} ACK frame{'s' * (result.partial_acks != 1)} "
                "name more ACK blocks than the capture exported; only the exported blocks "
                "were read"
            )
        rows = [DerivedState(t, s, trigger) for t, s, trigger in result.rows]
        notices = list(result.not_derived)
        return Derivation(profile, rows, notices, derivation.status)
    if not profile.logs_pto or PTO in caps:
        return derivation
    end, last = trace.last_time, trace.last_derive_time
    if end is None or last is None or end - last < PROBE_TAIL_MS:
        return derivation
    probes = [r for r in tail_probes(packets_of(loaded, trace.index, diag)) if r[0] > last]
    if not probes:
        probe_states: tuple[str, ...] = ("TailLossProbe", "RetransmissionTimeout")
        notices = [
            *derivation.notices,
            (
                probe_states,
                f"the trace logs no probe timeout (no pto_count, no expired pto timer) although "
                f"{profile.name} traces usually do, and its packets show none in the "
                f"{end - last:.0f} ms after its last recovery event: probes cannot be seen",
            ),
        ]
        return Derivation(profile, derivation.states, notices, derivation.status)
    diag.note(
        f"{tid}: the trace logs no probe timeout although {profile.name} traces usually do: "
        f"{len(probes)} probe timeout{'s' * (len(probes) != 1)} after its last acknowledgement "
        "were found from its packets (sends without ACKs, backing off; RFC 9002 section 6.2)"
    )
    rows = [*derivation.states, *(DerivedState(t, s, trigger) for t, s, trigger in probes)]
    return Derivation(profile, rows, derivation.notices, derivation.status)
