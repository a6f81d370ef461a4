"""Statistics of a transitions frame: examples worked by hand, and properties."""

from __future__ import annotations

import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal
from transitions_strategies import frame_of, raw_traces, transitions_frames

from quicsm.core.errors import ModelError
from quicsm.core.frames import normalize_transitions
from quicsm.stats.descriptive import (
    Visits,
    compute_stats,
    dwell_summary,
    dwell_times,
    time_in_state,
    time_in_state_summary,
    transition_counts,
    transition_probabilities,
    wilson_interval,
)
from quicsm.testing.synthetic import Profile, generate_transitions


def _example() -> pl.DataFrame:
    # a: Init@0 SlowStart@0 CA@10 Recovery@30 CA@60, ends at 100
    # b: Init@0 SlowStart@0 Recovery@5 (repeat dropped), ends at 20
    return normalize_transitions(
        pl.DataFrame(
            {
                "trace": ["a", "a", "a", "a", "b", "b", "b"],
                "time_ms": [0.0, 10, 30, 60, 0, 5, 5],
                "state": [
                    "SlowStart",
                    "CongestionAvoidance",
                    "Recovery",
                    "CongestionAvoidance",
                    "SlowStart",
                    "Recovery",
                    "Recovery",
                ],
                "end_ms": [100.0] * 4 + [20.0] * 3,
            }
        )
    )


def _as_dict(df: pl.DataFrame, key: list[str], value: str) -> dict[tuple[str, ...], object]:
    df = df.with_columns(pl.col(key).cast(pl.String))
    return {tuple(r[:-1]): r[-1] for r in df.select(*key, value).iter_rows()}


# -- examples ---------------------------------------------------------------------------------


def test_time_in_state_example_with_censoring_and_zero_fill() -> None:
    tis = time_in_state(_example())
    got = _as_dict(tis, ["trace", "state"], "duration_ms")
    assert got == {
        ("a", "Init"): 0.0,
        ("a", "SlowStart"): 10.0,
        ("a", "CongestionAvoidance"): 60.0,  # 20 ms + 40 ms censored at end_ms
        ("a", "Recovery"): 30.0,
        ("b", "Init"): 0.0,
        ("b", "SlowStart"): 5.0,
        ("b", "CongestionAvoidance"): 0.0,  # zero-filled
        ("b", "Recovery"): 15.0,
    }
    frac = _as_dict(tis, ["trace", "state"], "fraction")
    assert frac[("a", "CongestionAvoidance")] == pytest.approx(0.6)
    assert frac[("b", "Recovery")] == pytest.approx(0.75)
    assert tis["trace"].to_list() == ["a"] * 4 + ["b"] * 4


def test_time_in_state_summary_example() -> None:
    s = time_in_state_summary(_example())
    assert s["state"].cast(pl.String).to_list() == [
        "Init",
        "SlowStart",
        "CongestionAvoidance",
        "Recovery",
    ]
    assert s["seconds"].to_list() == pytest.approx([0.0, 0.015, 0.060, 0.045])
    assert s["fraction"].to_list() == pytest.approx([0.0, 15 / 120, 60 / 120, 45 / 120])
    assert s["mean_fraction"].to_list() == pytest.approx(
        [0.0, (0.1 + 0.25) / 2, 0.6 / 2, (0.3 + 0.75) / 2]
    )
    assert s["traces"].to_list() == [2, 2, 1, 2]


def test_transition_counts_example_has_dummy_ends() -> None:
    tc = transition_counts(_example())
    got = _as_dict(tc, ["trace", "source", "target"], "count")
    assert got == {
        ("a", "INITIAL", "Init"): 1,
        ("a", "Init", "SlowStart"): 1,
        ("a", "SlowStart", "CongestionAvoidance"): 1,
        ("a", "CongestionAvoidance", "Recovery"): 1,
        ("a", "Recovery", "CongestionAvoidance"): 1,
        ("a", "CongestionAvoidance", "TERMINAL"): 1,
        ("b", "INITIAL", "Init"): 1,
        ("b", "Init", "SlowStart"): 1,
        ("b", "SlowStart", "Recovery"): 1,
        ("b", "Recovery", "TERMINAL"): 1,
    }


def test_transition_probabilities_example() -> None:
    tp = transition_probabilities(_example())
    p = _as_dict(tp, ["source", "target"], "probability")
    assert p[("INITIAL", "Init")] == 1.0
    assert p[("SlowStart", "CongestionAvoidance")] == 0.5
    assert p[("CongestionAvoidance", "TERMINAL")] == 0.5
    assert _as_dict(tp, ["source", "target"], "traces")[("Recovery", "TERMINAL")] == 1


def test_dwell_times_and_summary_example() -> None:
    d = dwell_times(_example())
    assert d["dwell_ms"].to_list() == [0.0, 10.0, 20.0, 30.0, 40.0, 0.0, 5.0, 15.0]
    assert d["censored"].to_list() == [False] * 4 + [True, False, False, True]
    s = dwell_summary(_example())
    row = s.filter(pl.col("state") == "CongestionAvoidance").row(0, named=True)
    assert row["visits"] == 2 and row["censored"] == 1
    assert row["median_ms"] == 30.0 and row["mean_ms"] == 30.0
    assert row["p10_ms"] == pytest.approx(22.0) and row["p90_ms"] == pytest.approx(38.0)


def test_unsorted_input_gives_the_same_statistics() -> None:
    df = _example()
    shuffled = df.sample(fraction=1.0, shuffle=True, seed=3)
    # ties in time (Init and SlowStart at 0) keep their relative input order when sorting
    shuffled = pl.concat(
        [df.filter(pl.col("time_ms") == 0), shuffled.filter(pl.col("time_ms") > 0)]
    )
    for fn in (time_in_state, transition_counts, transition_probabilities, dwell_summary):
        assert_frame_equal(fn(shuffled), fn(df))


def test_zero_duration_trace_has_null_fractions() -> None:
    df = normalize_transitions(
        pl.DataFrame({"trace": ["z"], "time_ms": [5.0], "state": ["SlowStart"], "end_ms": [5.0]})
    )
    tis = time_in_state(df)
    assert tis["fraction"].null_count() == tis.height
    s = time_in_state_summary(df)
    assert s["fraction"].null_count() == s.height


# -- confidence intervals ---------------------------------------------------------------------


def _wilson(p: float, n: float) -> tuple[float, float]:
    lo, hi = wilson_interval(pl.lit(p), pl.lit(n))
    return pl.select(lo.alias("lo"), hi.alias("hi")).row(0)  # type: ignore[return-value]


def test_wilson_matches_the_textbook_formula() -> None:
    lo, hi = _wilson(0.5, 10)
    assert (lo, hi) == pytest.approx((0.236593, 0.763407), abs=1e-6)
    lo, hi = _wilson(0.0, 20)
    assert lo == 0.0 and hi == pytest.approx(1.959963984540054**2 / (20 + 1.959963984540054**2))


def _frame_of_chains(chains: dict[str, list[str]]) -> pl.DataFrame:
    rows = [
        {"trace": t, "time_ms": float(i), "state": s}
        for t, states in chains.items()
        for i, s in enumerate(states)
    ]
    return normalize_transitions(pl.DataFrame(rows))


def test_one_transition_per_trace_gives_wilson_with_m_minus_1() -> None:
    # every trace leaves SlowStart exactly once: the cluster-robust variance is the binomial
    # one times m/(m-1), so n_eff = m - 1.
    chains = {
        f"t{i}": ["SlowStart", "Recovery" if i < 3 else "CongestionAvoidance"] for i in range(10)
    }
    tp = transition_probabilities(_frame_of_chains(chains))
    row = tp.filter((pl.col("source") == "SlowStart") & (pl.col("target") == "Recovery")).row(
        0, named=True
    )
    assert row["probability"] == pytest.approx(0.3)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(_wilson(0.3, 9))


def test_correlated_transitions_widen_the_interval() -> None:
    # half the traces always go CA -> Recovery, the other half always CA -> ApplicationLimited:
    # 40 transitions but really 4 independent traces.
    chains = {}
    for i in range(4):
        other = "Recovery" if i % 2 else "ApplicationLimited"
        chains[f"t{i}"] = ["CongestionAvoidance", other] * 10
    tp = transition_probabilities(_frame_of_chains(chains))
    row = tp.filter(
        (pl.col("source") == "CongestionAvoidance") & (pl.col("target") == "Recovery")
    ).row(0, named=True)
    plain = _wilson(row["probability"], 40)
    assert row["ci_high"] - row["ci_low"] > 2 * (plain[1] - plain[0])


def test_single_trace_falls_back_to_plain_wilson() -> None:
    chains = {"only": ["CongestionAvoidance", "Recovery", "CongestionAvoidance", "TailLossProbe"]}
    tp = transition_probabilities(_frame_of_chains(chains))
    row = tp.filter(
        (pl.col("source") == "CongestionAvoidance") & (pl.col("target") == "Recovery")
    ).row(0, named=True)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(_wilson(0.5, 2))


def test_intervals_keep_their_level_when_traces_differ() -> None:
    # Half the traces come from a network where SlowStart -> Recovery has probability 0.1, half
    # from one where it is 0.6; RTOs bring traces back to SlowStart, so a trace contributes
    # several correlated transitions. The cluster-robust interval keeps ~95 % coverage of the
    # pooled probability; plain Wilson over all transitions does not.
    base = (
        Profile()
        .with_transition("Recovery", "RetransmissionTimeout", 0.35)
        .with_transition("CongestionAvoidance", "Recovery", 0.7)
    )
    low = base.with_transition("SlowStart", "Recovery", 0.1)
    high = base.with_transition("SlowStart", "Recovery", 0.6)

    def mixture(n: int, seed: int) -> pl.DataFrame:
        return pl.concat(
            [
                generate_transitions(n, seed=seed, profile=low),
                generate_transitions(n, seed=seed + 1_000_000, profile=high),
            ]
        )

    def edge(df: pl.DataFrame) -> pl.DataFrame:
        tp = transition_probabilities(df).filter(pl.col("source") == "SlowStart")
        n = float(tp["count"].sum())
        return tp.filter(pl.col("target") == "Recovery").with_columns(pl.lit(n).alias("n"))

    truth = edge(mixture(5000, 7))["probability"].item()
    reps, robust, plain = 150, 0, 0
    for rep in range(reps):
        row = edge(mixture(10, 1000 + rep)).row(0, named=True)
        robust += row["ci_low"] <= truth <= row["ci_high"]
        lo, hi = _wilson(row["probability"], row["n"])
        plain += lo <= truth <= hi
    assert robust / reps >= 0.92, robust / reps
    assert plain < robust


# -- errors -----------------------------------------------------------------------------------


def test_missing_columns_are_named() -> None:
    with pytest.raises(ModelError, match=r"missing \['state'\]"):
        time_in_state(pl.DataFrame({"trace": ["a"], "time_ms": [0.0]}))


def test_unknown_state_names_are_listed() -> None:
    df = pl.DataFrame({"trace": ["a", "a"], "time_ms": [0.0, 1.0], "state": ["Init", "Warp"]})
    with pytest.raises(ModelError, match=r"unknown state\(s\) \['Warp'\]; expected one of Init"):
        compute_stats(df)


def test_null_times_are_an_error() -> None:
    df = pl.DataFrame({"trace": ["a", "a"], "time_ms": [0.0, None], "state": ["Init", "SlowStart"]})
    with pytest.raises(ModelError, match=r"null values: \{'time_ms': 1\}"):
        compute_stats(df)


def test_end_before_last_transition_names_the_trace() -> None:
    df = pl.DataFrame(
        {
            "trace": ["a", "a"],
            "time_ms": [0.0, 10.0],
            "state": ["Init", "SlowStart"],
            "end_ms": [5.0, 5.0],
        }
    )
    with pytest.raises(ModelError, match=r"trace 'a': end_ms 5.0 is before its last transition"):
        compute_stats(df)


def test_empty_frame_gives_empty_tables() -> None:
    empty = normalize_transitions(
        pl.DataFrame(schema={"trace": pl.String, "time_ms": pl.Float64, "state": pl.String})
    )
    s = compute_stats(empty)
    assert s.traces == 0 and s.visits == 0
    assert s.time_in_state.height == 0 and s.transition_probabilities.height == 0
    assert time_in_state(empty).height == 0 and transition_counts(empty).height == 0
    assert dwell_times(empty).height == 0


# -- properties -------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(transitions_frames())
def test_time_fractions_sum_to_one_per_trace(df: pl.DataFrame) -> None:
    tis = time_in_state(df)
    per = tis.group_by("trace").agg(
        pl.col("duration_ms").sum(),
        pl.col("fraction").sum(),
        pl.col("fraction").null_count().alias("n"),
    )
    ends = df.group_by("trace").agg((pl.col("end_ms").max() - pl.col("time_ms").min()).alias("d"))
    for trace, duration, fsum, nulls in per.iter_rows():
        d = ends.filter(pl.col("trace") == trace)["d"].item()
        assert duration == pytest.approx(d, rel=1e-9, abs=1e-9)
        if d > 0:
            assert nulls == 0 and fsum == pytest.approx(1.0, abs=1e-9)
        else:
            assert nulls > 0
    # every state of the frame, for every trace
    assert tis.height == df["trace"].n_unique() * df["state"].n_unique()


@settings(max_examples=150, deadline=None)
@given(transitions_frames())
def test_outgoing_probabilities_sum_to_one_and_cis_contain_them(df: pl.DataFrame) -> None:
    tp = transition_probabilities(df)
    sums = tp.group_by("source").agg(pl.col("probability").sum())
    assert sums["probability"].to_list() == pytest.approx([1.0] * sums.height)
    assert (tp["ci_low"] <= tp["probability"] + 1e-12).all()
    assert (tp["probability"] <= tp["ci_high"] + 1e-12).all()
    assert (tp["ci_low"] >= 0).all() and (tp["ci_high"] <= 1).all()
    # the chain: one INITIAL and one TERMINAL transition per trace, one transition per row
    tc = transition_counts(df)
    assert tc["count"].sum() == df.height + df["trace"].n_unique()
    assert tp["count"].sum() == tc["count"].sum()


@settings(max_examples=100, deadline=None)
@given(transitions_frames())
def test_dwell_times_cover_each_trace_once(df: pl.DataFrame) -> None:
    d = dwell_times(df)
    assert d.height == df.height
    assert (d["dwell_ms"] >= 0).all()
    assert d["censored"].sum() == df["trace"].n_unique()
    s = dwell_summary(df)
    assert s["visits"].sum() == df.height
    assert (s["p10_ms"] <= s["median_ms"] + 1e-9).all()
    assert (s["median_ms"] <= s["p90_ms"] + 1e-9).all()
    summary = time_in_state_summary(df)
    if df.select((pl.col("end_ms") > pl.col("time_ms").min().over("trace")).any()).item():
        assert summary["fraction"].sum() == pytest.approx(1.0)
        assert summary["mean_fraction"].sum() == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(raw_traces(), st.randoms(use_true_random=False))
def test_statistics_do_not_depend_on_trace_order(traces: list, rnd: object) -> None:
    a = frame_of(traces)
    shuffled = list(traces)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    b = frame_of(shuffled)
    sa, sb = compute_stats(a), compute_stats(b)
    assert (sa.traces, sa.visits) == (sb.traces, sb.visits)
    assert math.isclose(sa.duration_ms, sb.duration_ms, rel_tol=1e-12, abs_tol=1e-9)
    for x, y in (
        (sa.time_in_state, sb.time_in_state),
        (sa.transition_probabilities, sb.transition_probabilities),
        (sa.dwell, sb.dwell),
    ):
        assert_frame_equal(x, y, check_exact=False, rel_tol=1e-9, abs_tol=1e-9)
    assert_frame_equal(time_in_state(a), time_in_state(b), check_exact=False)
    assert_frame_equal(transition_counts(a), transition_counts(b))


def test_visits_can_be_reused_across_functions() -> None:
    v = Visits(_example())
    assert_frame_equal(transition_counts(v), transition_counts(_example()))
    assert v.n_traces == 2 and v.n_visits == 8


def test_time_fractions_of_a_subnormal_duration_are_exact() -> None:
    # a trace lasting 2.2e-311 ms (hypothesis found it): dividing by a constant in a polars
    # expression multiplies by its reciprocal, which overflows (0 * inf = NaN)
    df = frame_of([("t", [0.0, 0.0], ["SlowStart", "Recovery"], 2.2251e-311)])
    summary = time_in_state_summary(df)
    assert summary["fraction"].sum() == pytest.approx(1.0)
    assert not summary["fraction"].is_nan().any()
