"""Linux TCP's congestion state, read from ``TCP_INFO`` samples, as the paper's eight states.

The kernel keeps one congestion-avoidance state per socket (``icsk_ca_state``, ``enum
tcp_ca_state``: Open, Disorder, CWR, Recovery, Loss) and decides growth by ``snd_cwnd``
against ``snd_ssthresh``. :class:`KernelStateMapper` is fed samples in time order (time passed
in, nothing read here) and says which canonical state each one is in, in this order (the
order docs/states.md gives for the QUIC patches):

1. ``Loss`` -> ``RetransmissionTimeout``: the kernel enters Loss only from its retransmission
   timer (``tcp_retransmit_timer`` -> ``tcp_enter_loss``), i.e. an RTO fired;
2. a tail loss probe (``tcp_send_loss_probe``, fired by the probe timer about two smoothed
   RTTs after the last ACK) -> ``TailLossProbe``, until data is newly acknowledged or the state
   changes. ``TCP_INFO`` has no probe counter, so a probe is recognised by what only it does
   while Open or Disorder: a retransmission with no RTO pending (the probe resends the last
   segment when there is no new data), or segments sent while no data has been acknowledged
   for at least 1.5 smoothed RTTs (the probe sends new data when there is some; in a bulk
   transfer ACKs otherwise arrive many times per RTT). The lab checks the count against the
   namespace's ``TCPLossProbes`` counter;
3. ``Recovery`` (fast retransmit after SACK/dupacks, or RACK) and ``CWR`` (window reduced
   without a loss: ECN-CE or local congestion) -> ``Recovery`` (RFC 9002 §7.3.2 enters
   recovery on either). The ACK that ends one recovery can start the next
   (``tcp_fastretrans_alert``), so the socket is in Recovery on both samples; the new episode
   shows as a new ``snd_ssthresh`` (``tcp_init_cwnd_reduction`` sets it on entry), and the
   mapper then reports ``CongestionAvoidance`` (where the ended recovery left the window:
   ``tcp_end_cwnd_reduction`` sets cwnd to ssthresh) and Recovery again at that sample;
4. ``Open`` / ``Disorder`` (Disorder: SACKs or dupacks seen, nothing declared lost yet; the
   window still grows there) with the last rate sample application-limited
   (``tcpi_delivery_rate_app_limited``) or time limited by the receive window or the send
   buffer since the previous sample -> ``ApplicationLimited`` (not cwnd-limited, as the quic-go
   patch's definition);
5. otherwise the controller's growth state: for Reno and CUBIC ``SlowStart`` while
   ``snd_cwnd < snd_ssthresh`` (the kernel's ``tcp_in_slow_start``), else
   ``CongestionAvoidance``; for BBR (which never sets ``snd_ssthresh``) its phase, read from
   the gains ``TCP_CC_INFO`` reports: pacing gain 2.885 -> ``Startup``, 1/2.885 ->
   ``Drain``, cwnd gain 1 (with pacing gain 1) -> ``ProbeRTT``, otherwise ``ProbeBW``.

``CongestionAvoidanceMaxed`` is never produced: ``TCP_INFO`` has no window cap
(``snd_cwnd_clamp``) to compare with. ``Init`` is the first state of every connection.
"""

from __future__ import annotations

from dataclasses import dataclass

from quicsm.lab.tcpinfo import (
    BBR_UNIT,
    CA_CWR,
    CA_DISORDER,
    CA_LOSS,
    CA_OPEN,
    CA_RECOVERY,
    CA_STATE_NAMES,
    BbrInfo,
    TcpInfo,
)

#: BBR's gains in BBR_UNIT (net/ipv4/tcp_bbr.c: bbr_high_gain = 2885/1000 + 1/256,
#: bbr_drain_gain = 1000/2885); anything above 2 is Startup, below 1/2 Drain
_STARTUP_MIN_GAIN = 2 * BBR_UNIT
_DRAIN_MAX_GAIN = BBR_UNIT // 2


@dataclass(frozen=True, slots=True)
class Decision:
    """The canonical state of one sample, the raw kernel state behind it, and why."""

    state: str
    raw_state: str
    trigger: str


def bbr_phase(bbr: BbrInfo) -> str:
    """BBR's phase from its gains (net/ipv4/tcp_bbr.c ``bbr_update_gains``)."""
    if bbr.pacing_gain > _STARTUP_MIN_GAIN:
        return "Startup"
    if bbr.pacing_gain < _DRAIN_MAX_GAIN:
        return "Drain"
    if bbr.cwnd_gain <= BBR_UNIT and bbr.pacing_gain == BBR_UNIT:
        return "ProbeRTT"
    return "ProbeBW"


class KernelStateMapper:
    """Map a socket's ``TCP_INFO`` samples, in time order, to canonical states."""

    def __init__(self) -> None:
        self._prev: TcpInfo | None = None
        self._probing = False

    def decide(self, info: TcpInfo, bbr: BbrInfo | None = None) -> list[Decision]:
        """The states this sample passes through (one, or growth then Recovery on a new
        recovery episode that began on the ACK that ended the previous one)."""
        prev = self._prev
        decision = self._decide(info, bbr, prev)
        if (
            decision.state == "Recovery"
            and prev is not None
            and prev.ca_state == info.ca_state
            and prev.snd_ssthresh != info.snd_ssthresh
        ):
            # the end of a recovery sets cwnd to ssthresh (tcp_end_cwnd_reduction): not slow start
            return [Decision("CongestionAvoidance", "recovery_end", "ack"), decision]
        return [decision]

    def _decide(self, info: TcpInfo, bbr: BbrInfo | None, prev: TcpInfo | None) -> Decision:
        self._prev = info
        ca = info.ca_state
        raw = CA_STATE_NAMES[ca] if ca < len(CA_STATE_NAMES) else f"ca_state_{ca}"
        if ca == CA_LOSS:
            self._probing = False
            return Decision("RetransmissionTimeout", raw, "rto")
        if ca in (CA_OPEN, CA_DISORDER) and prev is not None:
            quiet_us = 1000 * info.last_ack_recv_ms
            if info.retransmits == 0 and (
                info.total_retrans > prev.total_retrans
                or (
                    info.segs_out > prev.segs_out
                    and info.bytes_acked == prev.bytes_acked
                    and info.rtt_us > 0
                    and quiet_us >= 1.5 * info.rtt_us
                )
            ):
                self._probing = True
            elif info.bytes_acked > prev.bytes_acked or prev.ca_state != ca:
                self._probing = False
        else:
            self._probing = False
        if self._probing:
            return Decision("TailLossProbe", f"{raw}+probe", "probe")
        if ca == CA_RECOVERY:
            return Decision("Recovery", raw, "loss")
        if ca == CA_CWR:
            return Decision("Recovery", raw, "cwr")
        if info.app_limited:
            return Decision("ApplicationLimited", f"{raw}+app_limited", "app_limited")
        if prev is not None and info.rwnd_limited_us > prev.rwnd_limited_us:
            return Decision("ApplicationLimited", f"{raw}+rwnd_limited", "rwnd_limited")
        if prev is not None and info.sndbuf_limited_us > prev.sndbuf_limited_us:
            return Decision("ApplicationLimited", f"{raw}+sndbuf_limited", "sndbuf_limited")
        if bbr is not None:
            phase = bbr_phase(bbr)
            return Decision(phase, f"{raw}+bbr_{phase.lower()}", "ack")
        if info.snd_cwnd < info.snd_ssthresh:
            return Decision("SlowStart", f"{raw}+cwnd<ssthresh", "ack")
        return Decision("CongestionAvoidance", f"{raw}+cwnd>=ssthresh", "ack")
