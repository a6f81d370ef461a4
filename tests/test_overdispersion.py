"""The transition-level tests of :mod:`quicsm.stats.overdispersion`, and the power benchmark on
a tiny configuration."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.stats import distributions as dist
from quicsm.stats import overdispersion as od
from quicsm.stats import significance as sig

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))


def _beta_binomial(
    rng: np.random.Generator, n: int, p: float, rho: float, visits: float
) -> tuple[np.ndarray, np.ndarray]:
    m = rng.poisson(visits, n) + 1
    if rho > 0:
        conc = (1 - rho) / rho
        q = rng.beta(p * conc, (1 - p) * conc, n)
    else:
        q = np.full(n, p)
    return rng.binomial(m, q), m


@pytest.mark.parametrize("rho", [0.0, 0.1, 0.3])
def test_pooled_rho_recovers_the_intra_trace_correlation(rho: float) -> None:
    rng = np.random.default_rng(7)
    moments = []
    for _ in range(40):  # 40 rows of 8 traces, as the transitions of a comparison
        y, m = _beta_binomial(rng, 8, float(rng.uniform(0.2, 0.8)), rho, 30)
        moments.append(od.row_moments(y, m))
    assert od.pooled_rho(moments) == pytest.approx(rho, abs=0.04)


@pytest.mark.parametrize(("rho", "n"), [(0.0, 5), (0.1, 5), (0.1, 10)])
def test_proportion_shift_is_calibrated_with_the_pooled_rho(rho: float, n: int) -> None:
    """Under the null, with ρ estimated by pooling 12 rows, the z-test rejects at about α."""
    rng = np.random.default_rng(11)
    reps, rejected = 400, 0
    for _ in range(reps):
        rows = [
            (_beta_binomial(rng, n, 0.5, rho, 30), _beta_binomial(rng, n, 0.5, rho, 30))
            for _ in range(12)
        ]
        moments = [od.row_moments(y, m) for pair in rows for y, m in pair]
        r = od.pooled_rho(moments)
        (ya, ma), (yb, mb) = rows[0]
        res = od.proportion_shift(ya, ma, yb, mb, r)
        assert res.p_value is not None
        rejected += res.p_value < 0.05
    assert rejected / reps <= 0.05 + 0.03


def test_proportion_shift_has_transition_level_power_on_homogeneous_traces() -> None:
    """5 traces per group, ~30 exits each, 0.5 -> 0.7: the z-test sees the 150 transitions."""
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(200):
        ya, ma = _beta_binomial(rng, 5, 0.5, 0.0, 30)
        yb, mb = _beta_binomial(rng, 5, 0.7, 0.0, 30)
        p = od.proportion_shift(ya, ma, yb, mb, 0.0).p_value
        hits += p is not None and p < 0.01
    assert hits / 200 >= 0.8


def test_sparse_rows_are_not_trusted_to_the_normal_approximation() -> None:
    res = od.proportion_shift(
        np.array([0, 0, 1]),
        np.array([10, 10, 10]),
        np.array([1, 0, 0]),
        np.array([10, 10, 10]),
        0.0,
    )
    assert res.p_value is None and min(res.effective) == pytest.approx(30)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(0, 1)), max_size=30))
def test_benjamini_hochberg_is_monotone_bounded_and_keeps_untested(
    ps: list[float | None],
) -> None:
    adj = od.benjamini_hochberg(ps)
    assert [a is None for a in adj] == [p is None for p in ps]
    pairs = sorted((p, a) for p, a in zip(ps, adj, strict=True) if p is not None and a is not None)
    assert all(a >= p - 1e-12 and a <= 1.0 for p, a in pairs)
    assert all(x[1] <= y[1] + 1e-12 for x, y in zip(pairs, pairs[1:], strict=False))
    # never larger than Holm's (BH controls the false-discovery rate, a weaker error)
    holm = sig.holm(ps)
    assert all(
        b <= h + 1e-12 for b, h in zip(adj, holm, strict=True) if b is not None and h is not None
    )


def test_benjamini_hochberg_known_values() -> None:
    assert od.benjamini_hochberg([0.01, 0.04, 0.03, None, 0.5]) == pytest.approx(
        [0.04, 0.0533333, 0.0533333, None, 0.5]
    )


def test_detectable_effect_is_the_power_formula() -> None:
    assert od.detectable(0.1, alpha=0.05) == pytest.approx((1.959964 + 0.841621) * 0.1, rel=1e-5)
    assert np.isnan(od.detectable(float("nan"), alpha=0.05))


@settings(max_examples=60, deadline=None)
@given(
    se=st.floats(0.01, 1.0),
    level=st.floats(1e-4, 0.1),
    df=st.one_of(st.just(math.inf), st.floats(2.0, 500.0)),
    power=st.floats(0.5, 0.95),
)
def test_detectable_effect_is_where_the_power_reaches_its_target(
    se: float, level: float, df: float, power: float
) -> None:
    """The MDE inverts the power curve of the same reference, and a t reference (a test that
    learns its variance from few traces) never asks for less than the normal."""
    mde = od.detectable(se, alpha=level, power=power, df=df)
    assert od.power_at(mde, se, alpha=level, df=df) == pytest.approx(power, abs=1e-3)
    assert mde >= od.detectable(se, alpha=level, power=power) * (1 - 1e-6)
    assert od.power_at(0.5 * mde, se, alpha=level, df=df) < power


@settings(max_examples=40, deadline=None)
@given(
    se=st.floats(0.01, 1.0),
    level=st.floats(1e-4, 0.1),
    df=st.floats(2.0, 500.0),
    power=st.floats(0.5, 0.95),
)
def test_detectable_effect_is_the_search_over_power_at(
    se: float, level: float, df: float, power: float
) -> None:
    """The MDE's search (which computes the t quantile once) gives exactly what the same
    bisection over :func:`power_at` gives."""
    crit = dist.t_ppf(1 - level / 2, df)
    low, high = 0.0, crit + dist.norm_ppf(power) + 1.0
    while od.power_at(high * se, se, alpha=level, df=df) < power:
        low, high = high, high * 2.0
    while high - low > 1e-4:
        mid = (low + high) / 2.0
        if od.power_at(mid * se, se, alpha=level, df=df) < power:
            low = mid
        else:
            high = mid
    assert od.detectable(se, alpha=level, power=power, df=df) == (low + high) / 2.0 * se


def test_power_at_agrees_with_a_simulated_t_test() -> None:
    """Seeded: the noncentral-t power of a two-sample t-test on 6 + 6 normal values (df 10)
    is the rejection rate a simulation of that t-test finds (4,000 draws: within 3 points)."""
    rng = np.random.default_rng(5)
    delta, level, n = 1.5, 0.01, 6
    a = rng.normal(0.0, 1.0, (4000, n))
    b = rng.normal(delta, 1.0, (4000, n))
    p = np.array([sig_t(x, y) for x, y in zip(a, b, strict=True)])
    se = math.sqrt(2 / n)
    assert float(np.mean(p < level)) == pytest.approx(
        od.power_at(delta, se, alpha=level, df=2 * n - 2), abs=0.03
    )
    # the normal reference would promise more than the t-test delivers
    assert od.power_at(delta, se, alpha=level) > float(np.mean(p < level)) + 0.05


def sig_t(x: np.ndarray, y: np.ndarray) -> float:
    from scipy import stats as sps

    return float(sps.ttest_ind(x, y).pvalue)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(3, 12))
def test_difference_se_is_the_binomial_one_without_heterogeneity(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    ma, mb = rng.integers(1, 40, n).astype(float), rng.integers(1, 40, n).astype(float)
    ya, yb = rng.binomial(ma.astype(int), 0.3).astype(float), rng.binomial(mb.astype(int), 0.6)
    pa, pb = ya.sum() / ma.sum(), yb.sum() / mb.sum()
    want = math.sqrt(pa * (1 - pa) / ma.sum() + pb * (1 - pb) / mb.sum())
    if want > 0:
        assert od.difference_se(ya, ma, yb, mb, 0.0) == pytest.approx(want)
        assert od.difference_se(ya, ma, yb, mb, 0.1) > want


def test_model_rho_is_not_rounded_up() -> None:
    """Homogeneous rows whose moments fall below their expectation give a ρ below 0 (the
    unbiased estimate), where the test's own ρ is floored at 0 and at the pooled value."""
    own = od.Moments(-2.0, 40.0)
    pooled = od.Moments(-1.0, 400.0)
    assert od.model_rho(own, pooled, 40.0) < 0.0 == od.shrunk_rho(own, 0.0, 40.0)
    assert od.model_rho(od.Moments(), od.Moments(8.0, 100.0), 10.0) == pytest.approx(0.08)
    assert od.model_rho(od.Moments(-1e6, 1.0), pooled, 0.0) == pytest.approx(-1.0 / 99.0)


def test_power_benchmark_runs_on_a_tiny_configuration() -> None:
    import diff_power

    results = diff_power.run(1, alpha=0.05, seed=0, sizes=(3,))
    assert set(results["outcomes"]) == {
        f"{v}/{k}/3" for v in diff_power.VARIANTS for k, _ in diff_power.ROWS
    }
    assert "| homogeneous | power" in diff_power.markdown({"runs": [results]})


def test_power_benchmark_parts_by_design_and_repetition_join_into_the_single_run() -> None:
    """A run split by repetitions and by design (``--first``, ``--designs``) and joined
    (``--combine``) is the run one process makes; a later part replaces what it overlaps, a
    gap is refused."""
    import diff_power

    whole = diff_power.run(2, alpha=0.05, seed=3, sizes=(5,))
    parts = [
        diff_power.run(1, alpha=0.05, seed=3, sizes=(5,), designs=diff_power.VARIANTS),
        diff_power.run(2, alpha=0.05, seed=3, sizes=(5,), designs=(diff_power.LONG_SHORT,)),
        diff_power.run(1, alpha=0.05, seed=3, sizes=(5,), first=1),
    ]
    joined = diff_power.combine([{"runs": [p]} for p in parts])["runs"][0]
    assert joined["outcomes"] == whole["outcomes"]
    assert joined["predicted"] == whole["predicted"]
    assert joined["settings"] == whole["settings"]
    assert any(k.startswith("long-vs-short/power-named/5") for k in joined["outcomes"])
    assert "| long-vs-short | power" in diff_power.markdown({"runs": [joined]})
    with pytest.raises(SystemExit, match="missing"):
        diff_power.combine([{"runs": [parts[2]]}])


@pytest.mark.slow
def test_diff_keeps_its_family_wise_error_on_heterogeneous_traces_at_5_per_group() -> None:
    """Seeded: 40 null comparisons, 5 traces per group, at α = 0.05, for each variant: each
    family flags at most 6 of them (at a true rate of 5% more than 6 has probability about
    1%); and the transition change named in advance is found in at least 32 of 40
    comparisons of homogeneous traces (at the benchmark's power of about 0.9, fewer has
    probability under 5%)."""
    import diff_power

    results = diff_power.run(40, alpha=0.05, seed=123, sizes=(5,))
    out = results["outcomes"]
    for variant in diff_power.VARIANTS:
        for family in ("null-primary", "null-exploratory", "null-named"):
            assert out[f"{variant}/{family}/5"].count("1") <= 6, (variant, family, out)
    assert out["homogeneous/power-named/5"].count("1") >= 32, out


def test_plan_turns_a_pilot_into_traces_per_group() -> None:
    """From a 5 vs 5 pilot of the benchmark's chain: the changed transition needs fewer traces
    than a smaller effect would; outcomes are never planned below what their exact test can
    reach (time shares, Welch's t-tests, below 3 traces); the plan is sorted primary first."""
    import diff_power

    from quicsm.compare.diff import diff
    from quicsm.compare.plan import plan

    rng = np.random.default_rng([7, 0])
    a = diff_power.traces(5, rng, diff_power.CHAIN, mixed=False, tag="a")
    b = diff_power.traces(5, rng, diff_power.CHANGED, mixed=False, tag="b")
    r = diff(a, b, alpha=0.05)
    own = plan(r)
    assert own["family"].to_list() == sorted(own["family"].to_list(), key=lambda f: f != "primary")
    subject = pl.col("subject") == "CongestionAvoidance → Recovery"
    edge = own.filter(subject).row(0, named=True)
    small = plan(r, effect=0.05).filter(subject).row(0, named=True)
    assert 3 <= edge["traces_per_group"] < small["traces_per_group"]
    primary = own.filter(pl.col("family") == "primary")["level"][0]
    exact_floor = min(n for n in range(3, 9) if 2 / math.comb(2 * n, n) <= primary)
    states = own.filter(pl.col("kind") == "state")["traces_per_group"].drop_nulls()
    assert states.min() >= 3
    outcomes = plan(r).filter(pl.col("kind") == "outcome")["traces_per_group"].drop_nulls()
    assert outcomes.is_empty() or outcomes.min() >= exact_floor


def test_plan_floor_is_the_exact_tests_for_outcomes_only() -> None:
    """A huge effect needs few traces: an outcome (exact permutation test) is planned at the
    smallest n whose 2 / C(2n, n) reaches the level, anything else at 3."""
    from quicsm.compare.plan import traces_needed

    level = 0.01 / 8
    floor = min(n for n in range(3, 9) if 2 / math.comb(2 * n, n) <= level)
    assert traces_needed(0.01, 10.0, level, 5, 0.8, per_trace=True) == floor > 3
    assert traces_needed(0.01, 10.0, level, 5, 0.8, per_trace=False) == 3
    assert traces_needed(0.01, 10.0, level, 5, 0.8, df=8.0, per_trace=False) == 3


@given(
    st.lists(st.integers(1, 60), min_size=2, max_size=8),
    st.lists(st.integers(1, 60), min_size=2, max_size=8),
    st.floats(0.001, 0.9),
)
def test_between_df_is_the_traces_df_scaled_by_the_between_share(
    ma: list[int], mb: list[int], rho: float
) -> None:
    """Satterthwaite: no between-trace variance keeps the normal reference; with some, the
    degrees of freedom are at least the traces' (n_a + n_b − 2) and fall as ρ grows."""
    a, b = np.array(ma, dtype=float), np.array(mb, dtype=float)
    assert od.between_df(a, b, 0.0) == math.inf
    df = od.between_df(a, b, rho)
    assert df >= len(ma) + len(mb) - 2 - 1e-9
    if (a > 1).any() or (b > 1).any():
        assert od.between_df(a, b, min(0.99, rho * 2)) <= df + 1e-9


@given(
    st.lists(st.tuples(st.integers(0, 40), st.integers(1, 40)), min_size=2, max_size=7),
    st.lists(st.tuples(st.integers(0, 40), st.integers(1, 40)), min_size=2, max_size=7),
    st.floats(0.0, 0.9),
)
def test_permuted_z_of_the_observed_split_is_the_proportion_shift_z(
    a: list[tuple[int, int]], b: list[tuple[int, int]], rho: float
) -> None:
    """The statistic the permutation test shuffles is, on the observed split, exactly the
    beta-binomial z of :func:`od.proportion_shift` (in absolute value)."""
    ya, ma = (np.array([min(y, m) for y, m in a], float), np.array([m for _, m in a], float))
    yb, mb = (np.array([min(y, m) for y, m in b], float), np.array([m for _, m in b], float))
    shift = od.proportion_shift(ya, ma, yb, mb, rho)
    units = np.vstack([od.trace_units(ya, ma, rho), od.trace_units(yb, mb, rho)])
    z = od.abs_z_statistics(units[: len(a)].sum(axis=0), units.sum(axis=0))[0]
    if shift.se_null == shift.se_null and shift.se_null > 0:
        assert z == pytest.approx(abs(shift.z), rel=1e-9, abs=1e-12)
    else:
        assert z == 0.0


def test_few_traces_refer_a_transition_to_its_permutations_over_traces() -> None:
    """5 vs 5 traces: the transition's z is referred to all 252 splits of the traces (the
    smallest p-value is 2/252: the observed split and its mirror); past FEW_TRACES per group
    the large-sample reference is used."""
    import diff_power

    from quicsm.compare.diff import diff

    def edge(n: int) -> dict[str, object]:
        rng = np.random.default_rng([3, n])
        a = diff_power.traces(n, rng, diff_power.CHAIN, mixed=True, tag="a")
        b = diff_power.traces(n, rng, diff_power.CHANGED, mixed=True, tag="b")
        r = diff(a, b, invariants=False)
        sel = (pl.col("source") == "CongestionAvoidance") & (pl.col("target") == "Recovery")
        return r.edges.filter(sel).row(0, named=True)

    few = edge(5)
    assert few["test"] == "permuted z (exact)"
    assert 2 / 252 - 1e-12 <= few["p_unadjusted"] <= 1
    many = edge(od.FEW_TRACES + 1)
    assert many["test"] == "beta-binomial"


def test_three_heterogeneous_traces_per_group_give_no_false_transition() -> None:
    """The Student-t reference of the beta-binomial z flagged CongestionAvoidance → Recovery in
    about 9% of null comparisons of 3 vs 3 heterogeneous traces at α = 0.05 (its ρ estimate
    is often 0 there); referred to the 20 splits of the traces, its p-value cannot go below
    0.1. Seeded: 60 null comparisons of the benchmark's chain."""
    import diff_power

    from quicsm.compare import diff as d
    from quicsm.compare.families.transitions import transitions

    flagged = 0
    tests: dict[str, int] = {}
    for rep in range(60):
        rng = np.random.default_rng([5, rep])
        a = d.keyed_transitions(diff_power.traces(3, rng, diff_power.CHAIN, mixed=True, tag="a"))
        b = d.keyed_transitions(diff_power.traces(3, rng, diff_power.CHAIN, mixed=True, tag="b"))
        fam = transitions(a, b, None, min_n=sig.MIN_N, permutations=4999, seed=rep)
        (edge,) = (
            e
            for e in fam["edges"]
            if (e["source"], e["target"]) == ("CongestionAvoidance", "Recovery")
        )
        # (Fisher's test on the effective counts when a group expects fewer than 5: once here)
        tests[edge["test"]] = tests.get(edge["test"], 0) + 1
        flagged += edge["p_unadjusted"] < 0.05
    assert flagged == 0
    assert tests.get("permuted z (exact)", 0) >= 55, tests
    assert set(tests) <= {"permuted z (exact)", "fisher (effective)"}, tests
