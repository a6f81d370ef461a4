"""Producer profiles: what a QUIC stack logs and how its congestion controller behaves.

The deriver (:mod:`quicsm.extract.deriver`) needs a few facts that a trace does not state: the
datagram size its window counts in, the slack of its "cwnd-limited" test, whether it logs
``ssthresh`` and probe timeouts, whether a window cap is built in, and which congestion states
it logs itself (for hybrid mode). A :class:`Profile` holds them, each field with its unit and
the stack source it comes from. :func:`detect_profile` picks one from a trace's header
(``title``, ``code_version``, labels) and its metric fields; a user can name one instead
(``profile=`` in the readers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from quicsm.core.errors import InputError
from quicsm.core.states import PAPER_STATES
from quicsm.extract.sentinels import SSTHRESH_UNSET_FROM


@dataclass(frozen=True)
class Profile:
    """What one producer logs and how its controller decides (all sizes in bytes)."""

    name: str
    #: one line: which stack and release range, and the source files the numbers come from
    description: str
    #: canonical states the producer logs itself in ``congestion_state_updated``
    logged_states: frozenset[str]
    #: the unit the window grows by (maximum datagram size at start), bytes; refined from the
    #: trace as soon as a window step of a plausible size is seen
    datagram_bytes: int
    #: "cwnd-limited" slack: the sender is application-limited on an ACK when the bytes in
    #: flight before it are more than this many datagrams below the window (quic-go
    #: ``maxBurstPackets``; RFC 9002 section 7.8 leaves the slack to the sender)
    burst_datagrams: int = 3
    #: in slow start, more than half a window in flight also counts as cwnd-limited (quic-go
    #: ``isCwndLimited``)
    slow_start_half_window: bool = True
    #: a built-in window cap, in datagrams (quic-go ``MaxCongestionWindowPackets``); ``None``
    #: when the stack has none; a cap below it is still recognised from the window's plateau
    max_cwnd_datagrams: int | None = None
    #: the minimum window, in datagrams (RFC 9002 section 7.2 ``kMinimumWindow``)
    min_cwnd_datagrams: int = 2
    #: the stack logs ``ssthresh`` in its metrics (otherwise it is inferred from cutbacks)
    logs_ssthresh: bool = True
    #: an ``ssthresh`` at or above this means "not set" (quinn logs u64::MAX), bytes
    ssthresh_unset_from: float = SSTHRESH_UNSET_FROM
    #: the stack logs probe timeouts (``pto_count`` or an expired ``pto`` timer); otherwise
    #: a probe timeout is recognised from a send after a silent PTO period
    logs_pto: bool = True
    #: the stack logs ``packet_lost`` events (quiche does not: its plots say "not logged")
    logs_packet_lost: bool = True
    #: persistent congestion collapses the window to the minimum (RFC 9002 section 7.6.2);
    #: aioquic implements it, quic-go up to v0.65 does not
    persistent_congestion: bool = True
    #: the first state the stack logs comes when its controller is created, before any
    #: decision (quic-go logs slow_start there): hybrid mode shows the paper's Init until the
    #: first derived decision. For other producers the first explicit state ends Init.
    creation_state_is_init: bool = False
    #: the peer's max_ack_delay assumed in the PTO period when the trace does not say, ms
    #: (RFC 9000 section 18.2 default)
    max_ack_delay_ms: float = 25.0


_QUIC_GO_LOGS = frozenset({"SlowStart", "CongestionAvoidance", "Recovery", "ApplicationLimited"})

PROFILES: Final[dict[str, Profile]] = {
    p.name: p
    for p in (
        Profile(
            name="quic-go",
            description=(
                "quic-go (internal/congestion/cubic_sender.go: NewReno by default, "
                "initialMaxDatagramSize 1252, maxBurstPackets 3, MaxCongestionWindowPackets "
                "10000; no ssthresh in its metrics; logs slow_start, congestion_avoidance, "
                "recovery, application_limited; pto_count and pto timers logged)"
            ),
            logged_states=_QUIC_GO_LOGS,
            datagram_bytes=1252,
            max_cwnd_datagrams=10000,
            logs_ssthresh=False,
            persistent_congestion=False,
            creation_state_is_init=True,
        ),
        Profile(
            name="aioquic",
            description=(
                "aioquic (quic/recovery.py, quic/congestion/{reno,cubic}.py: max_datagram_size "
                "1200, K_MINIMUM_WINDOW 2, no window cap; logs cwnd, ssthresh, bytes_in_flight "
                "and RTTs but no congestion state and no PTO)"
            ),
            logged_states=frozenset(),
            datagram_bytes=1200,
            logs_pto=False,
        ),
        Profile(
            name="quiche",
            description=(
                "quiche (recovery/congestion: logs congestion_state_updated and cf_app_limited; "
                "no packet_lost or timer events)"
            ),
            logged_states=frozenset({"SlowStart", "CongestionAvoidance", "Recovery"}),
            datagram_bytes=1200,
            logs_pto=False,
            logs_packet_lost=False,
        ),
        Profile(
            name="quinn",
            description=(
                "quinn (via the qlog crate: ssthresh is u64::MAX until the first loss; no "
                "congestion state)"
            ),
            logged_states=frozenset(),
            datagram_bytes=1200,
            logs_pto=False,
        ),
        Profile(
            name="picoquic",
            description=(
                "picoquic (numeric congestion states per controller, app_limited flag, times "
                "in microseconds)"
            ),
            logged_states=frozenset({"SlowStart", "CongestionAvoidance", "Recovery"}),
            datagram_bytes=1252,
        ),
        Profile(
            name="neqo",
            description="neqo (logs slow_start, congestion_avoidance, recovery with old/new)",
            logged_states=frozenset({"SlowStart", "CongestionAvoidance", "Recovery"}),
            datagram_bytes=1232,
        ),
        Profile(
            name="mvfst",
            description="mvfst (congestion_metric_update carries its own state)",
            logged_states=frozenset({"SlowStart", "CongestionAvoidance", "Recovery"}),
            datagram_bytes=1252,
        ),
        Profile(
            name="ngtcp2",
            description="ngtcp2 (metrics with cwnd, ssthresh, bytes_in_flight, pto_count)",
            logged_states=frozenset(),
            datagram_bytes=1200,
        ),
        Profile(
            name="quicsm",
            description=(
                "a stack patched by quicsm's instrumentation (logs all eight states); the "
                "derivation uses the rules of the patched stack's own profile"
            ),
            logged_states=frozenset(PAPER_STATES),
            datagram_bytes=1252,
        ),
        Profile(
            name="generic",
            description=(
                "an unrecognised producer: RFC 9002 defaults (1200-byte datagrams, ssthresh "
                "used when logged, inferred from cutbacks when not)"
            ),
            logged_states=frozenset(),
            datagram_bytes=1200,
            logs_ssthresh=False,
            logs_pto=False,
        ),
    )
}

#: the names :func:`detect_profile` looks for in a trace's title / code_version / labels
_NAME_HINTS: Final[tuple[tuple[str, str], ...]] = (
    ("quic-go", "quic-go"),
    ("quicgo", "quic-go"),
    ("aioquic", "aioquic"),
    ("quiche", "quiche"),
    ("quinn", "quinn"),
    ("picoquic", "picoquic"),
    ("neqo", "neqo"),
    ("mvfst", "mvfst"),
    ("ngtcp2", "ngtcp2"),
)


def profile_named(name: str) -> Profile:
    """A profile by name; an unknown name is an :class:`InputError` listing the known ones."""
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise InputError(f"unknown producer profile {name!r}; known: {known}") from None


def detect_profile(
    *,
    title: str | None,
    code_version: str | None,
    labels: Mapping[str, Any],
    metric_fields: frozenset[str] = frozenset(),
) -> Profile:
    """The producer of a trace, from (in order) its labels' ``stack``, its title, its
    ``code_version`` and the names of its metric fields; ``generic`` when nothing matches."""
    texts = [labels.get("stack"), labels.get("producer"), title]
    for text in texts:
        if isinstance(text, str):
            lowered = text.lower()
            for hint, name in _NAME_HINTS:
                if hint in lowered:
                    return PROFILES[name]
    if isinstance(code_version, str) and code_version.startswith("v0.") and not title:
        return PROFILES["quic-go"]  # quic-go writes its module version, e.g. "v0.48.2"
    if "cubic-wmax" in metric_fields or "cwnd" in metric_fields:
        return PROFILES["aioquic"]  # aioquic's field names (marx-00 style "cwnd")
    if "cf_app_limited" in metric_fields:
        return PROFILES["quiche"]
    return PROFILES["generic"]


def with_overrides(profile: Profile, **changes: Any) -> Profile:
    """A copy of ``profile`` with some fields replaced (unknown fields are an InputError)."""
    unknown = set(changes) - set(Profile.__dataclass_fields__)
    if unknown:
        raise InputError(f"unknown profile fields {sorted(unknown)}")
    return replace(profile, **changes)


def render_markdown() -> str:
    """The profiles as Markdown (docs/derive.md is generated from them)."""
    lines = [
        "| profile | logs states | ssthresh | PTO | datagram (bytes) | cap (datagrams) | "
        "persistent congestion | source |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in PROFILES.values():
        logged = ", ".join(s for s in PAPER_STATES if s in p.logged_states) or "none"
        lines.append(
            f"| `{p.name}` | {logged} | {'logged' if p.logs_ssthresh else 'inferred'} | "
            f"{'logged' if p.logs_pto else 'from silence'} | {p.datagram_bytes} | "
            f"{p.max_cwnd_datagrams or '-'} | {'yes' if p.persistent_congestion else 'no'} | "
            f"{p.description} |"
        )
    return "\n".join(lines)
