"""Congestion states derived from metrics and loss events, for traces that log no state.

aioquic, ngtcp2 and quinn log ``metrics_updated`` and ``packet_lost`` but no
``congestion_state_updated``. For such traces the state is reconstructed from RFC 9002
(Appendix B and sections 6.2, 7.3) by these rules, applied to the events in time order with
every metric carried forward (section "Derived states" of ``docs/states.md``):

1. ``packet_lost`` (any trigger) enters ``Recovery`` (RFC 9002 section 7.3.2: a loss starts a
   recovery period);
2. while in ``Recovery`` the congestion window does not grow (section 7.3.2); the first metrics
   update whose ``cwnd`` exceeds the smallest ``cwnd`` seen since entering recovery ends it;
3. a probe timeout — ``pto_count`` rising, or a ``pto`` timer ``expired`` when the trace does
   not log ``pto_count`` — enters ``TailLossProbe`` for the first consecutive PTO and
   ``RetransmissionTimeout`` from the second on (the paper's TLP/RTO; RFC 9002 section 6.2
   merged both into the PTO); ``pto_count`` back at 0 (an ACK arrived, section 6.2.1) leaves it;
4. an application-limited flag (picoquic ``app_limited``, quiche ``cf_app_limited``) that is
   true enters ``ApplicationLimited``; false leaves it;
5. otherwise the state follows the window: ``SlowStart`` while ``ssthresh`` is unknown or
   ``cwnd < ssthresh``, else ``CongestionAvoidance`` (RFC 9002 sections 7.3.1 and 7.3.3).

``CongestionAvoidanceMaxed`` and the BBR phases cannot be told from these metrics and are never
derived. Every derived row has ``source = "derived"`` and a ``trigger`` naming the rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from quicsm.qlog.events import MetricEvent


@dataclass(frozen=True)
class DerivedState:
    time: float
    state: str
    trigger: str


def derive_states(events: list[MetricEvent]) -> list[DerivedState]:
    """States implied by metrics/loss events (in file order; stable-sorted by time here)."""
    out: list[DerivedState] = []
    cwnd: float | None = None
    ssthresh: float | None = None
    pto = 0
    logs_pto_count = any("pto_count" in e.values for e in events)
    in_recovery = False
    recovery_min_cwnd: float | None = None
    app_limited = False
    current: str | None = None

    def emit(t: float, state: str, trigger: str) -> None:
        nonlocal current
        if state != current:
            out.append(DerivedState(t, state, trigger))
            current = state

    for e in sorted(events, key=lambda ev: ev.time):
        if e.event == "packet_lost":
            in_recovery = True
            recovery_min_cwnd = cwnd
            emit(e.time, "Recovery", f"packet_lost:{e.trigger}" if e.trigger else "packet_lost")
            continue
        if e.event == "pto" and not logs_pto_count:
            pto += 1
            emit(e.time, "TailLossProbe" if pto == 1 else "RetransmissionTimeout", f"pto={pto}")
            continue
        if e.event != "metrics":
            continue
        values = e.values
        trigger = None
        if "cwnd_bytes" in values:
            new_cwnd = values["cwnd_bytes"]
            if in_recovery:
                if recovery_min_cwnd is None or new_cwnd < recovery_min_cwnd:
                    recovery_min_cwnd = new_cwnd
                elif new_cwnd > recovery_min_cwnd:
                    in_recovery = False
                    trigger = "cwnd_grew"
            cwnd = new_cwnd
        if "ssthresh_bytes" in values:
            ssthresh = values["ssthresh_bytes"]
        if "pto_count" in values:
            new_pto = int(values["pto_count"])
            if new_pto > pto:
                pto = new_pto
                emit(
                    e.time,
                    "TailLossProbe" if pto == 1 else "RetransmissionTimeout",
                    f"pto_count={pto}",
                )
                continue
            pto = new_pto
        elif (
            not logs_pto_count
            and pto
            and ("smoothed_rtt_ms" in values or "latest_rtt_ms" in values)
        ):
            pto = 0  # an RTT sample means an ACK arrived (RFC 9002 section 6.2.1)
        if e.app_limited is not None:
            app_limited = e.app_limited
        if pto:
            continue
        if in_recovery:
            continue
        if app_limited:
            emit(e.time, "ApplicationLimited", "app_limited")
            continue
        if cwnd is None:
            continue
        if ssthresh is None or cwnd < ssthresh:
            emit(e.time, "SlowStart", trigger or "cwnd<ssthresh")
        else:
            emit(e.time, "CongestionAvoidance", trigger or "cwnd>=ssthresh")
    return out
