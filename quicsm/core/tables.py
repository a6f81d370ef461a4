"""The tables quicsm's Python modules share with its native core, loaded from ``tables.json``.

``tables.json`` (next to this module) is the only definition of the canonical state order, the
event names and their kinds, the metric field names, the application-limited flags, the record
searches' needles, the rule table's event classes and the kinds of event a deriver is fed. The
Python modules that own these tables (:mod:`quicsm.core.states`, :mod:`quicsm.qlog.events`,
:mod:`quicsm.extract.rules`, :mod:`quicsm.extract.native`) build them from here, and
``native/build.rs`` generates the native core's Rust constants from the same file at build time;
``tests/test_native_tables.py`` checks that both ended up with the same tables.
"""

from __future__ import annotations

import json
import os
from typing import Any, Final


def _load() -> dict[str, Any]:
    # read beside this module (the package is installed as files; importlib.resources, which
    # also reads zipped packages, costs a fifth of a small command's start-up to import)
    with open(os.path.join(os.path.dirname(__file__), "tables.json"), encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


TABLES: Final[dict[str, Any]] = _load()

#: the eight states of the paper, in the order whose positions are the state codes
STATES: Final[tuple[str, ...]] = tuple(TABLES["states"])
#: event name (after the last ":", lower case) -> kind
EVENT_KINDS: Final[dict[str, str]] = dict(TABLES["event_kinds"])
STATE_NEEDLES: Final[tuple[bytes, ...]] = tuple(n.encode() for n in TABLES["state_needles"])
DERIVE_NEEDLES: Final[tuple[bytes, ...]] = tuple(n.encode() for n in TABLES["derive_needles"])
TIMER_NEEDLE: Final[bytes] = TABLES["timer_needle"].encode()
TIMER_REQUIRED: Final[bytes] = TABLES["timer_required"].encode()
#: the most JSON values one record may hold (:mod:`quicsm.qlog.budget`)
MAX_RECORD_VALUES: Final[int] = TABLES["max_record_values"]
#: normalised metric -> accepted field names, first match wins
METRIC_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    key: tuple(names) for key, names, _ in TABLES["metrics"]
}
#: metrics expressed in the trace's time unit
TIME_METRICS: Final[frozenset[str]] = frozenset(key for key, _, timed in TABLES["metrics"] if timed)
APP_LIMITED_FIELDS: Final[tuple[str, ...]] = tuple(TABLES["app_limited_fields"])
EVENT_CLASSES: Final[tuple[str, ...]] = tuple(TABLES["event_classes"])
FEED_KINDS: Final[tuple[str, ...]] = tuple(TABLES["feed_kinds"])
