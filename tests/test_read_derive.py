"""States derived from metrics and losses, for traces that log none (rules in docs/states.md)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from quicsm.extract.derive import derive_states
from quicsm.qlog.events import MetricEvent


def m(t: float, **values: float) -> MetricEvent:
    return MetricEvent(t, "metrics", dict(values))


def states(events: list[MetricEvent]) -> list[tuple[float, str]]:
    return [(d.time, d.state) for d in derive_states(events)]


def test_window_rule_and_recovery_exit() -> None:
    events = [
        m(1, cwnd_bytes=12000),
        m(2, cwnd_bytes=30000),
        MetricEvent(3, "packet_lost", trigger="reordering_threshold"),
        m(3, cwnd_bytes=15000, ssthresh_bytes=15000),
        m(4, cwnd_bytes=15000),
        m(5, cwnd_bytes=15200),
        m(6, cwnd_bytes=15400),
    ]
    assert states(events) == [(1, "SlowStart"), (3, "Recovery"), (5, "CongestionAvoidance")]
    assert derive_states(events)[1].trigger == "packet_lost:reordering_threshold"
    assert derive_states(events)[2].trigger == "cwnd_grew"


def test_pto_count_gives_tlp_then_rto_then_back() -> None:
    events = [
        m(1, cwnd_bytes=1, ssthresh_bytes=2),
        m(2, pto_count=1),
        m(3, pto_count=2),
        m(4, pto_count=0),
    ]
    assert states(events) == [
        (1, "SlowStart"),
        (2, "TailLossProbe"),
        (3, "RetransmissionTimeout"),
        (4, "SlowStart"),
    ]


def test_pto_timer_without_pto_count() -> None:
    events = [
        m(1, cwnd_bytes=5),
        MetricEvent(2, "pto"),
        MetricEvent(3, "pto"),
        m(4, smoothed_rtt_ms=10),
    ]
    assert states(events) == [
        (1, "SlowStart"),
        (2, "TailLossProbe"),
        (3, "RetransmissionTimeout"),
        (4, "SlowStart"),
    ]


def test_application_limited_flag() -> None:
    events = [
        m(1, cwnd_bytes=5),
        MetricEvent(2, "metrics", {}, True),
        MetricEvent(3, "metrics", {}, False),
    ]
    assert states(events) == [(1, "SlowStart"), (2, "ApplicationLimited"), (3, "SlowStart")]


event = st.one_of(
    st.builds(
        lambda t, c, s: MetricEvent(t, "metrics", {"cwnd_bytes": c, "ssthresh_bytes": s}),
        st.floats(0, 100),
        st.floats(0, 1e6),
        st.floats(0, 1e6),
    ),
    st.builds(
        lambda t, p: MetricEvent(t, "metrics", {"pto_count": p}),
        st.floats(0, 100),
        st.integers(0, 4),
    ),
    st.builds(lambda t: MetricEvent(t, "packet_lost"), st.floats(0, 100)),
    st.builds(lambda t: MetricEvent(t, "pto"), st.floats(0, 100)),
    st.builds(lambda t, a: MetricEvent(t, "metrics", {}, a), st.floats(0, 100), st.booleans()),
)


@given(st.lists(event, max_size=40))
def test_derived_sequences_are_well_formed(events: list[MetricEvent]) -> None:
    out = derive_states(events)
    times = [d.time for d in out]
    assert times == sorted(times)
    assert all(a.state != b.state for a, b in zip(out, out[1:], strict=False))
    assert {d.state for d in out} <= {
        "SlowStart",
        "CongestionAvoidance",
        "Recovery",
        "TailLossProbe",
        "RetransmissionTimeout",
        "ApplicationLimited",
    }
    # file order does not matter beyond ties: events are taken in time order
    by_time = sorted(events, key=lambda e: e.time)
    assert derive_states(by_time) == out
