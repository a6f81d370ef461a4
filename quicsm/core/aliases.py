"""One table mapping every known producer's congestion-state names onto the canonical states.

The table is data, not branches: :data:`ALIASES` lists ``(producer, raw name, canonical state)``
rows and :data:`NUMERIC_STATES` lists picoquic's numeric states per congestion-control
algorithm. Lookups normalise a name by lower-casing it and dropping every character that is not
a letter or a digit, so ``slow_start``, ``SlowStart`` and ``SLOW-START`` are one name.

qlog leaves the values of ``congestion_state_updated`` unspecified (quic-events draft,
section "congestion_state_updated"), so every stack invents its own; the rows below come from
reading each stack's source. ``docs/states.md`` is generated from this table
(:func:`render_markdown`) and a test keeps it current.

A name that no row maps is *not* dropped: it becomes :data:`quicsm.core.states.UNKNOWN` and the raw
name is kept in ``raw_state``; the readers report it as a warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from quicsm.core.states import CANONICAL_STATES, UNKNOWN


@dataclass(frozen=True)
class Alias:
    """One producer's name for a canonical state."""

    producer: str
    raw: str
    state: str
    note: str = ""


@dataclass(frozen=True)
class NumericAlias:
    """A picoquic numeric state: its meaning depends on the congestion-control algorithm."""

    algorithm: str
    number: int
    state: str
    meaning: str


_OURS = "quicsm instrumentation"

#: every known string name, in documentation order
ALIASES: Final[tuple[Alias, ...]] = (
    # quic-go: qlog/types.go CongestionState (recovery:congestion_state_updated, `new` only)
    Alias("quic-go", "slow_start", "SlowStart"),
    Alias("quic-go", "congestion_avoidance", "CongestionAvoidance"),
    Alias("quic-go", "recovery", "Recovery"),
    Alias("quic-go", "application_limited", "ApplicationLimited"),
    # quiche: recovery/congestion/reno.rs state_str (Reno and CUBIC), gcongestion/bbr2/*
    Alias("quiche", "slow_start", "SlowStart"),
    Alias("quiche", "conservative_slow_start", "SlowStart", "HyStart++ CSS (RFC 9406)"),
    Alias("quiche", "congestion_avoidance", "CongestionAvoidance"),
    Alias("quiche", "recovery", "Recovery"),
    Alias("quiche", "bbr_startup", "Startup"),
    Alias("quiche", "bbr_drain", "Drain"),
    Alias("quiche", "bbr_probe_bw", "ProbeBW"),
    Alias("quiche", "bbr_probe_bw_up", "ProbeBW"),
    Alias("quiche", "bbr_probe_bw_down", "ProbeBW"),
    Alias("quiche", "bbr_probe_bw_cruise", "ProbeBW"),
    Alias("quiche", "bbr_probe_bw_refill", "ProbeBW"),
    Alias("quiche", "bbr_probe_rtt", "ProbeRTT"),
    # neqo: cc/classic_cc.rs State::to_qlog (persistent congestion is logged as slow_start)
    Alias("neqo", "slow_start", "SlowStart"),
    Alias("neqo", "congestion_avoidance", "CongestionAvoidance"),
    Alias("neqo", "recovery", "Recovery"),
    # mvfst: cubicStateToString, NewReno and BBR state names
    Alias("mvfst", "Hystart", "SlowStart", "CUBIC"),
    Alias("mvfst", "Steady", "CongestionAvoidance", "CUBIC"),
    Alias("mvfst", "FastRecovery", "Recovery", "CUBIC"),
    Alias("mvfst", "SlowStart", "SlowStart", "NewReno"),
    Alias("mvfst", "CongestionAvoidance", "CongestionAvoidance", "NewReno"),
    Alias("mvfst", "Recovery", "Recovery", "NewReno"),
    Alias("mvfst", "Startup", "Startup", "BBR"),
    Alias("mvfst", "Drain", "Drain", "BBR"),
    Alias("mvfst", "ProbeBw", "ProbeBW", "BBR"),
    Alias("mvfst", "ProbeRtt", "ProbeRTT", "BBR"),
    # our own instrumentation writes the canonical names (CamelCase) or their snake_case forms
    *(Alias(_OURS, name, name) for name in CANONICAL_STATES if name != UNKNOWN),
    Alias(_OURS, "init", "Init"),
    Alias(_OURS, "slow_start", "SlowStart"),
    Alias(_OURS, "congestion_avoidance", "CongestionAvoidance"),
    Alias(_OURS, "congestion_avoidance_maxed", "CongestionAvoidanceMaxed"),
    Alias(_OURS, "application_limited", "ApplicationLimited"),
    Alias(_OURS, "retransmission_timeout", "RetransmissionTimeout"),
    Alias(_OURS, "recovery", "Recovery"),
    Alias(_OURS, "tail_loss_probe", "TailLossProbe"),
    Alias(_OURS, "startup", "Startup"),
    Alias(_OURS, "drain", "Drain"),
    Alias(_OURS, "probe_bw", "ProbeBW"),
    Alias(_OURS, "probe_rtt", "ProbeRTT"),
)

#: picoquic logs ``old``/``new`` as numbers (``alg_observe`` of each algorithm); their meaning
#: depends on the congestion controller, which the trace does not always say.
NUMERIC_STATES: Final[tuple[NumericAlias, ...]] = (
    # cubic.c picoquic_cubic_alg_state_t (also dcubic)
    NumericAlias("cubic", 0, "SlowStart", "picoquic_cubic_alg_slow_start"),
    NumericAlias("cubic", 1, "Recovery", "picoquic_cubic_alg_recovery"),
    NumericAlias("cubic", 2, "CongestionAvoidance", "picoquic_cubic_alg_congestion_avoidance"),
    NumericAlias("dcubic", 0, "SlowStart", "picoquic_cubic_alg_slow_start"),
    NumericAlias("dcubic", 1, "Recovery", "picoquic_cubic_alg_recovery"),
    NumericAlias("dcubic", 2, "CongestionAvoidance", "picoquic_cubic_alg_congestion_avoidance"),
    # cc_common.h picoquic_newreno_alg_state_t
    NumericAlias("newreno", 0, "SlowStart", "picoquic_newreno_alg_slow_start"),
    NumericAlias("newreno", 1, "CongestionAvoidance", "picoquic_newreno_alg_congestion_avoidance"),
    # bbr.c picoquic_bbr_alg_state_t (low 8 bits; higher bits are sub-state flags)
    NumericAlias("bbr", 0, "Startup", "picoquic_bbr_alg_startup"),
    NumericAlias("bbr", 1, "Drain", "picoquic_bbr_alg_drain"),
    NumericAlias("bbr", 2, "ProbeBW", "picoquic_bbr_alg_probe_bw_down"),
    NumericAlias("bbr", 3, "ProbeBW", "picoquic_bbr_alg_probe_bw_cruise"),
    NumericAlias("bbr", 4, "ProbeBW", "picoquic_bbr_alg_probe_bw_refill"),
    NumericAlias("bbr", 5, "ProbeBW", "picoquic_bbr_alg_probe_bw_up"),
    NumericAlias("bbr", 6, "ProbeRTT", "picoquic_bbr_alg_probe_rtt"),
    NumericAlias("bbr", 7, "Startup", "picoquic_bbr_alg_startup_long_rtt"),
    NumericAlias("bbr", 8, "Startup", "picoquic_bbr_alg_startup_resume"),
    # bbr1.c picoquic_bbr1_alg_state_t
    NumericAlias("bbr1", 0, "Startup", "picoquic_bbr1_alg_startup"),
    NumericAlias("bbr1", 1, "Drain", "picoquic_bbr1_alg_drain"),
    NumericAlias("bbr1", 2, "ProbeBW", "picoquic_bbr1_alg_probe_bw"),
    NumericAlias("bbr1", 3, "ProbeRTT", "picoquic_bbr1_alg_probe_rtt"),
    NumericAlias("bbr1", 4, "Startup", "picoquic_bbr1_alg_startup_long_rtt"),
)

#: algorithms whose numeric state keeps sub-state flags above the low byte
_LOW_BYTE_ALGORITHMS: Final[frozenset[str]] = frozenset({"bbr"})

#: names of the label / header fields that say which congestion controller a trace ran
CC_ALGORITHM_KEYS: Final[tuple[str, ...]] = ("cc_algorithm", "congestion_control", "cc_algo", "cc")

_NON_ALNUM = re.compile(r"[^0-9a-z]+")


def normalize_name(raw: str) -> str:
    """The lookup key of a state name: lower case, letters and digits only."""
    return _NON_ALNUM.sub("", raw.lower())


def _build_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for alias in ALIASES:
        if alias.state not in CANONICAL_STATES:
            raise ValueError(f"alias {alias.raw!r} maps to unknown state {alias.state!r}")
        key = normalize_name(alias.raw)
        previous = index.setdefault(key, alias.state)
        if previous != alias.state:
            raise ValueError(f"alias {alias.raw!r} maps to both {previous} and {alias.state}")
    return index


_INDEX: Final[dict[str, str]] = _build_index()
_NUMERIC_INDEX: Final[dict[tuple[str, int], str]] = {
    (n.algorithm, n.number): n.state for n in NUMERIC_STATES
}
KNOWN_ALGORITHMS: Final[frozenset[str]] = frozenset(n.algorithm for n in NUMERIC_STATES)


def normalize_algorithm(name: str) -> str:
    """Canonical spelling of a congestion-control algorithm name (``NewReno`` -> ``newreno``)."""
    key = normalize_name(name)
    return {"reno": "newreno", "bbr3": "bbr", "bbrv3": "bbr", "bbrv1": "bbr1"}.get(key, key)


def is_numeric(raw: str) -> bool:
    return raw.isascii() and raw.isdigit()


def canonical_state(raw: str, *, cc_algorithm: str | None = None) -> str:
    """Map a producer's state name onto a canonical state; :data:`UNKNOWN` when no row matches.

    Numeric names (picoquic) are looked up per ``cc_algorithm``; without a known algorithm they
    are :data:`UNKNOWN` (the caller keeps the raw name and warns).
    """
    if is_numeric(raw):
        if cc_algorithm is None:
            return UNKNOWN
        algorithm = normalize_algorithm(cc_algorithm)
        number = int(raw)
        if algorithm in _LOW_BYTE_ALGORITHMS:
            number &= 0xFF
        return _NUMERIC_INDEX.get((algorithm, number), UNKNOWN)
    return _INDEX.get(normalize_name(raw), UNKNOWN)


def render_markdown() -> str:
    """The alias tables as Markdown (the generated part of ``docs/states.md``)."""
    lines = [
        "| producer | raw name | canonical state | note |",
        "|---|---|---|---|",
    ]
    for a in ALIASES:
        lines.append(f"| {a.producer} | `{a.raw}` | {a.state} | {a.note} |")
    lines += [
        "",
        "| picoquic algorithm | number | canonical state | picoquic name |",
        "|---|---|---|---|",
    ]
    for n in NUMERIC_STATES:
        lines.append(f"| {n.algorithm} | {n.number} | {n.state} | `{n.meaning}` |")
    return "\n".join(lines) + "\n"
