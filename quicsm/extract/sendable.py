"""Why a sender had nothing to send: the log owner's sendable data over time, from its STREAM
frames and the peer's flow-control limits, and its ApplicationLimited time split by cause.

A sender is short of data (ApplicationLimited, Kakhki et al.) because

- its **application** has none left: every byte its streams will carry was sent (or none was
  written yet: before its first STREAM frame);
- **flow control** holds it (RFC 9000 section 4): it has data left but has sent up to the
  peer's limit, the connection's (MAX_DATA, section 19.9) or a stream's (MAX_STREAM_DATA,
  section 19.10). Told two ways: from the **logged** DATA_BLOCKED / STREAM_DATA_BLOCKED frames
  it sent (sections 19.12, 19.13: blocked from the frame until a MAX_* frame lifts the limit it
  names), or from the **credit arithmetic** (``packets``): its highest offset sent against the
  peer's limit at that time (the peer's transport parameters, section 18.2, raised by every
  MAX_* frame received);
- **pacing** holds it (RFC 9002 section 7.7): only a pacer's next release time in the future
  would show it, and no producer we read logs one (quiche logs the pacing rate, which says how
  fast, not when): the account states it absent;
- **unknown**: data was left and no limit held it; pacing, the CPU or the application's writes
  cannot be told apart from the trace.

:func:`sendable_timeline` is sans-I/O: it takes a trace's :class:`StreamColumns` (the frames
as they were read) and returns a :class:`SendableTimeline`, the cause at every moment as
piecewise-constant segments; :func:`split_intervals` measures a set of intervals (a trace's
ApplicationLimited visits) against it, and :func:`segments_in` cuts them where the cause
changes. :func:`native_sendable_timeline` computes the same timeline in the native core
(``native/src/sendable.rs``) from the frames kept as columns of numbers (as the native packet
reader gives them); :func:`sendable_timeline` stays the reference.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from quicsm.core import native
from quicsm.extract.streams import INITIAL_LIMITS, StreamColumns

APPLICATION: Final = "application"
FLOW_CONTROL_CONNECTION: Final = "flow_control_connection"
FLOW_CONTROL_STREAM: Final = "flow_control_stream"
PACING: Final = "pacing"
UNKNOWN: Final = "unknown"

#: the causes, in the order they are tested and shown: cause -> in words
CAUSES: Final[dict[str, str]] = {
    APPLICATION: "the application had no data left to send",
    FLOW_CONTROL_CONNECTION: "the peer's connection limit (MAX_DATA) held it",
    FLOW_CONTROL_STREAM: "a stream's limit (MAX_STREAM_DATA) held it",
    PACING: "the pacer held it",
    UNKNOWN: "data was left and no limit held it (pacing or the application: not told)",
}
_CODES: Final = tuple(CAUSES)


@dataclass(frozen=True)
class SendableTimeline:
    """The log owner's sendable data over time; times in ms from the trace's first event.

    ``times[i]`` starts segment ``i`` (it lasts until ``times[i + 1]``, the last one for
    ever); ``causes[i]`` is its cause (a key of :data:`CAUSES`, never ``pacing``) and
    ``logged[i]`` whether a logged *_BLOCKED frame says so (else the credit arithmetic or the
    STREAM frames do)."""

    times: tuple[float, ...]
    causes: tuple[str, ...]
    logged: tuple[bool, ...]
    #: STREAM bytes the owner sent (highest offsets, summed over streams)
    bytes_sent: int
    #: DATA_BLOCKED / STREAM_DATA_BLOCKED frames the owner sent
    blocked_frames: int
    #: MAX_DATA / MAX_STREAM_DATA frames the owner received
    limit_frames: int
    #: whether the peer's initial limits were logged (its transport parameters)
    initial_limits: bool

    @property
    def limits_known(self) -> bool:
        """Whether the credit arithmetic could be done: some limit of the peer is known."""
        return self.initial_limits or self.limit_frames > 0


def _stream_limit(stream: int, owner_opened: bool, peer: dict[str, int]) -> int | None:
    """The peer's initial limit on the owner's sending on ``stream`` (RFC 9000 section 18.2:
    bidi_local applies to streams the peer opened, bidi_remote to streams the owner opened)."""
    if stream & 2:
        return peer.get("initial_max_stream_data_uni")
    name = "bidi_remote" if owner_opened else "bidi_local"
    return peer.get(f"initial_max_stream_data_{name}")


def sendable_timeline(columns: StreamColumns, start: float) -> SendableTimeline | None:
    """The cause of being short of data at every moment of the trace, from the STREAM frames
    the owner sent, the MAX_* frames it received, the *_BLOCKED frames it sent and the peer's
    transport parameters; times from ``start`` (ms). None when the owner logs no packet
    carrying a STREAM frame either way (nothing to tell from)."""
    if not columns.stream_rows:
        return None
    final: dict[int, int] = {}
    first_seen: dict[int, tuple[float, bool]] = {}
    for t, sent, stream, offset, length, _ in columns.stream_rows:
        first_seen.setdefault(stream, (t, sent))
        if sent:
            final[stream] = max(final.get(stream, 0), offset + length)
    peer = columns.parameters.get(False, {})
    # events in time order: (time, order at equal times, kind, stream, value)
    events: list[tuple[float, int, int, int, int]] = []
    for t, sent, stream, maximum in columns.limits:
        if not sent:  # a limit the peer gave the owner
            events.append((t, 0, 0, stream, maximum))
    for t, sent, stream, offset, length, _ in columns.stream_rows:
        if sent:
            events.append((t, 1, 1, stream, offset + length))
    blocked_frames = 0
    for t, sent, stream, named in columns.blocked:
        if sent:
            blocked_frames += 1
            events.append((t, 2, 2, stream, named))
    events.sort()
    connection_limit = peer.get("initial_max_data")
    stream_limits = {s: _stream_limit(s, first_seen[s][1], peer) for s in final}
    sent_end: dict[int, int] = {}
    total = 0
    final_total = sum(final.values())
    said_connection: int | None = None  # the limit a DATA_BLOCKED named, until lifted
    said_stream: dict[int, int] = {}  # the same per stream
    times: list[float] = []
    causes: list[str] = []
    logged: list[bool] = []

    def cause() -> tuple[str, bool]:
        if total == 0 or total >= final_total:
            return APPLICATION, False
        if said_connection is not None:
            return FLOW_CONTROL_CONNECTION, True
        if connection_limit is not None and total >= connection_limit:
            return FLOW_CONTROL_CONNECTION, False
        arithmetic = False
        for s, end in sent_end.items():
            if end >= final[s]:
                continue
            if s in said_stream:
                return FLOW_CONTROL_STREAM, True
            bound = stream_limits.get(s)
            arithmetic = arithmetic or (bound is not None and end >= bound)
        if arithmetic:
            return FLOW_CONTROL_STREAM, False
        return UNKNOWN, False

    def mark(t: float) -> None:
        c, by_frame = cause()
        if causes and causes[-1] == c and logged[-1] == by_frame:
            return
        if times and times[-1] == t:
            times.pop(), causes.pop(), logged.pop()
            if causes and causes[-1] == c and logged[-1] == by_frame:
                return
        times.append(t)
        causes.append(c)
        logged.append(by_frame)

    mark(0.0)
    i = 0
    while i < len(events):
        t = events[i][0]
        while i < len(events) and events[i][0] == t:
            _, _, kind, stream, value = events[i]
            i += 1
            if kind == 0:  # MAX_DATA (stream -1) or MAX_STREAM_DATA received
                if stream == -1:
                    connection_limit = max(connection_limit or 0, value)
                    if said_connection is not None and value > said_connection:
                        said_connection = None
                else:
                    stream_limits[stream] = max(stream_limits.get(stream) or 0, value)
                    if stream in said_stream and value > said_stream[stream]:
                        del said_stream[stream]
            elif kind == 1:  # a STREAM frame sent: its end raises the highest offset
                before = sent_end.get(stream, 0)
                if value > before:
                    sent_end[stream] = value
                    total += value - before
                if stream in said_stream and value > said_stream[stream]:
                    del said_stream[stream]  # it sent past the limit: credit came unseen
                if said_connection is not None and total > said_connection:
                    said_connection = None
            elif stream == -1:  # DATA_BLOCKED sent
                said_connection = value
            else:  # STREAM_DATA_BLOCKED sent
                said_stream[stream] = value
        mark(t - start)
    return SendableTimeline(
        times=tuple(times),
        causes=tuple(causes),
        logged=tuple(logged),
        bytes_sent=total,
        blocked_frames=blocked_frames,
        limit_frames=sum(1 for _, sent, _, _ in columns.limits if not sent),
        initial_limits=bool(peer),
    )


#: what a 64-bit column holds (the native core's integers)
_INT64: Final = range(-(1 << 63), 1 << 63)


def native_sendable_timeline(
    streams: Sequence[bytes],
    limits: Sequence[bytes],
    blocked: Sequence[bytes],
    peer: Mapping[str, int],
    start: float,
) -> tuple[bool, SendableTimeline | None]:
    """:func:`sendable_timeline` computed in the native core from the frames as columns:
    ``streams`` (time float64, sent, stream, offset, length as int64), ``limits`` and
    ``blocked`` (time float64, sent, stream or -1, maximum or limit as int64), ``peer`` the
    peer's transport parameters (``StreamColumns.parameters[False]``). Returns whether it
    could (the native core is there, every initial limit fits 64 bits and no time is NaN:
    else the caller reads the frames with :func:`sendable_timeline`) and the timeline."""
    ext = native.module()
    compute = getattr(ext, "sendable_timeline", None)  # a core built before it: none
    if compute is None:
        return False, None
    initial = tuple(peer.get(name) for name in INITIAL_LIMITS)
    if any(v is not None and v not in _INT64 for v in initial):
        return False, None
    try:
        made = compute(list(streams[:5]), list(limits[:4]), list(blocked[:4]), initial, start)
    except ValueError:  # a time that is not a number: Python's sort order is the reference
        return False, None
    if made is None:
        return True, None
    times, causes, logged, bytes_sent, blocked_frames = made
    return True, SendableTimeline(
        times=tuple(np.frombuffer(times, dtype=np.float64).tolist()),
        causes=tuple(_CODES[c] for c in causes),
        logged=tuple(b != 0 for b in logged),
        bytes_sent=bytes_sent,
        blocked_frames=blocked_frames,
        limit_frames=int(np.count_nonzero(np.frombuffer(limits[1], dtype=np.int64) == 0)),
        initial_limits=bool(peer),
    )


@dataclass(frozen=True)
class Split:
    """Some intervals' time by cause (ms), and how much of each cause logged frames say."""

    total_ms: float
    by_cause: dict[str, float]
    logged_ms: dict[str, float]


def split_intervals(intervals: Iterable[tuple[float, float]], timeline: SendableTimeline) -> Split:
    """The time of ``intervals`` (``(start, end)`` ms, in time order, not overlapping) by the
    cause the timeline gives at each moment. The parts sum to the intervals' total."""
    by_cause = dict.fromkeys(_CODES, 0.0)
    by_log = dict.fromkeys(_CODES, 0.0)
    total = 0.0
    for a, b, cause, by_frame in _cut(intervals, timeline):
        total += b - a
        by_cause[cause] += b - a
        if by_frame:
            by_log[cause] += b - a
    return Split(total_ms=total, by_cause=by_cause, logged_ms=by_log)


def _cut(
    intervals: Iterable[tuple[float, float]], timeline: SendableTimeline
) -> Iterable[tuple[float, float, str, bool]]:
    """Each interval cut where the timeline's segment changes: ``(start, end, cause,
    logged)``. One pass over the segments for intervals in time order."""
    times = timeline.times
    n = len(times)
    j = 0
    for a, b in intervals:
        if b <= a:
            continue
        while j + 1 < n and times[j + 1] <= a:
            j += 1
        k, t = j, a
        while t < b:
            end = min(times[k + 1], b) if k + 1 < n else b
            yield t, end, timeline.causes[k], timeline.logged[k]
            t = end
            k += 1


def segments_in(
    intervals: Sequence[tuple[float, float]], timeline: SendableTimeline
) -> list[tuple[float, float, str]]:
    """``intervals`` cut where the cause changes: ``(start, end, cause)`` in time order."""
    out: list[tuple[float, float, str]] = []
    for a, b, cause, _ in _cut(intervals, timeline):
        if out and out[-1][1] == a and out[-1][2] == cause:
            out[-1] = (out[-1][0], b, cause)
        else:
            out.append((a, b, cause))
    return out


__all__ = [
    "APPLICATION",
    "CAUSES",
    "FLOW_CONTROL_CONNECTION",
    "FLOW_CONTROL_STREAM",
    "PACING",
    "UNKNOWN",
    "SendableTimeline",
    "Split",
    "native_sendable_timeline",
    "segments_in",
    "sendable_timeline",
    "split_intervals",
]
