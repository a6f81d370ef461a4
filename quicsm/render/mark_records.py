"""Which record of its trace each mark of an interactive plot was drawn from, so a click on
the mark shows that event as the file has it (:mod:`quicsm.extract.raw_events`).

A mark's row gets ``r``, the record's number in its file (``-1``: none found, such as the
point that carries a line to the trace's end), found by the row's time among the events that
draw that kind of mark (:data:`NAMES`), narrowed by the event's data where several share a
time (the packet number of a packet, the metric a line draws)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any, Final

from quicsm.extract.raw_events import TraceRecords

#: the events of a metrics update, by producer
METRIC_EVENTS: Final[frozenset[str]] = frozenset(
    {"metrics_updated", "recovery_metrics_updated", "metrics"}
)
#: the event names each kind of mark is drawn from
NAMES: Final[dict[str, frozenset[str]]] = {
    "state": frozenset({"congestion_state_updated", "congestion_state_update"}),
    "metric": METRIC_EVENTS,
    "sent": frozenset({"packet_sent", "packet_received"}),
    "ack": frozenset({"packet_received", "packet_sent"}),
    "lost": frozenset({"packet_lost"}),
    "pto": frozenset({"loss_timer_updated", "pto", "timer_expired"}),
    "limit": frozenset({"packet_received", "packet_sent", "parameters_set"}),
}
#: each metric column -> the data fields that log it
FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "cwnd_bytes": ("congestion_window", "cwnd"),
    "bytes_in_flight": ("bytes_in_flight",),
    "ssthresh_bytes": ("ssthresh",),
    "smoothed_rtt_ms": ("smoothed_rtt",),
    "min_rtt_ms": ("min_rtt",),
    "pacing_rate_bps": ("pacing_rate",),
    "latest_rtt_ms": ("latest_rtt",),
}


def _has(data: Any, fields: Sequence[str]) -> bool:
    return isinstance(data, dict) and any(f in data for f in fields)


def _number(data: Any) -> int | None:
    if not isinstance(data, dict):
        return None
    header = data.get("header")
    n = header.get("packet_number") if isinstance(header, dict) else None
    n = data.get("packet_number") if n is None else n
    return n if isinstance(n, int) else None


def _frames(data: Any) -> list[Any]:
    frames = data.get("frames") if isinstance(data, dict) else None
    return frames if isinstance(frames, list) else []


def _frame_named(data: Any, names: Sequence[str]) -> bool:
    return any(isinstance(f, dict) and f.get("frame_type") in names for f in _frames(data))


def _stream_at(data: Any, offset: int) -> bool:
    return any(isinstance(f, dict) and f.get("frame_type") == "stream"
               and f.get("offset", 0) == offset for f in _frames(data))  # fmt: skip


def record(
    records: TraceRecords,
    kind: str,
    t: float,
    *,
    column: str | None = None,
    number: tuple[int, int] | None = None,
    offset: int | None = None,
) -> int:
    """The record a mark of ``kind`` at ``t`` ms was drawn from (-1: none): ``column``, the
    metric a line or dot draws; ``number``, the packet numbers a packet mark stands for;
    ``offset``, the stream offset of a byte-offset dot."""
    names = NAMES[kind]
    found: int | None
    if kind == "metric":
        fields = FIELDS.get(column or "", ())
        found = records.find(t, names, test=lambda d: _has(d, fields), last=True)
    elif kind in ("sent", "lost") and number is not None:
        lo, hi = number

        def test(d: Any) -> bool:
            n = _number(d)
            return n is not None and lo <= n <= hi

        found = records.find(t, names, test=test)
        if found is None and kind == "lost":  # losses counted from a metrics update
            found = records.find(t, METRIC_EVENTS)
    elif kind == "sent" and offset is not None:
        found = records.find(t, names, test=lambda d: _stream_at(d, offset))
    elif kind == "ack":
        found = records.find(t, names, test=lambda d: _frame_named(d, ("ack",)))
    elif kind == "limit":
        found = records.find(
            t, names, test=lambda d: _frame_named(d, ("max_data", "max_stream_data"))
        )
    else:
        found = records.find(t, names)
        if found is None and kind in ("lost", "pto", "state"):  # derived from metrics
            found = records.find(t, METRIC_EVENTS)
    if found is None:  # the event at that time, whatever its name
        found = records.find(t, records.names_at(t))
    return -1 if found is None else found


def band_records(
    records: TraceRecords, bands: Sequence[tuple[float, float, str]]
) -> tuple[list[float], list[int]]:
    """The start of each band and the record of the change that began it (time order)."""
    starts = [a for a, _, _ in bands]
    return starts, [record(records, "state", a) for a in starts]


def band_record(starts: list[float], numbers: list[int], start: float) -> int:
    """The record of a drawn band starting at ``start``: the change that began it, or for a
    band merged over pixel columns, the first change at or after its start."""
    i = bisect.bisect_left(starts, start - 0.0005)
    return numbers[i] if i < len(numbers) else -1
