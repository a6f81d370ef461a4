"""The few qlog events that matter for congestion state, in one normalised form.

Names drift across drafts (draft-ietf-quic-qlog-quic-events): ``recovery:metrics_updated``
(draft-02, 0.3, 0.4) became ``quic:recovery_metrics_updated``; ``recovery:loss_timer_updated``
became ``quic:timer_updated``; draft-00/01 producers wrote upper-case categories such as
``RECOVERY`` or ``METRIC_UPDATE``. We therefore classify an event by the lower-cased part of its
name after the last ``:``. Field names drift too (``cwnd`` in marx-00 and aioquic,
``congestion_window`` later, ``current_cwnd`` in mvfst): :data:`METRIC_FIELDS` lists them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

from quicsm.core import tables
from quicsm.core.diagnostics import RecordProblem, describe

# event kinds
STATE = "state"
METRICS = "metrics"
LOST = "packet_lost"
TIMER = "timer"
SPURIOUS = "spurious_loss"
MVFST_METRIC = "mvfst_metric"

# The tables below are defined once, in quicsm/core/tables.json (shared with the native core).
#: event name (after the last ":", lower case) -> kind
EVENT_KINDS: Final[dict[str, str]] = tables.EVENT_KINDS

#: byte strings whose presence makes a JSON-SEQ/NDJSON record worth decoding: explicit states,
#: then (only for traces without explicit states, or when metrics are wanted) the rest
#: (``metric`` finds (recovery_)metrics_updated and mvfst's congestion_metric_update too)
STATE_NEEDLES: Final[tuple[bytes, ...]] = tables.STATE_NEEDLES
DERIVE_NEEDLES: Final[tuple[bytes, ...]] = tables.DERIVE_NEEDLES
#: a timer event matters only when a timer expired (RFC 9002 section 6.2: a PTO fired); others
#: are skipped undecoded
TIMER_NEEDLE: Final[bytes] = tables.TIMER_NEEDLE
TIMER_REQUIRED: Final[bytes] = tables.TIMER_REQUIRED

#: normalised metric -> accepted field names, first match wins (``pacing_rate``: bits per second)
METRIC_FIELDS: Final[dict[str, tuple[str, ...]]] = tables.METRIC_FIELDS
#: metrics expressed in the trace's time unit (draft-00/01 ``time_units``)
RTT_METRICS: Final[frozenset[str]] = tables.TIME_METRICS
#: application-limited flags: picoquic ``app_limited``, quiche ``cf_app_limited``
APP_LIMITED_FIELDS: Final[tuple[str, ...]] = tables.APP_LIMITED_FIELDS


_KIND_CACHE: dict[str, str | None] = {}


def event_kind(name: str) -> str | None:
    """The kind of an event name such as ``quic:congestion_state_updated``, or ``None``."""
    try:
        return _KIND_CACHE[name]
    except KeyError:
        kind = EVENT_KINDS.get(name.rpartition(":")[2].lower())
        if len(_KIND_CACHE) < 4096:  # names repeat; bound the cache against odd inputs
            _KIND_CACHE[name] = kind
        return kind


@dataclass
class StateEvent:
    time: float
    new: str
    old: str | None
    trigger: str | None


@dataclass
class MetricEvent:
    time: float
    event: str  # "metrics" | "packet_lost" | "pto" | "spurious_loss"
    values: dict[str, float] = field(default_factory=dict)
    app_limited: bool | None = None
    trigger: str | None = None


#: the largest magnitude accepted for a time or metric: differences and sums of such numbers
#: stay finite (epoch microseconds are about 1.7e15)
MAX_MAGNITUDE: Final[float] = 1e18


def as_number(
    value: object,
    offset: int | None,
    what: str,
    *,
    where: str | None = None,
    bound: float = math.inf,
) -> float:
    """A JSON number (or a numeric string, as some draft-00 producers wrote) as a float."""
    if type(value) is float and -bound <= value <= bound:  # the common case
        return value
    if isinstance(value, bool):
        raise RecordProblem(offset, f"a number for {what}", describe(value), where=where)
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond float range
            raise RecordProblem(
                offset, f"a number for {what}", "a number out of range", where=where
            ) from None
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise RecordProblem(
                offset, f"a number for {what}", describe(value), where=where
            ) from None
    else:
        raise RecordProblem(offset, f"a number for {what}", describe(value), where=where)
    if not math.isfinite(number) or abs(number) > bound:
        limit = f" (at most {bound:g})" if math.isfinite(bound) else ""
        raise RecordProblem(
            offset, f"a finite number for {what}{limit}", describe(value), where=where
        )
    return number


def _text(value: object, offset: int | None, what: str, where: str | None) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise RecordProblem(offset, f"a string for {what}", describe(value), where=where)


def _optional_text(value: object, offset: int | None, what: str, where: str | None) -> str | None:
    return None if value is None else _text(value, offset, what, where)


def state_event(
    time: float, data: object, offset: int | None, *, where: str | None = None
) -> StateEvent:
    """``congestion_state_updated``: ``{? old, new, ? trigger}`` (quic-events draft)."""
    if not isinstance(data, dict):
        raise RecordProblem(offset, 'a "data" object', describe(data), where=where)
    if "new" not in data:
        raise RecordProblem(offset, 'congestion_state_updated data with "new"', "none", where=where)
    return StateEvent(
        time,
        _text(data["new"], offset, '"new"', where),
        _optional_text(data.get("old"), offset, '"old"', where),
        _optional_text(data.get("trigger"), offset, '"trigger"', where),
    )


#: field name -> (normalised metric, preference: lower wins when a record has several names)
_FIELD_INDEX: Final[dict[str, tuple[str, int]]] = {
    name: (metric, rank)
    for metric, names in METRIC_FIELDS.items()
    for rank, name in enumerate(names)
}


def metric_values(
    data: dict[str, Any], offset: int | None, *, rtt_scale: float, where: str | None = None
) -> dict[str, float]:
    """The known metric fields of ``data``, normalised (hot path: one call per metric event)."""
    values: dict[str, float] = {}
    index = _FIELD_INDEX
    for name, raw in data.items():
        known = index.get(name)
        if known is None or raw is None:
            continue
        metric, rank = known
        if metric in values and any(
            index[other][1] < rank for other in data if other in index and index[other][0] == metric
        ):
            continue  # a preferred name for the same metric is present
        kind = type(raw)
        if kind is int:
            value = (
                float(raw)
                if -(2**63) <= raw < 2**64  # quinn logs ssthresh u64::MAX
                else as_number(raw, offset, f'"{name}"', where=where)
            )
        elif kind is float and math.isfinite(raw):
            value = raw
        else:
            value = as_number(raw, offset, f'"{name}"', where=where)
        if metric == "pto_count" and not (0 <= value < 2**63 and value.is_integer()):
            raise RecordProblem(
                offset, f'a non-negative integer for "{name}"', describe(raw), where=where
            )
        values[metric] = value * rtt_scale if metric in RTT_METRICS else value
    return values


def _app_limited(data: dict[str, Any]) -> bool | None:
    for name in APP_LIMITED_FIELDS:
        if name in data:
            value = data[name]
            if isinstance(value, bool):
                return value
            if isinstance(value, int | float):
                return value != 0
    return None


def metric_event(
    kind: str,
    time: float,
    data: object,
    offset: int | None,
    *,
    rtt_scale: float,
    where: str | None = None,
) -> tuple[MetricEvent | None, StateEvent | None]:
    """Normalise a metrics / loss / timer event; mvfst's metric update also yields its state."""
    if not isinstance(data, dict):
        raise RecordProblem(offset, 'a "data" object', describe(data), where=where)
    trigger = data.get("trigger")
    trigger = trigger if isinstance(trigger, str) else None
    if kind == METRICS:
        values = metric_values(data, offset, rtt_scale=rtt_scale, where=where)
        return MetricEvent(time, "metrics", values, _app_limited(data), trigger), None
    if kind == LOST:
        return MetricEvent(time, "packet_lost", trigger=trigger), None
    if kind == SPURIOUS:
        return MetricEvent(time, "spurious_loss"), None
    if kind == TIMER:
        # RFC 9002 section 6.2: a PTO fires when the "pto" timer expires
        timer_type = data.get("timer_type")
        event_type = data.get("event_type")
        if timer_type == "pto" and event_type == "expired":
            return MetricEvent(time, "pto"), None
        return None, None
    if kind == MVFST_METRIC:
        values = metric_values(data, offset, rtt_scale=rtt_scale, where=where)
        event = data.get("congestion_event")
        event = event if isinstance(event, str) else None
        metric = MetricEvent(time, "metrics", values, None, event)
        state = data.get("state")
        if isinstance(state, str) and state:
            return metric, StateEvent(time, state, None, event)
        return metric, None
    return None, None
