"""Why a sender had nothing to send (``quicsm.extract.sendable``): its ApplicationLimited time
split by cause from the STREAM, MAX_* and *_BLOCKED frames of the trace."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.extract.sendable import (
    APPLICATION,
    CAUSES,
    FLOW_CONTROL_CONNECTION,
    FLOW_CONTROL_STREAM,
    PACING,
    UNKNOWN,
    segments_in,
    sendable_timeline,
    split_intervals,
)
from quicsm.extract.streams import StreamColumns

FC = (FLOW_CONTROL_CONNECTION, FLOW_CONTROL_STREAM)


def _columns(
    frames: list[tuple[float, int, int]],
    limits: list[tuple[float, int, int]],
    blocked: list[tuple[float, int, int]],
    parameters: dict[str, int] | None,
) -> StreamColumns:
    c = StreamColumns()
    for n, (t, stream, length) in enumerate(sorted(frames)):
        offset = sum(length for tt, s, length in sorted(frames)[:n] if s == stream)
        c.stream_rows.append((t, True, stream, offset, length, n))
    c.limits = [(t, False, s, m) for t, s, m in limits]
    c.blocked = [(t, True, s, m) for t, s, m in blocked]
    if parameters is not None:
        c.parameters[False] = parameters
    return c


times = st.floats(0, 1000, allow_nan=False).map(lambda x: round(x, 3))
frame = st.tuples(times, st.sampled_from([0, 4]), st.integers(1, 1500))
limit = st.tuples(times, st.sampled_from([-1, 0, 4]), st.integers(0, 20000))
params = st.none() | st.fixed_dictionaries(
    {
        "initial_max_data": st.integers(0, 20000),
        "initial_max_stream_data_bidi_remote": st.integers(0, 20000),
        "initial_max_stream_data_bidi_local": st.integers(0, 20000),
    }
)
intervals = st.lists(st.tuples(times, times), max_size=8).map(
    lambda xs: _disjoint(sorted(tuple(sorted(x)) for x in xs))
)


def _disjoint(xs: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in xs:
        a = max(a, out[-1][1]) if out else a
        if b > a:
            out.append((a, b))
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(frame, min_size=1, max_size=30),
    st.lists(limit, max_size=10),
    st.lists(limit, max_size=5),
    params,
    intervals,
)
def test_the_parts_sum_to_the_whole_and_logged_needs_a_frame(
    frames: list[tuple[float, int, int]],
    limits: list[tuple[float, int, int]],
    blocked: list[tuple[float, int, int]],
    parameters: dict[str, int] | None,
    chosen: list[tuple[float, float]],
) -> None:
    """Any frames, limits and intervals: the causes' times sum to the intervals' total, pacing
    is never claimed, and time is "logged" only where the sender logged a *_BLOCKED frame; with
    no limit known and no *_BLOCKED frame there is no flow-control time at all."""
    timeline = sendable_timeline(_columns(frames, limits, blocked, parameters), 0.0)
    assert timeline is not None
    split = split_intervals(chosen, timeline)
    assert math.isclose(sum(split.by_cause.values()), split.total_ms, abs_tol=1e-6)
    assert math.isclose(split.total_ms, sum(b - a for a, b in chosen), abs_tol=1e-6)
    assert set(split.by_cause) == set(CAUSES)
    assert split.by_cause[PACING] == 0.0
    for cause, said in split.logged_ms.items():
        assert said <= split.by_cause[cause] + 1e-9
    if not blocked:
        assert not any(timeline.logged)
        assert sum(split.logged_ms.values()) == 0.0
    if not blocked and not limits and parameters is None:
        assert all(split.by_cause[c] == 0.0 for c in FC)
    cut = segments_in(chosen, timeline)
    assert math.isclose(sum(b - a for a, b, _ in cut), split.total_ms, abs_tol=1e-6)
    for cause in CAUSES:
        part = sum(b - a for a, b, c in cut if c == cause)
        assert math.isclose(part, split.by_cause[cause], abs_tol=1e-6), cause


def test_a_sender_at_the_peers_stream_limit_is_held_by_flow_control() -> None:
    """1000 bytes to send, the peer allows 400 until a MAX_STREAM_DATA at 50 ms; a
    STREAM_DATA_BLOCKED at 20 ms: 10-20 ms by the arithmetic, 20-50 ms logged, then data
    flows (unknown), and after the last byte the application has none."""
    frames = [(0.0, 0, 200), (10.0, 0, 200), (50.0, 0, 300), (60.0, 0, 300)]
    c = _columns(
        frames,
        [(50.0, 0, 1000)],
        [(20.0, 0, 400)],
        {"initial_max_data": 10**6, "initial_max_stream_data_bidi_remote": 400},
    )
    timeline = sendable_timeline(c, 0.0)
    assert timeline is not None
    split = split_intervals([(5.0, 100.0)], timeline)
    assert split.by_cause[UNKNOWN] == 5.0 + 10.0  # 5-10, 50-60
    assert split.by_cause[FLOW_CONTROL_STREAM] == 40.0
    assert split.logged_ms[FLOW_CONTROL_STREAM] == 30.0
    assert split.by_cause[APPLICATION] == 40.0
    assert split.by_cause[FLOW_CONTROL_CONNECTION] == 0.0


def test_a_stream_the_sender_opened_has_the_peers_bidi_remote_limit() -> None:
    """RFC 9000 section 18.2: the peer's initial_max_stream_data_bidi_remote bounds the
    streams the sender opened, bidi_local the ones the peer opened."""
    frames = [(0.0, 0, 100), (30.0, 0, 100)]
    params = {"initial_max_stream_data_bidi_remote": 100, "initial_max_stream_data_bidi_local": 0}
    held = sendable_timeline(_columns(frames, [], [], params), 0.0)
    assert held is not None
    assert split_intervals([(0.0, 30.0)], held).by_cause[FLOW_CONTROL_STREAM] == 30.0
    c = _columns(frames, [], [], params)
    c.stream_rows.insert(0, (-1.0, False, 0, 0, 10, 0))  # the peer opened it
    opened = sendable_timeline(c, 0.0)
    assert opened is not None
    assert split_intervals([(0.0, 30.0)], opened).by_cause[FLOW_CONTROL_STREAM] == 30.0
    params["initial_max_stream_data_bidi_local"] = 10**6
    free = sendable_timeline(c, 0.0)
    assert free is not None
    assert split_intervals([(0.0, 30.0)], free).by_cause[UNKNOWN] == 30.0
