"""The native deriver: the same derivation as :mod:`quicsm.extract.deriver`, in Rust.

``quicsm._native`` (the Rust crate in ``native/``, built into the package by maturin) holds a
port of :class:`~quicsm.extract.deriver.Deriver` and of the JSON-SEQ/NDJSON derive pass of
:class:`~quicsm.qlog.seq.SeqScanner`: it finds the records that carry metrics, losses and
timers in a whole block, decodes the few fields the deriver reads and applies the rule table,
without a Python object per event. The Python modules stay the reference: the rule table is
handed over from :data:`quicsm.extract.rules.RULES` when a deriver is made, every record the
native decoder cannot read exactly as the Python reader would is handed back to it (it then
reports the record's problem, if any, and feeds its event to the same native deriver), and
``tests/test_native.py`` checks that both give the same rows.

:func:`make_deriver` gives the native deriver when ``quicsm._native`` was built and the
environment variable ``QUICSM_NATIVE`` is not ``0``; otherwise the Python one. Both have
``feed``, ``rows`` and ``notices``; only the native one has ``scan_records``.
"""

from __future__ import annotations

import functools
from array import array
from typing import Any, Final

from quicsm.core import native, tables
from quicsm.extract.deriver import STATE_CODES, CompactRows, Deriver, notices_of
from quicsm.extract.profiles import Profile
from quicsm.extract.rules import EVENT_CLASSES, RULES, Thresholds
from quicsm.qlog.events import METRIC_FIELDS, MetricEvent

_KINDS: Final[dict[str, int]] = {kind: i for i, kind in enumerate(tables.FEED_KINDS)}
_METRICS: Final[tuple[str, ...]] = tuple(METRIC_FIELDS)
_STATE_INDEX: Final[dict[str, int]] = {s: i for i, s in enumerate(STATE_CODES)}
_EVENT_INDEX: Final[dict[str, int]] = {e: i for i, e in enumerate(EVENT_CLASSES)}


@functools.cache
def _rule_table() -> list[tuple[list[int] | None, int, str, int, str]]:
    """:data:`~quicsm.extract.rules.RULES` as the native side reads them (made once: every
    trace's deriver gets the same table)."""
    return [
        (
            None if rule.current is None else sorted(_STATE_INDEX[s] for s in rule.current),
            _EVENT_INDEX[rule.event],
            rule.when.__name__,
            _STATE_INDEX[rule.to],
            rule.trigger,
        )
        for rule in RULES
    ]


class NativeDeriver:
    """A trace's deriver in ``quicsm._native``; the interface of
    :class:`~quicsm.extract.deriver.Deriver` (``feed``, ``rows``, ``notices``) plus
    ``scan_records``, the derive pass over a block of records."""

    __slots__ = ("_native", "profile")

    def __init__(self, profile: Profile, *, thresholds: Thresholds | None = None) -> None:
        ext = native.module()
        if ext is None:
            raise RuntimeError("quicsm._native was not built or QUICSM_NATIVE=0")
        th = thresholds or Thresholds()
        self.profile = profile
        # Profile and Thresholds are read by the native side attribute by attribute, by name
        self._native = ext.Deriver(
            profile,
            th,
            _rule_table(),
        )

    def feed(self, event: MetricEvent) -> None:
        """One event decoded by the Python reader."""
        values = event.values
        self._native.feed(
            float(event.time),
            _KINDS[event.event],
            [values.get(name) for name in _METRICS],
            event.app_limited,
        )

    def scan_records(
        self,
        buf: Any,
        pos: int,
        end: int,
        sep: int,
        scale: float,
        latest: float | None,
        latest_other: float | None,
        feed: bool,
        no_states: bool = False,
    ) -> tuple[int, int, float | None, float | None, bool, int]:
        """The derive pass over the records between the separators at ``buf[pos]`` and
        ``buf[end]`` (see ``native/src/scan.rs``); ``no_states``: no record there holds the
        explicit-state needle (the caller searched the same bytes)."""
        result: tuple[int, int, float | None, float | None, bool, int] = self._native.scan(
            buf, pos, end, sep, scale, latest, latest_other, feed, no_states
        )
        return result

    @property
    def native(self) -> Any:
        """The ``quicsm._native.Deriver`` itself (the contained-JSON reader feeds it events
        it decodes natively, ``quicsm._native.contained_events``)."""
        return self._native

    @property
    def rows(self) -> CompactRows:
        """The rows derived so far, as :class:`~quicsm.extract.deriver.CompactRows`."""
        times, states, triggers, names = self._native.rows()
        rows = CompactRows()
        rows.times = array("d", times)
        rows.states = array("B", states)
        rows.triggers = array("H", triggers)
        rows.trigger_names = list(names)
        rows._trigger_codes = {name: i for i, name in enumerate(names)}
        return rows

    @property
    def state(self) -> str:
        """The current derived state."""
        return STATE_CODES[self._native.status()[6]]

    def status(self) -> tuple[int, bool, bool, bool, bool, bool | None, int]:
        """What the trace showed (see :meth:`quicsm.extract.deriver.Deriver.status`)."""
        status: tuple[int, bool, bool, bool, bool, bool | None, int] = self._native.status()
        return status

    def notices(self) -> list[tuple[tuple[str, ...], str]]:
        events, cwnd, in_flight, rtt, pto, flag, _ = self._native.status()
        return notices_of(
            events=events,
            seen_cwnd=cwnd,
            seen_in_flight=in_flight,
            seen_rtt=rtt,
            seen_pto=pto,
            app_limited_flag=flag,
        )


def make_deriver(
    profile: Profile, *, thresholds: Thresholds | None = None
) -> Deriver | NativeDeriver:
    """The native deriver where it is installed and enabled, else the Python one."""
    if native.module() is not None:
        return NativeDeriver(profile, thresholds=thresholds)
    return Deriver(profile, thresholds=thresholds)
