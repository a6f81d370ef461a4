"""The seeded synthetic generator of QUIC-like state logs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from quicsm.core.errors import InputError
from quicsm.core.frames import TRANSITIONS_SCHEMA, normalize_transitions
from quicsm.testing.synthetic import Profile, generate_transitions, write_synoptic_log


def test_same_seed_same_frame_and_other_seed_differs() -> None:
    a = generate_transitions(300, seed=7)
    assert_frame_equal(a, generate_transitions(300, seed=7))
    assert not a.equals(generate_transitions(300, seed=8))
    assert a.schema == pl.Schema(TRANSITIONS_SCHEMA)


def test_output_is_already_normalized() -> None:
    profile = Profile().with_transition("Recovery", "Recovery@tail", 0.2)
    profile = replace(
        profile,
        transitions={**profile.transitions, "Recovery@tail": {"ApplicationLimited@tail": 1.0}},
    )
    df = generate_transitions(400, seed=11, profile=profile)
    assert_frame_equal(normalize_transitions(df), df)


def test_traces_start_in_init_and_times_are_ordered() -> None:
    df = generate_transitions(500, seed=1)
    firsts = df.group_by("trace", maintain_order=True).first()
    assert firsts.height == 500
    assert (firsts.get_column("state") == "Init").all()
    assert (firsts.get_column("time_ms") == 0.0).all()
    per_trace = df.group_by("trace").agg(
        pl.col("time_ms").diff().drop_nulls().min().alias("step"),
        (pl.col("end_ms").first() >= pl.col("time_ms").max()).alias("end_after"),
    )
    assert (per_trace.get_column("step").fill_null(1.0) > 0).all()
    assert per_trace.get_column("end_after").all()


def test_profile_probabilities_show_in_the_data() -> None:
    profile = Profile().with_transition("SlowStart", "Recovery", 0.6)
    assert abs(sum(profile.transitions["SlowStart"].values()) - 1.0) < 1e-12
    df = generate_transitions(4000, seed=2, profile=profile)
    nxt = df.with_columns(pl.col("state").shift(-1).over("trace").alias("next"))
    from_ss = nxt.filter(pl.col("state") == "SlowStart")
    share = (from_ss.get_column("next") == "Recovery").sum() / from_ss.height
    assert abs(share - 0.6) < 0.03
    # RetransmissionTimeout is always followed by SlowStart outside the tail phase and by
    # ApplicationLimited inside it
    after_rto = set(nxt.filter(pl.col("state") == "RetransmissionTimeout")["next"].to_list())
    assert after_rto <= {"SlowStart", "ApplicationLimited"}


def test_dwell_means_follow_the_profile() -> None:
    profile = Profile().with_dwell("CongestionAvoidance", 1000.0)
    df = generate_transitions(3000, seed=4, profile=profile)
    following = pl.col("time_ms").shift(-1).over("trace").fill_null(pl.col("end_ms"))
    dwell = df.with_columns((following - pl.col("time_ms")).alias("d"))
    mean = dwell.filter(pl.col("state") == "CongestionAvoidance").get_column("d").mean()
    assert mean is not None and 900 < float(mean) < 1100  # type: ignore[arg-type]


def test_bad_profiles_are_rejected() -> None:
    with pytest.raises(InputError, match="sum to"):
        Profile(transitions={"Init": {"SlowStart": 0.5}, "SlowStart": {"END": 1.0}}).validate()
    with pytest.raises(InputError, match="has no transitions"):
        Profile(transitions={"Init": {"Bogus": 1.0}}).validate()
    with pytest.raises(InputError, match="not a canonical state"):
        Profile(transitions={"Init": {"Foo": 1.0}, "Foo": {"END": 1.0}}).validate()
    with pytest.raises(InputError, match="positive"):
        Profile().with_dwell("Recovery", 0.0)


def test_synoptic_text_log(tmp_path: Path) -> None:
    df = generate_transitions(3, seed=5)
    path = tmp_path / "log.txt"
    assert write_synoptic_log(df, path) == 3
    blocks = path.read_text().split("--\n")
    assert len(blocks) == 3
    seqs = df.group_by("trace", maintain_order=True).agg(pl.col("state").cast(pl.String))
    assert [b.splitlines() for b in blocks] == seqs.get_column("state").to_list()
