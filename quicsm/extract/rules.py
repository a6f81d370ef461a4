"""The state-derivation table: (current state, event class, condition) -> next state.

In the spirit of h11's ``_state.py``: the whole derivation policy is the data below
(:data:`RULES`), read top to bottom; :mod:`quicsm.extract.deriver` only classifies events,
keeps the few numbers the conditions look at (:class:`Context`) and applies the first rule
that matches. Every rule cites the RFC 9002 section or the stack source it models;
every threshold is a named field of :class:`Thresholds`, with its unit.

Event classes (:data:`EVENT_CLASSES`) are what the deriver sees in a trace, whatever its qlog
generation (draft-00 arrays, 0.3 ``recovery:*``, quic-events ``quic:recovery_metrics_updated``,
``packet_lost``, ``timer_updated`` / ``loss_timer_updated``):

- ``ack``: a metrics update that follows an acknowledgement (it carries an RTT sample, or the
  bytes in flight went down without a loss);
- ``send``: a metrics update whose bytes in flight went up (a packet was sent);
- ``cutback``: the congestion window went down (a congestion event, RFC 9002 section 7.3.2);
- ``collapse``: the window fell to the minimum window after losses (persistent congestion);
- ``loss``: ``packet_lost``;
- ``pto``: a probe timeout fired (``pto_count`` rose, a ``pto`` timer expired, or, for stacks
  that log neither, a send after a silent PTO period);
- ``undo``: the window went back to its value before the last cutback after a
  ``spurious_loss`` (quic-go v0.65 undoes spurious cutbacks);
- ``flag``: an application-limited flag changed (picoquic ``app_limited``, quiche
  ``cf_app_limited``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Final

from quicsm.extract.profiles import Profile

INIT = "Init"
SLOW_START = "SlowStart"
CONGESTION_AVOIDANCE = "CongestionAvoidance"
MAXED = "CongestionAvoidanceMaxed"
APP_LIMITED = "ApplicationLimited"
RTO = "RetransmissionTimeout"
RECOVERY = "Recovery"
TLP = "TailLossProbe"

ACK = "ack"
SEND = "send"
CUTBACK = "cutback"
COLLAPSE = "collapse"
LOSS = "loss"
PTO = "pto"
UNDO = "undo"
FLAG = "flag"
EVENT_CLASSES: Final[tuple[str, ...]] = (ACK, SEND, CUTBACK, COLLAPSE, LOSS, PTO, UNDO, FLAG)


def _threshold(default: float, unit: str, doc: str) -> Any:
    return field(default=default, metadata={"unit": unit, "doc": doc})


@dataclass(frozen=True)
class Thresholds:
    """The derivation's tunable numbers; each field's metadata gives its unit and meaning."""

    pto_gap_fraction: float = _threshold(
        0.9,
        "fraction of the PTO period",
        "for stacks that log no probe timeout: a send this long after the previous one, with "
        "bytes in flight, is a PTO's probe (RFC 9002 section 6.2.1)",
    )
    granularity_ms: float = _threshold(
        1.0, "ms", "timer granularity in the PTO period (RFC 9002 section 6.2.1 kGranularity)"
    )
    slow_start_stall_datagrams: float = _threshold(
        4.0,
        "datagrams",
        "for stacks that log no ssthresh: cwnd-limited ACKs acknowledging this much without "
        "the window growing end slow start (in slow start every acknowledged datagram grows "
        "it, RFC 9002 section 7.3.1; HyStart, RFC 9406); with ssthresh logged, such a stall is "
        "a window cap",
    )
    plateau_windows: float = _threshold(
        1.5,
        "windows",
        "in congestion avoidance, cwnd-limited ACKs acknowledging this many windows without "
        "growth mean the window is at a cap (Reno grows one datagram per window, RFC 9002 "
        "section 7.3.3)",
    )
    datagram_step_min_bytes: float = _threshold(
        1000.0, "bytes", "smallest window step (per datagram) taken as the datagram size"
    )
    datagram_step_max_bytes: float = _threshold(
        1500.0, "bytes", "largest window step (per datagram) taken as the datagram size"
    )


@dataclass
class Context:
    """The open state of one trace: O(1) numbers, whatever the trace's length."""

    profile: Profile
    thresholds: Thresholds = field(default_factory=Thresholds)
    state: str = INIT
    time: float = 0.0
    cwnd: float | None = None
    #: the window before the current event
    prior_cwnd: float | None = None
    logged_ssthresh: float | None = None
    inferred_ssthresh: float = float("inf")
    bytes_in_flight: float | None = None
    #: bytes in flight before the current event (quic-go ``priorInFlight``)
    prior_in_flight: float | None = None
    smoothed_rtt: float | None = None
    rtt_variance: float | None = None
    #: the current event's RTT sample (``latest_rtt`` of an ACK), ms
    rtt_sample: float | None = None
    datagram: float = 1200.0
    consecutive_ptos: int = 0
    #: time the current recovery period started (the last cutback), ``None`` outside one
    recovery_start: float | None = None
    last_send: float | None = None
    #: bytes acknowledged by cwnd-limited ACKs since the window last changed
    acked_since_change: float = 0.0
    app_limited_flag: bool | None = None
    #: the window stalled in slow start and stayed still for whole windows: a cap
    stall_is_cap: bool = False
    #: a window cap learnt from the trace, in datagrams (a cap counts datagrams, so it moves
    #: with the datagram size)
    cap_datagrams: float | None = None
    #: whether the trace has shown these at all (for the "cannot be derived" notices)
    seen_cwnd: bool = False
    seen_in_flight: bool = False
    seen_rtt: bool = False
    seen_pto: bool = False

    def __post_init__(self) -> None:
        self.datagram = float(self.profile.datagram_bytes)

    @property
    def ssthresh(self) -> float:
        if self.logged_ssthresh is not None:
            return self.logged_ssthresh
        return self.inferred_ssthresh


Condition = Callable[[Context], bool]


# --- conditions (pure functions of the context) --------------------------------------------


def always(ctx: Context) -> bool:
    return True


def first_pto(ctx: Context) -> bool:
    """The first probe timeout in a row (``pto_count`` = 1)."""
    return ctx.consecutive_ptos <= 1


def in_recovery_period(ctx: Context) -> bool:
    """The ACK acknowledged no packet sent after the recovery period began (RFC 9002 section
    7.3.2; quic-go ``InRecovery``: largest acked <= largest sent at the last cutback; aioquic:
    ``sent_time <= _congestion_recovery_start_time``)."""
    return ctx.recovery_start is not None


def slow_start(ctx: Context) -> bool:
    """``cwnd < ssthresh`` (RFC 9002 section 7.3.1), ssthresh logged or inferred."""
    window = ctx.prior_cwnd if ctx.prior_cwnd is not None else ctx.cwnd
    return window is None or window < ctx.ssthresh


def app_limited_flag(ctx: Context) -> bool:
    """The producer says so (picoquic ``app_limited``, quiche ``cf_app_limited``)."""
    return bool(ctx.app_limited_flag)


def not_cwnd_limited(ctx: Context) -> bool:
    """The bytes in flight before the ACK left room in the window (RFC 9002 section 7.8;
    quic-go ``isCwndLimited``: in flight >= cwnd, or > cwnd/2 in slow start, or within
    ``maxBurstPackets`` datagrams of cwnd, counts as limited)."""
    window = ctx.prior_cwnd if ctx.prior_cwnd is not None else ctx.cwnd
    if window is None or ctx.prior_in_flight is None:
        return False
    in_flight = ctx.prior_in_flight
    if in_flight >= window:
        return False
    if ctx.profile.slow_start_half_window and slow_start(ctx) and in_flight > window / 2:
        return False
    return window - in_flight > ctx.profile.burst_datagrams * ctx.datagram


def at_window_cap(ctx: Context) -> bool:
    """The window is at the stack's maximum (quic-go ``maxCongestionWindow``: a number of
    datagrams, built in or learnt from an earlier plateau)."""
    window = ctx.prior_cwnd if ctx.prior_cwnd is not None else ctx.cwnd
    if window is None:
        return False
    for cap in (ctx.profile.max_cwnd_datagrams, ctx.cap_datagrams):
        if cap is not None and window >= (cap - 0.5) * ctx.datagram:
            return True
    return False


def window_plateau(ctx: Context) -> bool:
    """A window that stopped growing: in congestion avoidance, cwnd-limited ACKs acknowledged
    :attr:`Thresholds.plateau_windows` windows without a change; in slow start (known from a
    logged ssthresh), :attr:`Thresholds.slow_start_stall_datagrams` datagrams (a cap below the
    built-in one, e.g. a configured maximum window)."""
    window = ctx.cwnd
    if window is None:
        return False
    if slow_start(ctx):
        # in slow start every acknowledged datagram grows the window; a stack that logs
        # ssthresh has not left slow start, so a stall is a cap
        return (
            ctx.logged_ssthresh is not None or ctx.profile.logs_ssthresh or ctx.stall_is_cap
        ) and ctx.acked_since_change >= ctx.thresholds.slow_start_stall_datagrams * ctx.datagram
    return ctx.acked_since_change >= ctx.thresholds.plateau_windows * window


def undo_back_in_recovery(ctx: Context) -> bool:
    """After an undo the restored recovery period is still open (quic-go v0.65
    ``OnSpuriousLoss``: ``InRecovery()`` with the restored largest-sent-at-cutback)."""
    return ctx.recovery_start is not None


@dataclass(frozen=True)
class Rule:
    """In ``current`` (``None``: any state), on ``event``, if ``when`` holds: go to ``to``."""

    current: frozenset[str] | None
    event: str
    when: Condition
    to: str
    cite: str

    @property
    def trigger(self) -> str:
        """How derived rows name the rule (the ``trigger`` column)."""
        cond = self.when.__name__
        return self.event if cond == "always" else f"{self.event}:{cond}"


ANY = None

#: The derivation, first match wins.
RULES: Final[tuple[Rule, ...]] = (
    Rule(
        ANY,
        PTO,
        first_pto,
        TLP,
        "RFC 9002 section 6.2.4: the first probe timeout sends probes without touching the "
        "window (the paper's tail loss probe)",
    ),
    Rule(
        ANY,
        PTO,
        always,
        RTO,
        "RFC 9002 section 6.2.1: consecutive probe timeouts back off exponentially (the "
        "paper's retransmission timeout)",
    ),
    Rule(
        ANY,
        COLLAPSE,
        always,
        RTO,
        "RFC 9002 section 7.6.2: persistent congestion collapses the window to the minimum "
        "(aioquic recovery.py on_persistent_congestion)",
    ),
    Rule(
        ANY,
        CUTBACK,
        always,
        RECOVERY,
        "RFC 9002 section 7.3.2: a congestion event reduces the window and starts a recovery "
        "period (quic-go OnCongestionEvent, aioquic on_packets_lost)",
    ),
    Rule(
        ANY,
        LOSS,
        always,
        RECOVERY,
        "RFC 9002 section 7.3.2, for traces that log no window: every packet_lost starts a "
        "recovery period",
    ),
    Rule(
        ANY,
        UNDO,
        undo_back_in_recovery,
        RECOVERY,
        "quic-go v0.65 OnSpuriousLoss: the restored recovery period is still open",
    ),
    Rule(
        ANY,
        UNDO,
        slow_start,
        SLOW_START,
        "quic-go v0.65 OnSpuriousLoss: the restored window is below the restored ssthresh",
    ),
    Rule(
        ANY,
        UNDO,
        always,
        CONGESTION_AVOIDANCE,
        "quic-go v0.65 OnSpuriousLoss: the restored window is at or above ssthresh",
    ),
    Rule(
        ANY,
        ACK,
        in_recovery_period,
        RECOVERY,
        "RFC 9002 section 7.3.2: recovery ends when a packet sent during it is acknowledged",
    ),
    Rule(
        ANY,
        ACK,
        app_limited_flag,
        APP_LIMITED,
        "the producer's own application-limited flag (picoquic, quiche)",
    ),
    Rule(
        ANY,
        ACK,
        not_cwnd_limited,
        APP_LIMITED,
        "RFC 9002 section 7.8: an ACK that arrives while the sender is not cwnd-limited "
        "(quic-go cubic_sender.go isCwndLimited)",
    ),
    Rule(
        ANY,
        ACK,
        at_window_cap,
        MAXED,
        "quic-go cubic_sender.go maybeIncreaseCwnd: no growth at maxCongestionWindow",
    ),
    Rule(
        ANY,
        ACK,
        window_plateau,
        MAXED,
        "RFC 9002 section 7.3.3: in congestion avoidance a cwnd-limited window grows each "
        "window acknowledged; one that stops growing is at a cap",
    ),
    Rule(
        ANY, ACK, slow_start, SLOW_START, "RFC 9002 section 7.3.1: slow start while cwnd < ssthresh"
    ),
    Rule(
        ANY,
        ACK,
        always,
        CONGESTION_AVOIDANCE,
        "RFC 9002 section 7.3.3: congestion avoidance once cwnd >= ssthresh",
    ),
    Rule(
        ANY,
        FLAG,
        app_limited_flag,
        APP_LIMITED,
        "the producer's own application-limited flag (picoquic, quiche)",
    ),
    Rule(
        frozenset({APP_LIMITED}),
        FLAG,
        slow_start,
        SLOW_START,
        "RFC 9002 section 7.3.1, once the application-limited flag clears",
    ),
    Rule(
        frozenset({APP_LIMITED}),
        FLAG,
        always,
        CONGESTION_AVOIDANCE,
        "RFC 9002 section 7.3.3, once the application-limited flag clears",
    ),
)

#: which event classes have rules (the deriver skips the others without a lookup)
RULES_BY_EVENT: Final[dict[str, tuple[Rule, ...]]] = {
    event: tuple(r for r in RULES if r.event == event) for event in EVENT_CLASSES
}


def next_state(ctx: Context, event: str) -> Rule | None:
    """The first rule that applies to ``event`` in ``ctx``, ``None`` if none does."""
    for rule in RULES_BY_EVENT[event]:
        if (rule.current is None or ctx.state in rule.current) and rule.when(ctx):
            return rule
    return None


def render_thresholds_markdown() -> str:
    """The thresholds as Markdown (docs/derive.md is generated from them)."""
    lines = ["| threshold | default | unit | meaning |", "|---|---|---|---|"]
    for f in fields(Thresholds):
        lines.append(f"| `{f.name}` | {f.default} | {f.metadata['unit']} | {f.metadata['doc']} |")
    return "\n".join(lines)


def render_markdown() -> str:
    """The table as Markdown (docs/derive.md is generated from it)."""
    lines = [
        "| # | in state | on | if | next state | models |",
        "|---|---|---|---|---|---|",
    ]
    for i, rule in enumerate(RULES, 1):
        current = "any" if rule.current is None else ", ".join(sorted(rule.current))
        cond = "" if rule.when is always else f"`{rule.when.__name__}`"
        lines.append(f"| {i} | {current} | `{rule.event}` | {cond} | {rule.to} | {rule.cite} |")
    return "\n".join(lines)
