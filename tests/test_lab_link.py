"""The impairment model of one direction, driven with a passed-in clock."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.core.errors import LabError
from quicsm.lab.link import (
    Link,
    LinkConfig,
    RateSchedule,
    link_config_from_dict,
    link_config_to_dict,
)
from quicsm.lab.loss import GilbertElliott, LossModel


def _feed(link: Link[int], *, n: int, gap_s: float, size: int = 1350) -> list[int]:
    """Offer n packets every gap_s seconds, draining as time goes; return delivery order."""
    out: list[int] = []
    for i in range(n):
        now = i * gap_s
        out.extend(link.due(now_s=now))
        link.offer(now_s=now, size=size, item=i)
    out.extend(link.due(now_s=1e9))
    return out


def test_unimpaired_link_delivers_everything_at_once_in_order() -> None:
    link: Link[int] = Link(LinkConfig(), seed=1)
    assert _feed(link, n=100, gap_s=0.001) == list(range(100))
    c = link.counters
    assert (c.delivered, c.dropped_loss, c.dropped_queue, c.reordered, c.delayed) == (
        100,
        0,
        0,
        0,
        0,
    )


def test_fixed_delay_is_added_to_every_packet() -> None:
    link: Link[int] = Link(LinkConfig(delay_ms=25), seed=1)
    link.offer(now_s=1.0, size=100, item=7)
    assert link.due(now_s=1.0249) == []
    assert link.next_due_s() == pytest.approx(1.025)
    assert link.due(now_s=1.025) == [7]
    assert link.counters.as_dict()["mean_delay_ms"] == pytest.approx(25.0)


def test_rate_limit_serialises_packets() -> None:
    # 10 Mbit/s: a 1250-byte packet takes exactly 1 ms
    link: Link[int] = Link(LinkConfig(rate_mbit=10, queue_packets=100), seed=1)
    for i in range(10):
        assert link.offer(now_s=0.0, size=1250, item=i)
    times = []
    t = 0.0
    while link.in_flight():
        t = link.next_due_s() or t
        times.extend((t, item) for item in link.due(now_s=t))
    assert [round(x[0], 9) for x in times] == [round(0.001 * (i + 1), 9) for i in range(10)]


def test_drop_tail_queue_drops_beyond_its_size() -> None:
    link: Link[int] = Link(LinkConfig(rate_mbit=1, queue_packets=5), seed=1)
    accepted = [link.offer(now_s=0.0, size=1000, item=i) for i in range(8)]
    assert accepted == [True] * 5 + [False] * 3
    assert link.counters.dropped_queue == 3
    assert link.counters.max_queue_packets == 5
    # once the head has been served (8 ms per packet at 1 Mbit/s) there is room again
    assert link.offer(now_s=0.0081, size=1000, item=99)


@settings(max_examples=30, deadline=None)
@given(rate=st.floats(1, 200), offered_factor=st.floats(1.2, 3.0), seed=st.integers(0, 10**6))
def test_overloaded_bottleneck_delivers_at_its_rate(
    rate: float, offered_factor: float, seed: int
) -> None:
    size = 1350
    gap = size * 8 / (rate * offered_factor * 1e6)
    queue = 50
    link: Link[int] = Link(LinkConfig(rate_mbit=rate, queue_packets=queue), seed=seed)
    n = 1000
    for i in range(n):
        now = i * gap
        link.due(now_s=now)
        link.offer(now_s=now, size=size, item=i)
    # the bottleneck never idles once busy: the accepted packets' service time covers the
    # offering period, plus at most a full queue still waiting at the end
    c = link.counters
    service = size * 8 / (rate * 1e6)
    accepted = c.delivered + link.in_flight()
    assert (n - 1) * gap <= accepted * service <= (n - 1) * gap + (queue + 1) * service
    assert c.dropped_queue + accepted == n
    assert c.dropped_queue > 0


@settings(max_examples=25, deadline=None)
@given(loss=st.floats(0.0, 0.5), seed=st.integers(0, 10**6))
def test_bernoulli_loss_rate_is_realised(loss: float, seed: int) -> None:
    n = 5000
    link: Link[int] = Link(LinkConfig(loss=loss), seed=seed)
    _feed(link, n=n, gap_s=0.0)
    p = link.counters.dropped_loss / n
    # 5 standard deviations of a binomial proportion
    assert abs(p - loss) <= 5 * (loss * (1 - loss) / n) ** 0.5 + 1e-9


def test_gilbert_elliott_mean_loss_and_burstiness() -> None:
    ge = GilbertElliott(p=0.01, r=0.2)
    model = LossModel(loss=0.0, gilbert=ge, rng=random.Random(3))
    fates = [model.lost() for _ in range(100_000)]
    assert sum(fates) / len(fates) == pytest.approx(ge.mean_loss, rel=0.1)
    bursts, run = [], 0
    for lost in fates:
        if lost:
            run += 1
        elif run:
            bursts.append(run)
            run = 0
    # Bad sojourns are geometric with mean 1/r = 5 packets; Bernoulli would give ~1
    assert sum(bursts) / len(bursts) == pytest.approx(1 / ge.r, rel=0.15)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), jitter_ms=st.floats(0.0, 20.0))
def test_same_seed_same_fate(seed: int, jitter_ms: float) -> None:
    cfg = LinkConfig(
        rate_mbit=50,
        queue_packets=20,
        delay_ms=10,
        jitter_ms=jitter_ms,
        loss=0.05,
        gilbert=GilbertElliott(p=0.01, r=0.3),
    )
    runs = []
    for _ in range(2):
        link: Link[int] = Link(cfg, seed=seed)
        runs.append((_feed(link, n=500, gap_s=0.0001), link.counters.as_dict()))
    assert runs[0] == runs[1]


def test_jitter_reorders_like_netem_and_counts_it() -> None:
    # packets 1 ms apart, 10 ms uniform jitter: many overtake each other
    link: Link[int] = Link(LinkConfig(delay_ms=56, jitter_ms=10), seed=5)
    order = _feed(link, n=2000, gap_s=0.001)
    assert sorted(order) == list(range(2000))
    assert order != list(range(2000))
    expected = sum(1 for i, x in enumerate(order) if x < max(order[: i + 1]))
    assert link.counters.reordered == expected > 100
    mean = link.counters.as_dict()["mean_delay_ms"]
    assert mean == pytest.approx(56, abs=1.0)


def test_small_jitter_on_widely_spaced_packets_never_reorders() -> None:
    link: Link[int] = Link(LinkConfig(delay_ms=20, jitter_ms=1), seed=5)
    assert _feed(link, n=500, gap_s=0.003) == list(range(500))
    assert link.counters.reordered == 0


@settings(max_examples=40, deadline=None)
@given(
    delay=st.floats(0, 100),
    jitter=st.floats(0, 30),
    seed=st.integers(0, 10**6),
    gap=st.floats(0, 0.01),
)
def test_delivery_never_precedes_arrival_and_conserves_packets(
    delay: float, jitter: float, seed: int, gap: float
) -> None:
    link: Link[int] = Link(
        LinkConfig(delay_ms=delay, jitter_ms=jitter, rate_mbit=20, queue_packets=30, loss=0.02),
        seed=seed,
    )
    arrival = {}
    for i in range(300):
        now = i * gap
        for item in link.due(now_s=now):
            assert now >= arrival[item]
        arrival[i] = now
        link.offer(now_s=now, size=1200, item=i)
    link.due(now_s=1e9)
    c = link.counters
    assert c.delivered + c.dropped_loss + c.dropped_queue == c.packets_in == 300
    assert c.delay_sum_s >= 0


def test_rate_schedule_uniform_is_seeded_and_in_range() -> None:
    sched = RateSchedule(kind="uniform", low_mbit=50, high_mbit=150, interval_s=1.0)
    a: Link[int] = Link(LinkConfig(rate_schedule=sched), seed=9, start_s=100.0)
    b: Link[int] = Link(LinkConfig(rate_schedule=sched), seed=9, start_s=0.0)
    rates = [a.rate_mbit_at(100.0 + t + 0.5) for t in range(20)]
    assert rates == [b.rate_mbit_at(t + 0.5) for t in range(20)]
    assert all(r is not None and 50 <= r <= 150 for r in rates)
    assert len(set(rates)) == 20
    assert a.rate_mbit_at(100.2) == a.rate_mbit_at(100.9)


def test_rate_schedule_steps() -> None:
    sched = RateSchedule(kind="steps", steps=((0.0, 10.0), (2.0, 50.0)))
    link: Link[int] = Link(LinkConfig(rate_schedule=sched), seed=0, start_s=5.0)
    assert [link.rate_mbit_at(5.0 + t) for t in (0.0, 1.9, 2.0, 10.0)] == [10, 10, 50, 50]


def test_config_round_trips_through_plain_data() -> None:
    cfg = LinkConfig(
        rate_mbit=10,
        queue_packets=7,
        delay_ms=3,
        jitter_ms=1,
        jitter_distribution="normal",
        loss=0.1,
        gilbert=GilbertElliott(p=0.1, r=0.5, loss_good=0.01, loss_bad=0.9),
        rate_schedule=RateSchedule(kind="steps", steps=((0.0, 5.0), (1.0, 6.0))),
        outages=((0.5, 0.25),),
    )
    assert link_config_from_dict(link_config_to_dict(cfg), where="x") == cfg


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"loss": "a"}, "net.loss: expected a number, got 'a'"),
        ({"loss": 2}, "net: loss must be a probability in [0, 1], got 2.0"),
        ({"rate_mbit": -1}, "net: rate_mbit must be > 0"),
        ({"bogus": 1}, "net: unknown key 'bogus'"),
        ({"gilbert": {"p": 0.1}}, "net.gilbert: needs both 'p' and 'r'"),
        (
            {"rate_schedule": {"kind": "uniform", "low_mbit": 5, "high_mbit": 1}},
            "net: rate schedule needs 0 < low_mbit <= high_mbit",
        ),
        ({"queue_packets": 1.5}, "net.queue_packets: expected an integer"),
    ],
)
def test_config_errors_name_the_key(raw: dict[str, object], message: str) -> None:
    with pytest.raises(LabError) as info:
        link_config_from_dict(raw, where="net")
    assert message in str(info.value)


def test_outage_drops_everything_inside_its_window_from_the_first_packet() -> None:
    tick = 1 / 1024  # exact in binary floating point
    link: Link[int] = Link(LinkConfig(outages=((100 * tick, 50 * tick),)), seed=0)
    kept = [i for i in range(300) if link.offer(now_s=10.0 + i * tick, size=100, item=i)]
    assert kept == [i for i in range(300) if not 100 <= i < 150]
    assert link.counters.dropped_outage == 50
