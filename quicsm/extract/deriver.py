"""The streaming state deriver: classifies events, keeps O(1) state, applies the rule table.

Feed it a trace's metric, loss and timer events (:class:`quicsm.qlog.events.MetricEvent`) in
file order with :meth:`Deriver.feed`; each call returns the state row it implies, if the state
changed. Memory is the :class:`~quicsm.extract.rules.Context` of one trace, whatever its length.
:meth:`Deriver.notices` says which states the trace cannot show and why.

The policy lives in :mod:`quicsm.extract.rules`; this module only turns events into event
classes (in the order the stacks process them: an ACK frame's acknowledgements before the
losses it reveals) and updates the numbers the rules look at.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator
from dataclasses import dataclass

from quicsm.core.states import PAPER_STATES
from quicsm.extract.profiles import Profile
from quicsm.extract.rules import (
    ACK,
    APP_LIMITED,
    COLLAPSE,
    CONGESTION_AVOIDANCE,
    CUTBACK,
    FLAG,
    LOSS,
    MAXED,
    PTO,
    RECOVERY,
    SEND,
    SLOW_START,
    UNDO,
    Context,
    Thresholds,
    next_state,
    not_cwnd_limited,
    slow_start,
)
from quicsm.qlog.events import MetricEvent

#: the paper's states that need each kind of information (for the notices)
_WINDOW_STATES = ("SlowStart", "CongestionAvoidance", "CongestionAvoidanceMaxed")


@dataclass(frozen=True, slots=True)
class DerivedState:
    time: float
    state: str
    trigger: str


#: state codes of :class:`CompactRows`: the position in this tuple
STATE_CODES: tuple[str, ...] = PAPER_STATES
_CODE_OF = {state: i for i, state in enumerate(STATE_CODES)}
#: the trigger of rows entered by the window-plateau rule
_PLATEAU = "ack:window_plateau"


class CompactRows:
    """Derived rows as three arrays (11 bytes a row) instead of objects: what a long trace's
    derivation keeps while the file is read."""

    __slots__ = ("times", "states", "triggers", "trigger_names", "_trigger_codes")

    def __init__(self) -> None:
        self.times = array("d")
        self.states = array("B")  # index into STATE_CODES
        self.triggers = array("H")  # index into trigger_names
        self.trigger_names: list[str] = []
        self._trigger_codes: dict[str, int] = {}

    def _trigger(self, trigger: str) -> int:
        code = self._trigger_codes.get(trigger)
        if code is None:
            code = self._trigger_codes[trigger] = len(self.trigger_names)
            self.trigger_names.append(trigger)
        return code

    def append(self, row: DerivedState) -> None:
        self.times.append(row.time)
        self.states.append(_CODE_OF[row.state])
        self.triggers.append(self._trigger(row.trigger))

    def relabel_since(self, since: float, old: tuple[str, ...], new: str, trigger: str) -> None:
        """From ``since`` on, every stretch in one of ``old`` becomes ``new`` (the state in
        effect at ``since`` too: a row is inserted there); repeats are merged."""
        olds = {_CODE_OF[s] for s in old}
        code, tcode = _CODE_OF[new], self._trigger(trigger)
        i = len(self.times)
        while i > 0 and self.times[i - 1] >= since:
            i -= 1
        for j in range(i, len(self.times)):
            if self.states[j] in olds:
                self.states[j], self.triggers[j] = code, tcode
        if i > 0 and self.states[i - 1] in olds:
            self.times.insert(i, since)
            self.states.insert(i, code)
            self.triggers.insert(i, tcode)
        j = max(i, 1)
        while j < len(self.times):  # merge repeats
            if self.states[j] == self.states[j - 1]:
                del self.times[j], self.states[j], self.triggers[j]
            else:
                j += 1

    def __len__(self) -> int:
        return len(self.times)

    def __iter__(self) -> Iterator[DerivedState]:
        names = self.trigger_names
        for t, s, g in zip(self.times, self.states, self.triggers, strict=True):
            yield DerivedState(t, STATE_CODES[s], names[g])


@dataclass
class _Undo:
    """What a cutback replaced, for quic-go v0.65's spurious-loss undo."""

    cwnd: float
    inferred_ssthresh: float
    recovery_start: float | None


class Deriver:
    """Derives one trace's congestion states from its events, one event at a time."""

    def __init__(self, profile: Profile, *, thresholds: Thresholds | None = None) -> None:
        self.ctx = Context(profile, thresholds or Thresholds())
        self._undo: _Undo | None = None
        self._spurious_pending = False
        self._loss_since_metrics = False
        #: time of the first packet_lost since the last metrics update
        self._loss_time = 0.0
        self._losses = 0
        self._events = 0
        self._last_rtt: float | None = None
        #: the inferred ssthresh before a slow-start stall was taken for a HyStart exit
        self._stalled_from: float | None = None
        #: when the current event's row is dated earlier than the event (a cutback dated by
        #: its loss)
        self._event_time: float | None = None
        self._last_row = float("-inf")
        #: every row derived so far (a plateau found late relabels the rows since the window
        #: last changed)
        self.rows = CompactRows()
        self._window_changed_at: float | None = None

    # -- feeding -------------------------------------------------------------------------

    def feed(self, event: MetricEvent) -> DerivedState | None:
        """One event (a :class:`~quicsm.qlog.events.MetricEvent`); the new state, if any."""
        ctx = self.ctx
        self._events += 1
        time = float(event.time)
        ctx.time = max(time, ctx.time) if self._events > 1 else time
        kind = event.event
        classes: list[str] = []
        if kind == "metrics":
            classes = self._metrics(event)
        elif kind == "packet_lost":
            self._losses += 1
            if not self._loss_since_metrics:
                self._loss_time = ctx.time
            self._loss_since_metrics = True
            if not ctx.seen_cwnd:
                classes = [LOSS]
                ctx.recovery_start = ctx.time
        elif kind == "pto":
            ctx.seen_pto = True
            if ctx.bytes_in_flight is None or ctx.bytes_in_flight > 0:
                ctx.consecutive_ptos += 1
                classes = [PTO]
        elif kind == "spurious_loss":
            self._spurious_pending = True
        return self._apply(classes)

    def _apply(self, classes: list[str]) -> DerivedState | None:
        ctx = self.ctx
        before = ctx.state
        time = self._event_time if self._event_time is not None else ctx.time
        self._event_time = None
        trigger = None
        for event in classes:
            if event == ACK:
                self._on_ack()
            rule = next_state(ctx, event)
            if rule is None:
                continue
            ctx.state = rule.to
            trigger = rule.trigger
        if ctx.state != before and trigger is not None:
            time = max(time, self._last_row)  # rows stay in time order
            self._last_row = time
            row = DerivedState(time, ctx.state, trigger)
            self.rows.append(row)
            if trigger == _PLATEAU and self._window_changed_at is not None:
                # the window has stood still since it last changed: it was at its cap from
                # then on (RFC 9002 section 7.3.3 growth would have shown otherwise)
                self.rows.relabel_since(
                    self._window_changed_at,
                    (SLOW_START, CONGESTION_AVOIDANCE),
                    MAXED,
                    trigger,
                )
            return row
        return None

    def _metrics(self, event: MetricEvent) -> list[str]:
        ctx = self.ctx
        profile = ctx.profile
        values: dict[str, float] = event.values
        ctx.prior_cwnd = ctx.cwnd
        ctx.prior_in_flight = ctx.bytes_in_flight
        ctx.rtt_sample = None
        classes: list[str] = []
        loss_before = self._loss_since_metrics
        self._loss_since_metrics = False

        srtt = values.get("smoothed_rtt_ms")
        if srtt is not None:
            ctx.smoothed_rtt = srtt
        rttvar = values.get("rtt_variance_ms")
        if rttvar is not None:
            ctx.rtt_variance = rttvar
        sample = values.get("latest_rtt_ms")
        if sample is not None:
            if sample <= 0 or sample == self._last_rtt:
                # the zeros logged before the first sample, and the unchanged value stacks
                # that log every metric on every update repeat (quic-go v0.65 on sends)
                sample = None
            else:
                self._last_rtt = sample
        if sample is not None:
            ctx.rtt_sample = sample
            ctx.seen_rtt = True
        ssthresh = values.get("ssthresh_bytes")
        if ssthresh is not None:
            ctx.logged_ssthresh = ssthresh if ssthresh < profile.ssthresh_unset_from else None

        pto_count = values.get("pto_count")
        if pto_count is not None:
            ctx.seen_pto = True
            count = int(pto_count)
            if count > ctx.consecutive_ptos and (
                ctx.bytes_in_flight is None or ctx.bytes_in_flight > 0
            ):
                ctx.consecutive_ptos = count
                classes.append(PTO)
            elif count == 0:
                ctx.consecutive_ptos = 0

        acked = False
        in_flight = values.get("bytes_in_flight")
        if in_flight is not None:
            ctx.seen_in_flight = True
            prior = ctx.prior_in_flight
            ctx.bytes_in_flight = in_flight
            if sample is not None or (prior is not None and in_flight < prior and not loss_before):
                acked = True
            elif prior is not None and in_flight > prior:
                if self._probe_after_silence(prior):
                    ctx.consecutive_ptos += 1
                    classes.append(PTO)
                ctx.last_send = ctx.time
                classes.append(SEND)
        elif sample is not None:
            acked = True

        window = values.get("cwnd_bytes")
        window_classes: list[str] = []
        if window is not None:
            prior_window = ctx.cwnd
            ctx.cwnd = window
            ctx.seen_cwnd = True
            if prior_window is None:
                if not ctx.seen_in_flight:
                    acked = True  # a window without in-flight counts: each update is a decision
            elif window < prior_window:
                self._window_changed_at = ctx.time
                ctx.acked_since_change = 0.0
                ctx.stall_is_cap = False
                self._stalled_from = None
                self._undo = _Undo(prior_window, ctx.inferred_ssthresh, ctx.recovery_start)
                ctx.inferred_ssthresh = window
                if (
                    profile.persistent_congestion
                    and window <= profile.min_cwnd_datagrams * ctx.datagram
                    and (loss_before or self._losses)
                    and ctx.state == RECOVERY
                ):
                    window_classes.append(COLLAPSE)
                else:
                    window_classes.append(CUTBACK)
                # the loss that caused it (stacks log the window at their next update)
                ctx.recovery_start = (
                    max(self._loss_time, self._last_row) if loss_before else ctx.time
                )
                self._event_time = ctx.recovery_start
            elif window > prior_window:
                self._window_changed_at = ctx.time
                ctx.acked_since_change = 0.0
                ctx.stall_is_cap = False
                self._stalled_from = None
                step = window - prior_window
                th = ctx.thresholds
                if not profile.logs_ssthresh:
                    for count in (1, 2):  # slow start grows a datagram per datagram acked
                        if th.datagram_step_min_bytes <= step / count <= th.datagram_step_max_bytes:
                            ctx.datagram = step / count
                            break
                undo = self._undo
                if self._spurious_pending and undo is not None and window >= undo.cwnd:
                    ctx.inferred_ssthresh = undo.inferred_ssthresh
                    ctx.recovery_start = undo.recovery_start
                    self._undo = None
                    self._spurious_pending = False
                    window_classes.append(UNDO)
            elif not ctx.seen_in_flight:
                acked = True
        if acked:
            classes.append(ACK)
        classes.extend(window_classes)  # the ACK's acknowledgements come before its losses
        flag = event.app_limited
        if flag is not None and flag != ctx.app_limited_flag:
            ctx.app_limited_flag = flag
            classes.append(FLAG)
        return classes

    def _probe_after_silence(self, prior_in_flight: float) -> bool:
        """A send after a silent PTO period with bytes in flight: the PTO fired (for stacks
        that log no probe timeouts; RFC 9002 section 6.2.1)."""
        ctx = self.ctx
        if ctx.profile.logs_pto or ctx.seen_pto:
            return False
        if prior_in_flight <= 0 or ctx.last_send is None or ctx.smoothed_rtt is None:
            return False
        th = ctx.thresholds
        rttvar = ctx.rtt_variance if ctx.rtt_variance is not None else ctx.smoothed_rtt / 2
        period = (
            ctx.smoothed_rtt + max(4 * rttvar, th.granularity_ms) + ctx.profile.max_ack_delay_ms
        ) * _power_of_two(ctx.consecutive_ptos)
        return ctx.time - ctx.last_send >= th.pto_gap_fraction * period

    def _on_ack(self) -> None:
        """What an ACK changes before the rules look: PTO count, recovery end, growth."""
        ctx = self.ctx
        ctx.consecutive_ptos = 0
        if (
            ctx.recovery_start is not None
            and ctx.rtt_sample is not None
            and ctx.time - ctx.rtt_sample > ctx.recovery_start
        ):
            ctx.recovery_start = None  # a packet sent after the cutback was acknowledged
        if ctx.recovery_start is not None:
            return
        if (
            ctx.prior_in_flight is not None
            and ctx.bytes_in_flight is not None
            and ctx.cwnd is not None
            and ctx.cwnd == ctx.prior_cwnd
            and not not_cwnd_limited(ctx)
        ):
            ctx.acked_since_change += max(0.0, ctx.prior_in_flight - ctx.bytes_in_flight)
            if ctx.logged_ssthresh is not None or ctx.profile.logs_ssthresh:
                return
            th = ctx.thresholds
            if slow_start(ctx) and not ctx.stall_is_cap:
                if ctx.acked_since_change >= th.slow_start_stall_datagrams * ctx.datagram:
                    # slow start stopped growing: HyStart ended it (RFC 9406), unless the
                    # window keeps still for whole windows (then it is a cap, below)
                    self._stalled_from = ctx.inferred_ssthresh
                    ctx.inferred_ssthresh = ctx.cwnd
            elif (
                self._stalled_from is not None
                and ctx.acked_since_change >= th.plateau_windows * ctx.cwnd
            ):
                # no congestion-avoidance growth either: the stall was a window cap reached in
                # slow start (quic-go keeps InSlowStart() true there)
                ctx.inferred_ssthresh = self._stalled_from
                ctx.stall_is_cap = True
                ctx.cap_datagrams = ctx.cwnd / ctx.datagram
                self._stalled_from = None

    # -- after the trace -----------------------------------------------------------------

    def status(self) -> tuple[int, bool, bool, bool, bool, bool | None, int]:
        """``(events, seen cwnd, seen bytes in flight, seen RTT samples, seen a PTO,
        application-limited flag, state code)``: what the native deriver's ``status()``
        returns, so both can be asked what a trace showed."""
        ctx = self.ctx
        return (
            self._events,
            ctx.seen_cwnd,
            ctx.seen_in_flight,
            ctx.seen_rtt,
            ctx.seen_pto,
            ctx.app_limited_flag,
            STATE_CODES.index(ctx.state),
        )

    def notices(self) -> list[tuple[tuple[str, ...], str]]:
        """``(states, reason)`` for every group of states this trace's events cannot show
        (an empty ``states`` means all of them)."""
        ctx = self.ctx
        return notices_of(
            events=self._events,
            seen_cwnd=ctx.seen_cwnd,
            seen_in_flight=ctx.seen_in_flight,
            seen_rtt=ctx.seen_rtt,
            seen_pto=ctx.seen_pto,
            app_limited_flag=ctx.app_limited_flag,
        )


def notices_of(
    *,
    events: int,
    seen_cwnd: bool,
    seen_in_flight: bool,
    seen_rtt: bool,
    seen_pto: bool,
    app_limited_flag: bool | None,
) -> list[tuple[tuple[str, ...], str]]:
    """``(states, reason)`` for every group of states a trace cannot show, from what its
    events showed (an empty ``states`` means all of them)."""
    out: list[tuple[tuple[str, ...], str]] = []
    if events == 0:
        return [((), "the trace logs no recovery metrics, losses or timers")]
    if not seen_cwnd:
        out.append((_WINDOW_STATES, "no congestion window (cwnd) is logged"))
    if not seen_in_flight and app_limited_flag is None:
        out.append(((APP_LIMITED,), "no bytes_in_flight and no application-limited flag is logged"))
    if not seen_rtt:
        out.append(((RECOVERY,), "its end needs RTT samples (latest_rtt), which are not logged"))
    if not seen_pto and not seen_in_flight:
        out.append(
            (
                ("TailLossProbe", "RetransmissionTimeout"),
                "no PTO (pto_count, pto timer) and no bytes_in_flight to see probes",
            )
        )
    return out


def _power_of_two(n: int) -> float:
    """``2 ** n`` as a float, infinite past the float range (a trace may log any pto_count)."""
    return 2.0**n if n < 1024 else math.inf


def describe_states(states: tuple[str, ...]) -> str:
    """``A``, ``A and B``, ``A, B and C``; ``""`` for none (meaning: no state at all)."""
    if not states:
        return ""
    if len(states) == 1:
        return states[0]
    return ", ".join(states[:-1]) + " and " + states[-1]
