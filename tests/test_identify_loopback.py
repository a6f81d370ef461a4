"""quicsm identify on loopback (sub-millisecond RTT): real quic-go runs through the lab's relay
on 127.0.0.1 (tests/fixtures/identify/quic-go-loopback.qlog: lab/scenarios/identify-conditions
.toml's loopback with 1 % loss, three senders, and two runs of lab/scenarios/identify-loopback
.toml, one of which the design before growth per acknowledged window called "Cubic" with
confidence 0.94). quic-go's Reno is named NewReno/Reno or unknown, never Cubic."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from identify_helpers import acked_trace, window_trace

import quicsm
from quicsm.controllers.api import identify_frames
from quicsm.controllers.features import RTT_RESOLUTION_MS
from quicsm.controllers.signatures import CUBIC, NEWRENO, UNKNOWN

LOOPBACK = Path(__file__).resolve().parent / "fixtures" / "identify" / "quic-go-loopback.qlog"


def test_quicgo_reno_on_loopback_is_newreno_never_cubic() -> None:
    frame = quicsm.identify(LOOPBACK).with_columns(
        pl.col("declared").str.to_lowercase().alias("declared")
    )
    assert frame.height == 5 and set(frame["vantage"]) == {"server"}
    # sub-millisecond RTTs: the lab's relay on 127.0.0.1 adds next to nothing
    assert frame["rtt_ms"].min() < 1.0  # type: ignore[operator]
    # every one of them logs its flight on sends and acknowledgements: rounds are windows acked
    assert set(frame["round_basis"]) == {"acked"}
    reno = frame.filter(pl.col("declared") == "newreno")
    assert reno.height == 4
    assert set(reno["family"]) <= {NEWRENO, UNKNOWN}
    assert reno.filter(pl.col("family") == NEWRENO).height >= 3
    named = reno.filter(pl.col("family") == NEWRENO)
    # one of quic-go's own segments per window acknowledged (its 1441-byte datagrams are 1.15
    # nominal 1250-byte segments), in whole-segment steps, after cuts by exactly 0.7
    assert named["growth"].is_between(1.1, 1.35).all()
    assert (named["step_bytes"] == 1441.0).all()
    assert (named["beta"] - 0.7).abs().max() < 0.001  # type: ignore[operator]
    cubic = frame.filter(pl.col("declared") == "cubic")
    assert cubic.height == 1 and cubic["family"][0] in {CUBIC, UNKNOWN}


def test_the_run_once_called_cubic_abstains_with_a_reason() -> None:
    frame = quicsm.identify(LOOPBACK)
    row = frame.filter(pl.col("n_reductions") == 3).row(0, named=True)
    assert row["declared"].lower() == "newreno"
    assert row["family"] == UNKNOWN and row["confidence"] == 0.0
    assert "matches no known controller" in row["evidence"]


def test_rtt_below_timer_resolution_gives_no_growth_per_rtt() -> None:
    """A trace that logs its window once per round (no flight on sends: rounds can only be
    counted in wall-clock RTTs) at a sub-millisecond RTT: its growth per RTT is not evidence,
    and the answer says so."""
    rtt = RTT_RESOLUTION_MS / 4
    # quic-go's Reno: cuts by 0.7, which CUBIC shares, so only the growth could name it
    m, t = window_trace(beta=0.7, rtt_ms=rtt, segment=1441.0)
    row = identify_frames(m, t).row(0, named=True)
    assert row["round_basis"] == "rtt" and row["rtt_ms"] == rtt
    assert row["family"] == UNKNOWN
    assert "RTT below timer resolution: growth per RTT not measurable" in row["evidence"]
    # the same window at a resolvable RTT is NewReno
    m, t = window_trace(beta=0.7, rtt_ms=RTT_RESOLUTION_MS * 10, segment=1441.0)
    assert identify_frames(m, t).row(0, named=True)["family"] == NEWRENO


@settings(max_examples=30, deadline=None)
@given(
    rounds=st.lists(st.floats(0.01, 500.0), min_size=1, max_size=8),
    logged_rtt=st.floats(0.01, 500.0),
    segment=st.floats(1200.0, 1500.0),
    beta=st.sampled_from([0.5, 0.7]),
)
def test_growth_per_acked_window_ignores_the_clock(
    rounds: list[float], logged_rtt: float, segment: float, beta: float
) -> None:
    """A Reno window grows by one segment per window of data acknowledged, whatever the rounds
    last and whatever RTT the trace logs (sub-millisecond or not, steady or not): the growth
    is that segment in nominal 1250-byte units, counted in windows acknowledged."""
    m, t = acked_trace(beta=beta, segment=segment, round_ms=rounds, rtt_ms=logged_rtt)
    row = identify_frames(m, t).row(0, named=True)
    assert row["round_basis"] == "acked"
    assert abs(row["growth"] - segment / 1250) < 0.02 * segment / 1250
    assert abs(row["beta"] - beta) < 1e-6 and row["n_reductions"] == 5


def test_known_limit_reno_at_07_with_per_ack_increments() -> None:
    """docs/identify.md's former limit, pinned: a Reno that cuts by 0.7 and grows by a fraction
    of a 1200-byte segment on every ACK, logging a 39 ms RTT, was taken by quiche's CUBIC box at
    50 ms and named Cubic; that box was fitted on whole-segment steps and no longer takes a
    window grown in small steps of every size, so it is unknown (no lab stack grows that way).
    If this changes, the doc does."""
    m, t = acked_trace(beta=0.7, segment=1200.0, round_ms=[1.0], rtt_ms=39.0)
    row = identify_frames(m, t).row(0, named=True)
    assert row["step_share"] is None or row["step_share"] < 0.5  # no whole-segment steps
    assert row["family"] == UNKNOWN
