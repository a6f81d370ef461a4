"""Explicit, derived and hybrid congestion states of one trace.

Three modes (``states=`` of the readers, ``--states`` of the CLI):

- ``explicit``: only what the producer logged in ``congestion_state_updated`` (a trace that
  logs none has only its ``Init`` row);
- ``derived``: only states derived from metrics, losses and timers by the rule table
  (:mod:`quicsm.extract.rules`), explicit events set aside;
- ``hybrid`` (the default): explicit states where the producer logs them, derived states for
  the states it does not log (quic-go logs no ``TailLossProbe``, ``RetransmissionTimeout``,
  ``CongestionAvoidanceMaxed`` or ``Init``; aioquic logs none). Each row says which in
  ``source``.

The producer profile (:mod:`quicsm.extract.profiles`) is detected per trace unless given.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from quicsm.core.choices import DERIVED as DERIVED
from quicsm.core.choices import EXPLICIT as EXPLICIT
from quicsm.core.choices import HYBRID as HYBRID
from quicsm.core.choices import STATE_MODES as STATE_MODES
from quicsm.core.errors import InputError
from quicsm.core.states import PAPER_STATES
from quicsm.extract.deriver import CompactRows, DerivedState, Deriver
from quicsm.extract.profiles import Profile
from quicsm.extract.rules import INIT, Thresholds
from quicsm.qlog.events import MetricEvent

#: states no stock stack logs: a trace that logs one of them is instrumented and logs all eight
INSTRUMENTED_ONLY: Final[frozenset[str]] = frozenset(
    {INIT, "TailLossProbe", "RetransmissionTimeout", "CongestionAvoidanceMaxed"}
)

__all__ = [
    "DERIVED",
    "EXPLICIT",
    "HYBRID",
    "INSTRUMENTED_ONLY",
    "STATE_MODES",
    "DerivedState",
    "Derivation",
    "Row",
    "check_mode",
    "derive_states",
    "logged_states",
    "merge_hybrid",
]


def check_mode(states: str) -> str:
    if states not in STATE_MODES:
        raise InputError(f"states must be one of {', '.join(STATE_MODES)}, not {states!r}")
    return states


@dataclass(frozen=True, slots=True)
class Row:
    """One state entered: time (trace clock, ms), canonical state, raw name, trigger, source."""

    time: float
    state: str
    raw: str | None
    trigger: str | None
    source: str


@dataclass
class Derivation:
    """The derived states of one trace and what it cannot show."""

    profile: Profile
    #: a list, or :class:`~quicsm.extract.deriver.CompactRows` when derived while reading
    states: list[DerivedState] | CompactRows = field(default_factory=list)
    #: ``(states, reason)``: "<states> cannot be derived: <reason>" (no states: all of them)
    notices: list[tuple[tuple[str, ...], str]] = field(default_factory=list)
    #: what the deriver saw (``Deriver.status()``; ``None`` when not derived)
    status: tuple[int, bool, bool, bool, bool, bool | None, int] | None = None


def derive_states(
    events: Iterable[MetricEvent], *, profile: Profile, thresholds: Thresholds | None = None
) -> Derivation:
    """Run the deriver over ``events`` (file order) and collect its rows and notices."""
    deriver = Deriver(profile, thresholds=thresholds)
    for event in events:
        deriver.feed(event)
    return Derivation(profile, list(deriver.rows), deriver.notices(), deriver.status())


def logged_states(profile: Profile, explicit: Iterable[str]) -> frozenset[str]:
    """The states a trace's producer logs: its profile's, plus every state it did log (and
    Init, which its first logged state ends, unless the profile says that state comes at
    creation); all eight when it logged one that no stock stack logs (quicsm's
    instrumentation)."""
    seen = frozenset(explicit)
    if seen & INSTRUMENTED_ONLY:
        return frozenset(PAPER_STATES)
    if seen and not profile.creation_state_is_init:
        seen |= {INIT}  # the first explicit state ends Init
    return profile.logged_states | seen


def merge_hybrid(
    explicit: list[Row], derived: list[DerivedState], *, logged: frozenset[str]
) -> list[Row]:
    """Explicit rows where the producer logs the state, derived rows where it does not.

    Both inputs are step functions of time (each row lasts until the next). At every moment
    the derived state is shown when the producer never logs it and it began no earlier than
    the current explicit state (or nothing explicit was logged yet); otherwise the explicit
    state is: a state the producer logs is never derived, and a later explicit change ends a
    derived state that the events after it no longer confirm.
    """
    points: list[tuple[float, int, int]] = [(r.time, 0, i) for i, r in enumerate(explicit)]
    points += [(d.time, 1, i) for i, d in enumerate(derived)]
    points.sort()
    out: list[Row] = []
    current_explicit: Row | None = None
    current_derived: Row = Row(0.0, INIT, None, None, DERIVED)
    shown: tuple[str, str] | None = None
    initial = True  # the derived Init before any derived decision
    for time, which, index in points:
        if which == 0:
            current_explicit = explicit[index]
        else:
            initial = False
            d = derived[index]
            current_derived = Row(d.time, d.state, None, d.trigger, DERIVED)
        if (
            current_explicit is None
            or (initial and INIT not in logged)
            or (
                current_derived.state not in logged
                and current_derived.time >= current_explicit.time
            )
        ):
            pick = current_derived
        else:
            pick = current_explicit
        key = (pick.state, pick.source)
        if key != shown:
            out.append(Row(time, pick.state, pick.raw, pick.trigger, pick.source))
            shown = key
    return out
