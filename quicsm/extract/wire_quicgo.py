"""quic-go's congestion controller, rebuilt from its packets: the states it logs.

:mod:`quicsm.extract.wire` rebuilds a sender's loss recovery from its packets and ACK frames
(RFC 9002). What the sender's congestion controller then decides, and which state it logs,
differs per stack. For a quic-go sender whose own log is read (the log owner sent the data),
:class:`QuicGoController` replays quic-go's NewReno ``cubicSender``
(``internal/congestion/cubic_sender.go`` and ``hybrid_slow_start.go``, v0.48 on; its
default controller) on the sends, acknowledgements and losses the wire pass finds, and records
the state it would log:

- the window starts at 32 datagrams of 1252 bytes (``initialCongestionWindow``,
  ``initialMaxDatagramSize``); ssthresh is unset;
- on each acknowledged ack-eliciting packet, unless in recovery (the largest acknowledged packet
  number is at most the largest one sent when the window was last cut): not cwnd-limited
  (``isCwndLimited``: the bytes in flight before the ACK more than ``maxBurstPackets`` = 3
  datagrams below the window, and in slow start not above half of it) is
  ``ApplicationLimited``; else, below the cap of 10,000 datagrams, slow start (window below
  ssthresh) grows one datagram per packet (``SlowStart``) and congestion avoidance one datagram
  per window acknowledged (``CongestionAvoidance``);
- HyStart (RFC 9406 in quic-go's form): per round of packets, the smallest of its first 8 RTT
  samples above the minimum RTT by more than minRTT/8 (clamped to 4-16 ms) ends slow start at a
  window of at least 16 datagrams (ssthresh = window, ``CongestionAvoidance``);
- a lost packet numbered above the largest one sent at the last cutback cuts the window to 0.7
  of itself (``renoBeta``, at least 2 datagrams), sets ssthresh to it and starts recovery
  (``Recovery``, the event quic-go logs); losses of packets sent before the cutback are the
  same congestion event (RFC 9002 section 7.3.2).

From v0.65 on, quic-go also undoes a congestion event (NewReno only: ``spurious_undo``) when
every packet counted for it is acknowledged after all (``OnSpuriousLoss``: the window, ssthresh
and the previous cutback restored, and ``Recovery``, ``SlowStart`` or ``CongestionAvoidance``
logged again); its loss detection, whatever the controller (``adaptive_detection``), then
stops using the packet threshold and widens the time threshold
(:class:`quicsm.extract.wire._Sender` does that part). A Cubic sender is replayed with
NewReno's window growth: its states are the same, its window in congestion avoidance grows
differently.

quic-go logs no state on a probe timeout, and neither does this controller: the wire pass
shows ``TailLossProbe`` / ``RetransmissionTimeout`` for the probes and returns to the
controller's state on the next acknowledgement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

SLOW_START = "SlowStart"
CONGESTION_AVOIDANCE = "CongestionAvoidance"
APP_LIMITED = "ApplicationLimited"
RECOVERY = "Recovery"

#: quic-go protocol.InitialPacketSize / initialMaxDatagramSize, bytes
INITIAL_DATAGRAM: Final[int] = 1252
#: cubic_sender.go initialCongestionWindow, datagrams
INITIAL_WINDOW: Final[int] = 32
#: cubic_sender.go minCongestionWindowPackets, datagrams
MIN_WINDOW: Final[int] = 2
#: protocol.MaxCongestionWindowPackets, datagrams
MAX_WINDOW: Final[int] = 10_000
#: cubic_sender.go maxBurstPackets, datagrams
MAX_BURST: Final[int] = 3
#: cubic_sender.go renoBeta: the window after a congestion event, as a share of the one before
RENO_BETA: Final[float] = 0.7
#: hybrid_slow_start.go: HyStart acts from this window on, datagrams
HYSTART_LOW_WINDOW: Final[int] = 16
#: hybrid_slow_start.go: RTT samples per round compared with the minimum RTT
HYSTART_MIN_SAMPLES: Final[int] = 8
#: hybrid_slow_start.go: the RTT increase that ends slow start, ms (minRTT/8 clamped to these)
HYSTART_MIN_THRESHOLD_MS: Final[float] = 4.0
HYSTART_MAX_THRESHOLD_MS: Final[float] = 16.0
#: the largest datagram taken as the window's unit, bytes (quic-go's DPLPMTUD probes up to it)
MAX_DATAGRAM: Final[int] = 1452


@dataclass
class _HyStart:
    end_number: int = -1
    last_sent: int = -1
    started: bool = False
    current_min_rtt: float = 0.0
    samples: int = 0
    found: bool = False

    def should_exit(self, latest_rtt: float, min_rtt: float, window_datagrams: float) -> bool:
        if not self.started:
            self.end_number, self.current_min_rtt, self.samples = self.last_sent, 0.0, 0
            self.started = True
        if self.found:
            return True
        self.samples += 1
        if self.samples <= HYSTART_MIN_SAMPLES and (
            self.current_min_rtt == 0.0 or self.current_min_rtt > latest_rtt
        ):
            self.current_min_rtt = latest_rtt
        if self.samples == HYSTART_MIN_SAMPLES:
            threshold = min(max(min_rtt / 8, HYSTART_MIN_THRESHOLD_MS), HYSTART_MAX_THRESHOLD_MS)
            if self.current_min_rtt > min_rtt + threshold:
                self.found = True
        return window_datagrams >= HYSTART_LOW_WINDOW and self.found

    def acked(self, number: int) -> None:
        if self.end_number < number:
            self.started = False


@dataclass
class _Undo:
    """What a cutback replaced (quic-go ``renoUndoState``); inactive at 0 events."""

    cwnd: float = 0.0
    ssthresh: float = 0.0
    acked_in_avoidance: int = 0
    cutback: int = -1
    events: int = 0


def _release(version: str | None) -> tuple[int, ...] | None:
    """``(0, 65, 0)`` from a code version such as ``v0.65.0`` (``None`` when not one)."""
    digits = (version or "").lstrip("v").split("-")[0].split(".")
    try:
        return tuple(int(d) for d in digits) if len(digits) >= 2 else None
    except ValueError:
        return None


#: the first quic-go release that undoes spurious congestion events (``OnSpuriousLoss``)
SPURIOUS_UNDO_FROM: Final[tuple[int, ...]] = (0, 65)


class QuicGoController:
    """quic-go's NewReno sender: its window and the congestion state it last logged."""

    @classmethod
    def for_version(cls, version: str | None, cc: str | None = None) -> QuicGoController:
        """The controller of a quic-go release (its ``code_version``; unknown: before v0.65)
        and congestion controller (``cc_algorithm``; unknown: quic-go's default NewReno)."""
        release = _release(version)
        adaptive = release is not None and release >= SPURIOUS_UNDO_FROM
        reno = cc is None or "cubic" not in cc.lower()
        return cls(spurious_undo=adaptive and reno, adaptive_detection=adaptive)

    def __init__(self, *, spurious_undo: bool = False, adaptive_detection: bool = False) -> None:
        #: v0.65 and later, NewReno: spurious losses undo their congestion event (quic-go keeps
        #: no undo state for Cubic)
        self.spurious_undo = spurious_undo
        #: v0.65 and later, any controller: loss detection adapts to reordering
        self.adaptive_detection = adaptive_detection or spurious_undo
        self.undo = _Undo()
        self.datagram = float(INITIAL_DATAGRAM)
        self.cwnd = float(INITIAL_WINDOW * INITIAL_DATAGRAM)
        self.ssthresh = float("inf")
        self.largest_sent = -1
        self.largest_acked = -1
        self.cutback = -1  # largestSentAtLastCutback (-1: never)
        self.acked_in_avoidance = 0
        self.hystart = _HyStart()
        #: quic-go logs slow_start when its controller is created
        self.state = SLOW_START

    def _log(self, state: str) -> None:
        self.state = state

    def in_recovery(self) -> bool:
        return self.largest_acked >= 0 and self.largest_acked <= self.cutback

    def in_slow_start(self) -> bool:
        return self.cwnd < self.ssthresh

    def sent(self, number: int, size: int) -> None:
        """An ack-eliciting packet sent (``OnPacketSent``)."""
        if self.datagram < size <= MAX_DATAGRAM:
            # DPLPMTUD raised the datagram size (SetMaxDatagramSize keeps the window in bytes)
            self.datagram = float(size)
        self.largest_sent = number
        self.hystart.last_sent = number

    def rtt_sample(self, latest_rtt: float, min_rtt: float) -> None:
        """An RTT sample from an ACK newly acknowledging its largest packet
        (``MaybeExitSlowStart``)."""
        if self.in_slow_start() and self.hystart.should_exit(
            latest_rtt, min_rtt, self.cwnd / self.datagram
        ):
            self.ssthresh = self.cwnd
            self._log(CONGESTION_AVOIDANCE)

    def lost(self, number: int) -> bool:
        """A packet declared lost (``OnCongestionEvent``); whether it started a recovery."""
        if number <= self.cutback:
            if self.undo.events and number > self.undo.cutback:
                self.undo.events += 1  # counted for the current cutback
            return False
        if self.spurious_undo:
            self.undo = _Undo(self.cwnd, self.ssthresh, self.acked_in_avoidance, self.cutback, 1)
        self._log(RECOVERY)
        self.cwnd = max(self.cwnd * RENO_BETA, MIN_WINDOW * self.datagram)
        self.ssthresh = self.cwnd
        self.cutback = self.largest_sent
        self.acked_in_avoidance = 0
        return True

    def spurious(self, number: int) -> None:
        """A packet declared lost and acknowledged after all (``OnSpuriousLoss``, v0.65+): when
        every loss counted for the last cutback was spurious, the cutback is undone."""
        if not self.undo.events or number <= self.undo.cutback or number > self.cutback:
            return
        self.undo.events -= 1
        if self.undo.events:
            return
        saved, self.undo = self.undo, _Undo()
        if self.cwnd > saved.cwnd:
            return
        self.cwnd, self.ssthresh = saved.cwnd, saved.ssthresh
        self.acked_in_avoidance, self.cutback = saved.acked_in_avoidance, saved.cutback
        if self.in_recovery():
            self._log(RECOVERY)
        elif self.in_slow_start():
            self._log(SLOW_START)
        else:
            self._log(CONGESTION_AVOIDANCE)

    def acked(self, number: int, prior_in_flight: float) -> None:
        """An ack-eliciting packet acknowledged (``OnPacketAcked``), with the bytes in flight
        before the ACK."""
        self.largest_acked = max(self.largest_acked, number)
        if self.in_recovery():
            return
        self._grow(prior_in_flight)
        if self.in_slow_start():
            self.hystart.acked(number)

    def _cwnd_limited(self, in_flight: float) -> bool:
        if in_flight >= self.cwnd:
            return True
        slow_start_limited = self.in_slow_start() and in_flight > self.cwnd / 2
        return slow_start_limited or self.cwnd - in_flight <= MAX_BURST * self.datagram

    def _grow(self, prior_in_flight: float) -> None:
        if not self._cwnd_limited(prior_in_flight):
            self._log(APP_LIMITED)
            return
        if self.cwnd >= MAX_WINDOW * self.datagram:
            return
        if self.in_slow_start():
            self.cwnd += self.datagram
            self._log(SLOW_START)
            return
        self._log(CONGESTION_AVOIDANCE)
        self.acked_in_avoidance += 1
        if self.acked_in_avoidance >= int(self.cwnd // self.datagram):
            self.cwnd += self.datagram
            self.acked_in_avoidance = 0
