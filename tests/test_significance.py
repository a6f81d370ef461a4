"""The statistical tests behind quicsm diff: agreement with scipy, Holm, and refusing to answer
when there is too little data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from quicsm.core.numbers import format_p
from quicsm.stats import significance as sig
from quicsm.stats.intervals import cluster_wilson, mean_design_effect, wilson


def test_welch_matches_scipy_and_orients_b_minus_a() -> None:
    a = [0.1, 0.2, 0.15, 0.12, 0.18]
    b = [0.5, 0.55, 0.61, 0.4, 0.52, 0.47]
    w = sig.welch(a, b)
    ref = sps.ttest_ind(b, a, equal_var=False)
    assert w.result.p_value == pytest.approx(ref.pvalue, rel=1e-12)
    assert w.difference == pytest.approx(np.mean(b) - np.mean(a))
    assert w.ci_low < w.difference < w.ci_high
    ci = ref.confidence_interval(0.95)
    assert (w.ci_low, w.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-9)


def test_too_few_traces_is_said_plainly() -> None:
    w = sig.welch([0.1, 0.2], [0.5, 0.6, 0.7])
    assert w.result.p_value is None
    assert w.result.note == "n=2 < 3: no test"
    assert math.isnan(w.ci_low)
    assert sig.mann_whitney([1, 2, 3], [4]).note == "n=1 < 3: no test"
    counts = np.array([[3, 1], [2, 2]])
    assert sig.contingency_test(counts, counts).note == "n=2 < 3: no test"
    assert sig.fisher_traces(0, 2, 1, 5).p_value is None


def test_welch_without_variance() -> None:
    same = sig.welch([0.0] * 4, [0.0] * 5)
    assert same.result.p_value == 1.0 and same.difference == 0.0
    differ = sig.welch([0.2] * 4, [0.3] * 5)
    assert differ.result.p_value is None
    assert differ.result.note == "no variance: no test"


def test_holm_known_values() -> None:
    # m = 4: sorted p 0.01, 0.02, 0.03, 0.5 -> 0.04, 0.06, 0.06 (monotone), 0.5
    adjusted = sig.holm([0.03, None, 0.01, 0.5, 0.02])
    assert adjusted == pytest.approx([0.06, None, 0.04, 0.5, 0.06])  # type: ignore[arg-type]
    assert sig.holm([0.9, 0.8]) == [1.0, 1.0]
    assert sig.holm([]) == []


@given(st.lists(st.one_of(st.none(), st.floats(0, 1)), max_size=12))
def test_holm_never_lowers_a_p_value_and_keeps_order(ps: list[float | None]) -> None:
    adjusted = sig.holm(ps)
    for p, q in zip(ps, adjusted, strict=True):
        assert (p is None) == (q is None)
        if p is not None and q is not None:
            assert p <= q <= 1.0
    tested = [(p, q) for p, q in zip(ps, adjusted, strict=True) if p is not None]
    for p1, q1 in tested:
        for p2, q2 in tested:
            if p1 < p2:
                assert q1 <= q2  # type: ignore[operator]


def test_g_test_used_for_large_counts_and_matches_scipy() -> None:
    # 10 vs 10 traces: 184756 splits, too many to enumerate, so the G-test
    a = np.array([[30, 10, 10]] * 10)
    b = np.array([[10, 30, 10]] * 10)
    res = sig.contingency_test(a, b)
    assert res.test == "g-test"
    table = np.vstack([a.sum(0), b.sum(0)])
    ref = sps.chi2_contingency(table, lambda_="log-likelihood", correction=False)
    assert res.p_value == pytest.approx(ref.pvalue, rel=1e-9)


def test_permutation_used_for_small_counts_exact_when_few_splits() -> None:
    a = np.array([[1, 0], [1, 0], [1, 0]])
    b = np.array([[0, 1], [0, 1], [0, 1]])
    res = sig.contingency_test(a, b)
    # 3 vs 3 traces: 20 splits, the observed one and its mirror are the most extreme
    assert res.test == "permutation (exact)"
    assert res.p_value == pytest.approx(2 / 20)


def test_permutation_sampled_when_many_splits_and_symmetric() -> None:
    rng = np.random.default_rng(1)
    a = rng.poisson(0.6, size=(15, 3))
    b = rng.poisson([0.2, 0.9, 0.6], size=(11, 3))
    res = sig.contingency_test(a, b, permutations=999, seed=3)
    assert res.test == "permutation"
    # the same p-value by brute force: shuffle traces between the groups, G-test of the totals
    # (scipy's log-likelihood chi-square, independent of the implementation under test)
    from scipy.stats import chi2_contingency

    def g(x: np.ndarray, y: np.ndarray) -> float:
        table = np.array([x.sum(axis=0), y.sum(axis=0)])
        table = table[:, table.sum(axis=0) > 0]
        return float(chi2_contingency(table, correction=False, lambda_="log-likelihood")[0])

    units = np.vstack([a, b])
    observed = g(a, b)
    shuffle = np.random.default_rng(7)
    hits = 0
    for _ in range(4000):
        idx = shuffle.permutation(len(units))
        hits += g(units[idx[: len(a)]], units[idx[len(a) :]]) >= observed - 1e-9
    reference = hits / 4000
    assert res.p_value == pytest.approx(reference, abs=0.05)
    swapped = sig.contingency_test(b, a, permutations=999, seed=3)
    assert swapped.p_value == res.p_value
    # the sampled p-value estimates the exact one (every one of the 7.7 million splits is too
    # many; a smaller design is enumerated instead)
    a, b = a[:9], b[:8]
    exact = sig.contingency_test(a, b, permutations=30_000)
    sampled = sig.contingency_test(a, b, permutations=4999, seed=3)
    assert exact.test == "permutation (exact)" and sampled.test == "permutation"
    assert sampled.p_value == pytest.approx(exact.p_value, abs=0.03)


def test_identical_single_outcome() -> None:
    a = np.array([[2, 0]] * 3)
    res = sig.contingency_test(a, a)
    assert res.p_value == 1.0 and res.test == "identical"


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 4), min_size=3, max_size=3), min_size=3, max_size=7),
    st.lists(st.lists(st.integers(0, 4), min_size=3, max_size=3), min_size=3, max_size=7),
)
def test_contingency_p_value_in_range_and_symmetric(a: list[list[int]], b: list[list[int]]) -> None:
    ra = sig.contingency_test(np.array(a), np.array(b), permutations=199)
    rb = sig.contingency_test(np.array(b), np.array(a), permutations=199)
    assert (ra.p_value is None) == (rb.p_value is None)
    if ra.p_value is not None:
        assert 0.0 < ra.p_value <= 1.0
        assert ra.p_value == pytest.approx(rb.p_value, abs=1e-12)


def test_mann_whitney_and_fisher_match_scipy() -> None:
    a, b = [1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0, 9.0]
    ref = sps.mannwhitneyu(a, b, alternative="two-sided")
    assert sig.mann_whitney(a, b).p_value == pytest.approx(ref.pvalue)
    assert sig.mann_whitney([1.0] * 3, [1.0] * 3).p_value == 1.0
    assert sig.fisher_traces(0, 10, 7, 10).p_value == pytest.approx(
        sps.fisher_exact([[0, 10], [7, 3]]).pvalue
    )


def test_wilson_and_format() -> None:
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and 0.2 < hi < 0.35
    assert all(math.isnan(x) for x in wilson(0, 0))
    assert format_p(0.0004) == "p < 0.001"
    assert format_p(0.0123) == "p = 0.012"
    assert format_p(None, note="n=2 < 3: no test") == "n=2 < 3: no test"


def test_cluster_interval_at_the_boundary_counts_traces_not_transitions() -> None:
    # 4 traces x 10 transitions, every one to the same target: p = 1. The traces, not the 40
    # transitions, are the replicates: the interval is Wilson over 4, not over 40.
    counts = np.array([[10, 0]] * 4)
    lo, hi = cluster_wilson(counts, 0)
    assert hi == 1.0
    assert lo == pytest.approx(wilson(4, 4)[0])
    assert lo < wilson(40, 40)[0] - 0.2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 6), min_size=2, max_size=2), min_size=2, max_size=8))
def test_cluster_interval_never_narrower_than_plain_wilson(rows: list[list[int]]) -> None:
    counts = np.array(rows)
    n = int(counts.sum())
    if n == 0:
        return
    lo, hi = cluster_wilson(counts, 0)
    plo, phi = wilson(int(counts[:, 0].sum()), n)
    assert lo <= plo + 1e-12 and hi >= phi - 1e-12


def test_mean_design_effect_weights_categories_by_one_minus_pooled_share() -> None:
    rng = np.random.default_rng(2)
    # category 2 is rare and its counts cluster heavily in a few traces; the weighted mean
    # lets it count by 1 - p_2, near 1, as Rao and Scott's first-order correction does
    a = rng.multinomial(30, [0.6, 0.38, 0.02], size=20)
    b = rng.multinomial(30, [0.6, 0.38, 0.02], size=20)
    a[0, 2] += 30
    d = mean_design_effect(a, b)
    from quicsm.stats.intervals import cluster_variances

    cl, bi = np.zeros(3), np.zeros(3)
    for g in (a, b):
        _, c, v = cluster_variances(g)
        cl += c
        bi += v
    pooled = (a.sum(0) + b.sum(0)) / (a.sum() + b.sum())
    expected = max(1.0, float(np.sum((1 - pooled) * cl / bi) / np.sum(1 - pooled)))
    assert d == pytest.approx(expected)


def _brute_force_shift(a: list[float], b: list[float], tie: float) -> float:
    """The share of splits whose |difference of means| (weighted by n_a n_b / n, the
    statistic of one stratum) is at least the observed one, less ``tie`` (relative)."""
    import itertools

    values = a + b
    w = len(a) * len(b) / len(values)
    observed = w * abs(np.mean(b) - np.mean(a))
    hits = total = 0
    for idx in itertools.combinations(range(len(values)), len(b)):
        xb = [values[i] for i in idx]
        xa = [values[i] for i in range(len(values)) if i not in idx]
        total += 1
        hits += w * abs(np.mean(xb) - np.mean(xa)) >= observed - tie * max(1.0, observed)
    return hits / total


_GRID = st.integers(0, 1000).map(lambda k: k / 1000)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(_GRID, min_size=3, max_size=5),
    st.lists(_GRID, min_size=3, max_size=5),
)
def test_exact_mean_shift_equals_brute_force(a: list[float], b: list[float]) -> None:
    # values on a grid: two splits' statistics are equal or apart by far more than the
    # implementation's tie tolerance (1e-9 relative), so the count is defined exactly
    w = sig.mean_shift(a, b)
    if w.result.p_value is None:
        return
    assert w.result.test in ("permutation (exact)", "welch")
    if w.result.test == "permutation (exact)":
        assert w.result.p_value == pytest.approx(_brute_force_shift(a, b, 1e-9), abs=1e-9)
        assert 0 < w.result.p_min <= w.result.p_value


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=3, max_size=5),
    st.lists(st.floats(0, 1), min_size=3, max_size=5),
)
@example(a=[0.0, 0.0, 0.0], b=[0.0, 1.0, 1e-09])
@example(a=[0.0, 0.0, 0.0], b=[0.0, 0.0, 1.0, 1e-09])
def test_exact_mean_shift_is_bracketed_by_brute_force(a: list[float], b: list[float]) -> None:
    # any values: splits within ~1e-9 of the observed statistic may fall either side of the
    # tie tolerance by rounding, so the p-value lies between the strict and lenient counts
    w = sig.mean_shift(a, b)
    if w.result.p_value is None or w.result.test != "permutation (exact)":
        return
    low, high = _brute_force_shift(a, b, -1e-7), _brute_force_shift(a, b, 1e-7)
    assert low - 1e-9 <= w.result.p_value <= high + 1e-9


def test_exact_test_over_five_traces_cannot_go_below_two_in_252() -> None:
    w = sig.mean_shift([1, 2, 3, 4, 5], [11, 12, 13, 14, 15])
    assert w.result.test == "permutation (exact)"
    assert w.result.p_value == pytest.approx(2 / 252)
    assert w.result.p_min == pytest.approx(2 / 252)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=6, max_size=6),
    st.lists(st.floats(0, 1), min_size=6, max_size=6),
    st.floats(-50, 50),
)
def test_stratified_shift_ignores_a_stratum_offset(
    a: list[float], b: list[float], offset: float
) -> None:
    # strata x and y; moving every value of stratum y (in both groups) by the same amount
    # changes nothing: only within-stratum differences count
    sa, sb = ["x", "x", "x", "y", "y", "y"], ["x", "x", "y", "y", "y", "y"]
    r1 = sig.stratified_shift(a, sa, b, sb)
    a2 = [v + offset if s == "y" else v for v, s in zip(a, sa, strict=True)]
    b2 = [v + offset if s == "y" else v for v, s in zip(b, sb, strict=True)]
    r2 = sig.stratified_shift(a2, sa, b2, sb)
    assert r1.result.p_value == pytest.approx(r2.result.p_value, abs=1e-6)
    assert r1.difference == pytest.approx(r2.difference, abs=1e-6)


def test_stratified_shift_sees_through_a_confounded_mix() -> None:
    # the outcome depends on the stratum only; A ran mostly stratum "lossy", B mostly "clean"
    rng = np.random.default_rng(0)
    sa = ["lossy"] * 16 + ["clean"] * 4
    sb = ["lossy"] * 4 + ["clean"] * 16
    level = {"lossy": 0.8, "clean": 0.2}
    a = [level[s] + rng.normal(0, 0.05) for s in sa]
    b = [level[s] + rng.normal(0, 0.05) for s in sb]
    pooled = sig.welch(a, b)
    assert pooled.result.p_value is not None and pooled.result.p_value < 1e-3
    strat = sig.stratified_shift(a, sa, b, sb)
    assert strat.result.p_value is not None and strat.result.p_value > 0.05
    # a real within-stratum effect is found
    b_up = [v + 0.1 for v in b]
    assert sig.stratified_shift(a, sa, b_up, sb).result.p_value < 1e-3  # type: ignore[operator]


def test_stratified_shift_with_one_stratum_is_the_exact_test() -> None:
    a, b = [0.1, 0.5, 0.3, 0.2], [0.6, 0.4, 0.9, 0.7]
    one = sig.stratified_shift(a, ["s"] * 4, b, ["s"] * 4)
    assert one.result.test == "stratified (exact)"
    assert one.result.p_value == pytest.approx(sig.mean_shift(a, b).result.p_value)


def test_stratified_shift_without_shared_strata_says_so() -> None:
    r = sig.stratified_shift([1, 2, 3], ["x"] * 3, [4, 5, 6], ["y"] * 3)
    assert r.result.p_value is None
    assert r.result.note == "no stratum with traces in both groups: no test"


@given(
    st.lists(
        st.tuples(st.floats(0, 1), st.sampled_from([0.0, 0.004, 0.02, 0.1, 1.0])),
        max_size=15,
    )
)
def test_holm_tarone_is_holm_over_the_tests_that_can_reach_significance(
    tests: list[tuple[float, float]],
) -> None:
    ps = [max(p, pm) for p, pm in tests]
    p_mins = [pm for _, pm in tests]
    adjusted, member = sig.holm_tarone(ps, p_mins, alpha=0.05)

    for p, pm, q, inside in zip(ps, p_mins, adjusted, member, strict=True):
        assert q is not None and q >= p
        if not inside:
            assert q >= 0.05  # never significant
            assert pm > 0.05 / len(ps)
    family = [p for p, inside in zip(ps, member, strict=True) if inside]
    assert [q for q, inside in zip(adjusted, member, strict=True) if inside] == sig.holm(family)
    if all(pm == 0.0 for pm in p_mins):
        assert adjusted == sig.holm(ps)


def test_design_effect_is_one_for_independent_counts_and_grows_with_clustering() -> None:
    rng = np.random.default_rng(5)
    iid_a = rng.multinomial(20, [0.5, 0.3, 0.2], size=30)
    iid_b = rng.multinomial(20, [0.5, 0.3, 0.2], size=30)
    assert mean_design_effect(iid_a, iid_b) == pytest.approx(1.0, abs=0.35)
    # half the traces always take category 0, half category 1: strongly clustered
    clustered = np.array([[20, 0, 0], [0, 20, 0]] * 15)
    assert mean_design_effect(clustered, clustered) > 10
    # the G-test is corrected by it: the same pooled table is far less significant (with few
    # permutations allowed, so that the 924 splits are not enumerated)
    a = np.array([[40, 0], [0, 40], [40, 0], [0, 40], [40, 0], [40, 0]])
    b = np.array([[0, 40], [40, 0], [0, 40], [0, 40], [40, 0], [0, 40]])
    res = sig.contingency_test(a, b, permutations=100)
    assert res.test == "g-test" and res.note.startswith("design effect")
    naive = sps.chi2.sf(sig.g_statistic(np.vstack([a.sum(0), b.sum(0)])), 1)
    assert naive < 1e-6 < 0.05 < res.p_value  # type: ignore[operator]


@given(
    st.lists(
        st.tuples(st.floats(0, 1), st.sampled_from([0.0, 0.004, 0.02, 0.1, 1.0])),
        max_size=15,
    )
)
def test_bh_tarone_is_bh_over_the_tests_that_can_reach_significance(
    tests: list[tuple[float, float]],
) -> None:
    """Gilbert's procedure: Tarone's K chooses the family, Benjamini-Hochberg runs inside it;
    a test outside can never be significant; with only continuous tests it is plain BH."""
    ps = [max(p, pm) for p, pm in tests]
    p_mins = [pm for _, pm in tests]
    adjusted, member = sig.bh_tarone(ps, p_mins, alpha=0.05)
    k = sig.tarone_k(p_mins, alpha=0.05)
    assert sum(member) <= k
    for p, pm, q, inside in zip(ps, p_mins, adjusted, member, strict=True):
        assert inside == (pm <= 0.05 / k)
        assert (q is None) == (not inside)
        if q is not None:
            assert q >= p * (1 - 1e-12)
    family = [p for p, inside in zip(ps, member, strict=True) if inside]
    assert [q for q in adjusted if q is not None] == sig.benjamini_hochberg(family)
    if all(pm == 0.0 for pm in p_mins):
        assert adjusted == sig.benjamini_hochberg(ps)
