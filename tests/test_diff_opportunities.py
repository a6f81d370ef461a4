"""Verdicts that survive a change in length: invariants compared per chance to break them, and
permutation tests that exchange traces only within their length stratum."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.compare.diff import diff
from quicsm.compare.families.invariants import _opportunities, _violates
from quicsm.stats import overdispersion as od
from quicsm.stats import significance as sig

FAST = {"permutations": 199}

#: a chain of the eight states without an end (a trace is cut after its number of transitions);
#: RetransmissionTimeout is reached only from Init, so "Recovery NeverFollowedBy
#: RetransmissionTimeout" holds per return to Recovery, however long the trace
CHAIN: dict[str, dict[str, float]] = {
    "Init": {"SlowStart": 0.5, "RetransmissionTimeout": 0.5},
    "RetransmissionTimeout": {"SlowStart": 1.0},
    "SlowStart": {"CongestionAvoidance": 0.6, "Recovery": 0.4},
    "CongestionAvoidance": {"Recovery": 0.5, "ApplicationLimited": 0.3, "TailLossProbe": 0.2},
    "Recovery": {"CongestionAvoidance": 0.8, "SlowStart": 0.2},
    "TailLossProbe": {"Recovery": 0.6, "CongestionAvoidance": 0.4},
    "ApplicationLimited": {"CongestionAvoidance": 0.7, "SlowStart": 0.3},
}


def _traces(
    lengths: list[int], seed: int, *, tag: str, chain: dict[str, dict[str, float]] = CHAIN
) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows: list[tuple[str, float, str, float]] = []
    for i, length in enumerate(lengths):
        state, clock, start = "Init", 0.0, len(rows)
        for k in range(length + 1):
            rows.append((f"{tag}-{i}", clock, state, 0.0))
            clock += float(rng.exponential(50.0))
            if k == length:
                break
            targets = list(chain[state])
            state = str(rng.choice(targets, p=[chain[state][t] for t in targets]))
        rows[start:] = [(t, x, s, clock) for t, x, s, _ in rows[start:]]
    return pl.DataFrame(rows, schema=["trace", "time_ms", "state", "end_ms"], orient="row")


def _seq(states: list[str]) -> list[tuple[str, list[str]]]:
    return [("t", ["INITIAL", *states, "TERMINAL"])]


STATES = st.lists(st.sampled_from(["A", "B", "C"]), max_size=12)


@settings(max_examples=200, deadline=None)
@given(STATES, st.sampled_from(["A", "B", "C"]), st.sampled_from(["A", "B", "C"]))
def test_never_followed_by_counts_returns(states: list[str], x: str, y: str) -> None:
    """Per return to ``x``: one chance per visit of ``x`` followed by another (the last visit's
    stretch is censored), broken when ``y`` lies between the two; a trace broken at a return
    breaks the invariant, and a trace that visits ``x`` once has no chance at all."""
    got_y, got_m = _opportunities("NeverFollowedBy", x, y, _seq(states))
    m, broken = int(got_m[0]), int(got_y[0])
    if x == y:  # "x at most once": one chance per trace that visits x
        assert m == (1 if x in states else 0)
        assert broken == int(m == 1 and states.count(x) > 1)
        return
    assert m == max(0, states.count(x) - 1)
    assert 0 <= broken <= m
    if broken:
        assert _violates("NeverFollowedBy", x, y, ["INITIAL", *states, "TERMINAL"])
    at = [i for i, s in enumerate(states) if s == x]
    assert broken == sum(y in states[i + 1 : j] for i, j in zip(at[:-1], at[1:], strict=True))


@settings(max_examples=200, deadline=None)
@given(STATES, st.sampled_from(["A", "B", "C"]), st.sampled_from(["A", "B", "C"]))
def test_other_invariants_count_traces_that_visit_the_antecedent(
    states: list[str], x: str, y: str
) -> None:
    """AlwaysFollowedBy (antecedent ``x``) and AlwaysPrecedes (antecedent ``y``), and
    NeverFollowedBy when too few traces return to ``x``: one chance per trace that visits the
    antecedent, broken as the whole-trace invariant is."""
    seq = ["INITIAL", *states, "TERMINAL"]
    for kind, antecedent in (
        ("AlwaysFollowedBy", x),
        ("AlwaysPrecedes", y),
        ("NeverFollowedBy", x),
    ):
        got_y, got_m = _opportunities(kind, x, y, _seq(states), returns=False)
        assert int(got_m[0]) == int(antecedent in states)
        assert bool(got_y[0]) == (antecedent in states and _violates(kind, x, y, seq))
        if antecedent not in states:  # no chance to break it: it cannot be broken
            assert not _violates(kind, x, y, seq)


def test_returns_do_not_grow_with_length() -> None:
    """The same chain, long traces against three times as many short ones: "Recovery
    NeverFollowedBy SlowStart" is broken far more often per trace by the long ones (every long
    trace breaks it), but per return to Recovery the rates agree, and no invariant is
    significant."""
    for seed in range(3):
        a = _traces([300] * 5, seed, tag="a")
        b = _traces([15] * 15, seed + 100, tag="b")
        r = diff(a, b, **FAST)  # type: ignore[arg-type]
        assert r.settings["lengths"]["differ"]
        assert not r.invariants["significant"].any(), r.invariants
        ya, ma = _opportunities(
            "NeverFollowedBy", "Recovery", "SlowStart", [("a", q) for q in _chains(a)]
        )
        yb, mb = _opportunities(
            "NeverFollowedBy", "Recovery", "SlowStart", [("b", q) for q in _chains(b)]
        )
        assert ma.sum() > 10 * mb.sum() / 3  # the long traces return far more often
        assert abs(ya.sum() / ma.sum() - yb.sum() / mb.sum()) < 0.1


def _chains(df: pl.DataFrame) -> list[list[str]]:
    g = df.sort("trace", "time_ms").group_by("trace", maintain_order=True).agg("state")
    return [["INITIAL", *s, "TERMINAL"] for s in g["state"].to_list()]


def test_a_change_in_the_rate_per_return_is_found() -> None:
    """B's Recovery sometimes times out (Recovery → RetransmissionTimeout, 0.15): "Recovery
    NeverFollowedBy RetransmissionTimeout" holds in every long trace of A and B breaks it at a
    real rate per return: found, per return to Recovery, though B's traces are short."""
    chain = {**CHAIN, "Recovery": {"CongestionAvoidance": 0.65, "SlowStart": 0.2}}
    chain["Recovery"]["RetransmissionTimeout"] = 0.15
    found = 0
    for seed in range(3):
        a = _traces([300] * 10, seed, tag="a")
        b = _traces([15] * 30, seed + 100, tag="b", chain=chain)
        r = diff(a, b, **FAST)  # type: ignore[arg-type]
        row = r.invariants.filter(
            (pl.col("kind") == "NeverFollowedBy")
            & (pl.col("a") == "Recovery")
            & (pl.col("b") == "RetransmissionTimeout")
        ).row(0, named=True)
        assert row["holds_in"] == "a" and row["broken_a"] == 0
        assert row["unit"] == "return to Recovery"
        assert row["opportunities_a"] > 500 and row["broken_b"] > 0
        assert row["effect"] == row["broken_b"] / row["opportunities_b"]
        found += bool(row["significant"])
    assert found == 3


def _z_units(n_a: int, n_b: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.integers(1, 30, size=n_a + n_b).astype(float)
    return od.trace_units(rng.binomial(m.astype(int), 0.3).astype(float), m, 0.1)


def test_within_one_stratum_is_the_permutation_over_traces() -> None:
    """With every trace in one stratum, the test within strata is the permutation test over
    traces (exact: the same p-value and smallest p-value)."""
    units = _z_units(4, 5, 0)
    plain = sig.permutation_over_traces(
        units, 4, od.abs_z_statistics, permutations=999, seed=0, name="z"
    )
    within = sig.permutation_within_strata(
        units,
        np.arange(9) < 4,
        ["x"] * 9,
        od.abs_z_statistics,
        permutations=999,
        seed=0,
        name="z",
    )
    assert within.result is not None and within.held == 0 and within.strata == 1
    assert within.result.test == plain.test == "z (exact)"
    assert math.isclose(within.result.p_value or 0, plain.p_value or 0)
    assert math.isclose(within.result.p_min, plain.p_min)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([19, 999]))
def test_within_strata_keeps_each_stratum_and_is_symmetric(seed: int, permutations: int) -> None:
    """Every split keeps each stratum's numbers of A and B traces (a stratum of one group stays
    in its group: counted as held), and swapping the groups gives the same p-value, exact or
    from random splits."""
    units = _z_units(7, 9, seed)
    labels = ["s"] * 3 + ["l"] * 4 + ["s"] * 5 + ["l"] * 2 + ["x"] * 2  # "x": B only
    in_a = np.arange(16) < 7
    ab = sig.permutation_within_strata(
        units, in_a, labels, od.abs_z_statistics, permutations=permutations, seed=1, name="z"
    )
    ba = sig.permutation_within_strata(
        units, ~in_a, labels, od.abs_z_statistics, permutations=permutations, seed=1, name="z"
    )
    assert ab.result is not None and ba.result is not None
    assert ab.held == 2 and ab.strata == 2
    assert ab.result.p_value == ba.result.p_value
    assert ab.result.p_min <= (ab.result.p_value or 0) <= 1.0
    # exact: C(8, 3) C(6, 2) = 840 splits
    assert ab.result.test.endswith("(exact)") == (permutations >= 840)


def test_no_stratum_of_both_groups_permutes_nothing() -> None:
    units = _z_units(3, 3, 0)
    none = sig.permutation_within_strata(
        units,
        np.arange(6) < 3,
        ["l"] * 3 + ["s"] * 3,
        od.abs_z_statistics,
        permutations=99,
        seed=0,
        name="z",
    )
    assert none.result is None and none.held == 6


def test_transitions_are_permuted_within_length_strata_and_say_so() -> None:
    """Groups of different lengths with both lengths in each group: the permuted z exchanges
    traces only within their length stratum; with no length in both groups it is not permuted,
    and the note says why."""
    a = pl.concat([_traces([300] * 4, 1, tag="al"), _traces([15] * 2, 2, tag="as")])
    b = pl.concat([_traces([300] * 2, 3, tag="bl"), _traces([15] * 12, 4, tag="bs")])
    r = diff(a, b, **FAST)  # type: ignore[arg-type]
    assert r.settings["lengths"]["differ"]
    tested = r.edges.filter(pl.col("test").str.starts_with("permuted z"))
    assert tested.height > 0
    assert set(tested["test"]) <= {
        "permuted z within length strata",
        "permuted z within length strata (exact)",
    }
    assert all("permuted within 2 length strata" in n for n in tested["note"])
    apart = diff(_traces([300] * 4, 1, tag="a"), _traces([15] * 12, 4, tag="b"), **FAST)  # type: ignore[arg-type]
    z = apart.edges.filter(pl.col("test") == "beta-binomial")
    assert z.height > 0
    assert all(
        "no length stratum holds traces of both groups: not permuted" in n for n in z["note"]
    )


def test_a_stratum_of_one_group_is_said_left_out() -> None:
    """A stratified shift never drops traces silently: those whose stratum holds one group
    only are counted in the note."""
    w = sig.stratified_shift(
        [1.0, 2.0, 3.0, 9.0], ["s", "s", "s", "x"], [2.0, 3.0, 4.0], ["s", "s", "s"]
    )
    assert w.result.note == "1 stratum; 1 trace left out (their stratum holds one group only)"


def test_stratified_shift_with_many_splits_uses_random_splits_within_strata() -> None:
    """Too many splits to enumerate and few traces: random splits within strata (not the
    normal approximation), which agree with the exact test when it is affordable."""
    rng = np.random.default_rng(5)
    xa, xb = rng.exponential(1.0, 10), rng.exponential(1.0, 11) + 0.3
    la, lb = ["s"] * 5 + ["l"] * 5, ["s"] * 5 + ["l"] * 6
    exact = sig.stratified_shift(xa, la, xb, lb, permutations=10**6)  # 116,424 splits
    drawn = sig.stratified_shift(xa, la, xb, lb, permutations=4999)
    assert exact.result.test == "stratified (exact)"
    assert drawn.result.test == "stratified (random splits)"
    assert abs((drawn.result.p_value or 0) - (exact.result.p_value or 0)) < 0.03


def test_methods_state_the_units_and_the_length_strata() -> None:
    """The report's Methods say what is done: invariants per chance to break them, and, when
    the groups' lengths differ, the length strata and how a permutation test uses them."""
    from quicsm.compare.grouping import Comparison, group_from_frame
    from quicsm.report import build_report

    a = pl.concat([_traces([300] * 4, 1, tag="al"), _traces([15] * 2, 2, tag="as")])
    b = pl.concat([_traces([300] * 2, 3, tag="bl"), _traces([15] * 12, 4, tag="bs")])
    a, b = (g.with_columns(pl.lit(f"{n}.sqlog").alias("file")) for n, g in (("a", a), ("b", b)))
    cmp = Comparison(a=group_from_frame("A", a), b=group_from_frame("B", b))
    methods = build_report([cmp], fmt="md").split("## Methods", 1)[1]
    assert "compared per chance to break them" in methods
    assert "“a NeverFollowedBy b” per return to a" in methods
    assert "within length strata (1, 2-3, 4-7, 8-15, ... states visited" in methods
    assert "a permutation test exchanges traces only within their length stratum" in methods
    same = Comparison(a=group_from_frame("A", a), b=group_from_frame("B", a.clone()))
    assert "within length strata (1, 2-3" not in build_report([same], fmt="md")


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 5), st.integers(0, 3))
def test_a_permutation_within_length_strata_has_traces_minus_two_per_stratum_df(
    seed: int, per_stratum: int, alone: int
) -> None:
    """The reference of a permutation within length strata learns two means per stratum that
    holds both groups: its degrees of freedom (what its MDE and predicted power rest on) are
    the traces of those strata less two per stratum; traces of a stratum of one group only
    stay in their group and do not count."""
    from quicsm.compare.families.clustered import proportion_test

    rng = np.random.default_rng(seed)
    labels_a = ["short"] * per_stratum + ["long"] * per_stratum + ["longest"] * alone
    labels_b = ["short"] * per_stratum + ["long"] * per_stratum
    ma = rng.integers(20, 40, len(labels_a)).astype(float)
    mb = rng.integers(20, 40, len(labels_b)).astype(float)
    ya = rng.binomial(ma.astype(int), 0.4).astype(float)
    yb = rng.binomial(mb.astype(int), 0.4).astype(float)
    res, se, df = proportion_test(
        ya, ma, yb, mb, 0.0, min_n=2, permutations=200, seed=1, lengths=(labels_a, labels_b)
    )
    assert res.test.startswith("permuted z within length strata")
    assert df == 4 * per_stratum - 2 * 2
    assert se > 0 and se == od.difference_se(ya, ma, yb, mb, 0.0)
    # without strata: one permutation over all the traces, N - 2
    res, _, df = proportion_test(ya, ma, yb, mb, 0.0, min_n=2, permutations=200, seed=1)
    assert res.test.startswith("permuted z") and df == len(ma) + len(mb) - 2
