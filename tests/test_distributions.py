"""quicsm's own distribution functions and exact tests (:mod:`quicsm.stats.distributions`)
agree with ``scipy.stats`` up to floating-point noise over wide argument ranges, and a diff or a
report imports no scipy."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats

from quicsm.stats import distributions as d


def _close(ours: float, theirs: float, rel: float) -> bool:
    theirs = float(theirs)
    if math.isnan(theirs) or math.isnan(ours):
        return math.isnan(theirs) and math.isnan(ours)
    if math.isinf(theirs):
        return ours == theirs
    if abs(theirs) < 1e-290:  # subnormal or underflowed: few significant digits are left
        return abs(ours - theirs) <= 1e-290
    return abs(ours - theirs) <= rel * abs(theirs)


@given(st.floats(-40, 40))
def test_normal_survival(x: float) -> None:
    assert _close(d.norm_sf(x), stats.norm.sf(x), 1e-12)


@given(st.floats(0, 1))
def test_normal_quantile(q: float) -> None:
    assert _close(d.norm_ppf(q), stats.norm.ppf(q), 1e-13)


def test_normal_quantile_edges() -> None:
    assert d.norm_ppf(0.0) == -math.inf and d.norm_ppf(1.0) == math.inf
    assert math.isnan(d.norm_ppf(1.5)) and math.isnan(d.norm_ppf(math.nan))


_DF = st.one_of(
    st.floats(0.05, 5),
    st.floats(5, 1e3),
    st.floats(1e3, 1e6),
    st.integers(1, 10_000).map(float),
)
_T = st.one_of(st.floats(-60, 60), st.floats(-1e-3, 1e-3), st.floats(-1e6, 1e6))


@settings(max_examples=400)
@given(_T, _DF)
def test_t_survival(t: float, df: float) -> None:
    # the t of a huge df is resolved to ~1e-10 at most by either implementation
    assert _close(d.t_sf(t, df), stats.t.sf(t, df), 1e-10 if df <= 1e5 else 1e-9)


@settings(max_examples=400)
@given(st.floats(1e-9, 1 - 1e-9), _DF.filter(lambda df: df >= 0.5))
@example(q=0.5000000000000001, df=1.0)
def test_t_quantile(q: float, df: float) -> None:
    ours, theirs = d.t_ppf(q, df), float(stats.t.ppf(q, df))
    # near the median the quantile is ~0 and q itself is known to one ulp (~1e-16): the
    # answer is only defined to about that over the density at 0 (>= 0.27 for df >= 0.5)
    assert _close(ours, theirs, 1e-10 if df <= 1e5 else 1e-9) or abs(ours - theirs) <= 1e-14


@settings(max_examples=200)
@given(st.floats(1e-15, 1 - 1e-15), _DF)
def test_t_quantile_inverts_the_survival_function(q: float, df: float) -> None:
    """Also where scipy's quantile saturates (tiny ``df``, far tails: its own ``t.sf`` of its
    quantile is 100 times the tail asked for)."""
    t = d.t_ppf(q, df)
    tail = d.t_sf(t, df) if q > 0.5 else d.t_sf(-t, df)  # by symmetry, without cancellation
    assert _close(tail, 1.0 - q if q > 0.5 else q, 1e-9)


def test_t_edges() -> None:
    assert d.t_sf(0.0, 3.0) == 0.5 and d.t_ppf(0.5, 3.0) == 0.0
    assert d.t_sf(math.inf, 3.0) == 0.0 and d.t_sf(-math.inf, 3.0) == 1.0
    assert d.t_sf(1.5, math.inf) == d.norm_sf(1.5)
    assert d.t_ppf(0.0, 2.0) == -math.inf and d.t_ppf(1.0, 2.0) == math.inf
    assert math.isnan(d.t_sf(1.0, 0.0)) and math.isnan(d.t_ppf(0.3, -1.0))


@settings(max_examples=400)
@given(st.one_of(st.floats(1e-4, 50), st.floats(50, 1e4)), st.floats(0.2, 2000))
def test_chi2_survival(x: float, df: float) -> None:
    assert _close(d.chi2_sf(x, df), stats.chi2.sf(x, df), 1e-10)


def test_chi2_edges() -> None:
    assert d.chi2_sf(0.0, 3.0) == 1.0 and d.chi2_sf(math.inf, 3.0) == 0.0


@given(st.lists(st.sampled_from([0.0, 1.0, 1.5, 2.0, -3.0, 7.25]) | st.floats(-1e9, 1e9)))
def test_mid_ranks(values: list[float]) -> None:
    assert np.array_equal(d.rankdata(values), stats.rankdata(values))


_COUNT = st.integers(0, 60)


@settings(max_examples=400)
@given(_COUNT, _COUNT, _COUNT, _COUNT)
def test_fisher_exact(a: int, b: int, c: int, e: int) -> None:
    table = [[a, b], [c, e]]
    odds, p = d.fisher_exact(table)
    reference = stats.fisher_exact(table, alternative="two-sided")
    assert _close(p, reference.pvalue, 1e-12)
    assert _close(odds, reference.statistic, 0.0)


@settings(max_examples=100)
@given(st.integers(0, 400), st.integers(1, 400), st.integers(0, 400), st.integers(1, 400))
def test_fisher_exact_large(k_a: int, n_a: int, k_b: int, n_b: int) -> None:
    table = [[min(k_a, n_a), n_a - min(k_a, n_a)], [min(k_b, n_b), n_b - min(k_b, n_b)]]
    assert _close(d.fisher_exact(table)[1], stats.fisher_exact(table).pvalue, 1e-12)


def test_fisher_exact_ties_of_equal_tables() -> None:
    """Tables as likely as the one seen (symmetric margins) count toward p, as scipy's."""
    for table in ([[3, 3], [3, 3]], [[2, 4], [4, 2]], [[0, 5], [5, 0]], [[1, 0], [0, 1]]):
        assert _close(d.fisher_exact(table)[1], stats.fisher_exact(table).pvalue, 1e-14)


@settings(max_examples=300)
@given(
    st.lists(st.integers(0, 10**6), min_size=2, max_size=16, unique=True),
    st.integers(1, 8),
)
def test_mann_whitney_exact(values: list[int], cut: int) -> None:
    cut = min(cut, len(values) - 1)
    a, b = [v / 7 for v in values[:cut]], [v / 7 for v in values[cut:]]
    u, p = d.mann_whitney_u(a, b, exact=True)
    reference = stats.mannwhitneyu(a, b, alternative="two-sided", method="exact")
    assert u == reference.statistic
    assert _close(p, reference.pvalue, 1e-12)


@settings(max_examples=300)
@given(
    st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5]) | st.floats(-100, 100), min_size=2),
    st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5]) | st.floats(-100, 100), min_size=2),
)
def test_mann_whitney_asymptotic(a: list[float], b: list[float]) -> None:
    if np.ptp(a + b) == 0:  # the callers test this case themselves (no variance)
        return
    u, p = d.mann_whitney_u(a, b, exact=False)
    reference = stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic")
    assert u == reference.statistic
    assert _close(p, reference.pvalue, 1e-12)


@pytest.mark.parametrize(
    "module",
    [
        "quicsm.compare.diff",
        "quicsm.compare.plan",
        "quicsm.compare.families.transitions",
        "quicsm.stats.significance",
        "quicsm.stats.overdispersion",
        "quicsm.report.sections",
    ],
)
def test_no_scipy_on_the_way(module: str) -> None:
    code = f"import sys, {module}; print(any(m.startswith('scipy') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@settings(max_examples=300, deadline=None)
@given(
    st.floats(0.5, 10.0),
    st.one_of(st.floats(1.0, 60.0), st.floats(60.0, 1000.0)),
    st.floats(0.0, 12.0),
)
def test_noncentral_t_tails(crit: float, df: float, shift: float) -> None:
    """Both tails of the noncentral t over the ranges an MDE uses (a critical value of a test
    at levels down to 1e-6 or so, the degrees of freedom of 3 + 3 traces up to the normal's
    stand-in, effects up to 12 standard errors) are scipy's, to 1e-9 absolute."""
    upper, lower = d.nct_tails(crit, df, shift)
    assert upper == pytest.approx(float(stats.nct.sf(crit, df, shift)), abs=1e-9)
    want = float(stats.nct.cdf(-crit, df, shift))
    if want == want:  # far in its tail scipy's lower tail can be NaN where it is ~0
        assert lower == pytest.approx(want, abs=1e-9)
    else:
        assert 0.0 <= lower < 1e-9


def test_noncentral_t_edges() -> None:
    # no shift: the central t's two tails; infinite df: the normal's
    upper, lower = d.nct_tails(2.5, 7.0, 0.0)
    assert upper == pytest.approx(d.t_sf(2.5, 7.0), rel=1e-10) == lower
    assert d.nct_tails(1.96, math.inf, 1.0) == (d.norm_sf(0.96), d.norm_sf(2.96))
    assert all(math.isnan(x) for x in d.nct_tails(2.0, 0.0, 1.0))
    assert all(math.isnan(x) for x in d.nct_tails(math.nan, 5.0, 1.0))


def _nct_tails_by_object_array(crit: float, df: float, shift: float) -> tuple[float, float]:
    """The noncentral t's tails as :func:`d.nct_tails` computed them before its nodes were
    cached per ``df`` and its normal tails taken over a list: the quadrature built on every
    call and :func:`d.norm_sf` mapped over an object array."""
    lo, hi = d._log_scale_span(df)
    panels = math.ceil((hi - lo) / min(1.0, 2.0 / math.sqrt(df)))
    x, w = np.polynomial.legendre.leggauss(24)
    edges = np.linspace(lo, hi, panels + 1)
    half = (edges[1] - edges[0]) / 2.0
    y = (edges[:-1, None] + half + half * x[None, :]).ravel()
    w = np.tile(w, panels)
    log_density = df * (y - np.exp(2.0 * y) / 2.0)
    density = w * np.exp(log_density - log_density.max())
    density /= density.sum()
    s = np.exp(y)
    each = np.frompyfunc(d.norm_sf, 1, 1)
    upper = each(crit * s - shift).astype(float)
    lower = each(crit * s + shift).astype(float)
    return float(density @ upper), float(density @ lower)


@settings(max_examples=300, deadline=None)
@given(
    st.floats(0.0, 40.0),
    st.one_of(st.floats(0.05, 60.0), st.floats(60.0, 1e6)),
    st.floats(-40.0, 40.0),
)
@example(1.96, 10.0, 2.8)  # a search asks again for the same df: the cached nodes
@example(1.96, 10.0, 2.9)
def test_noncentral_t_tails_are_the_per_call_quadrature(
    crit: float, df: float, shift: float
) -> None:
    """The cached nodes and the list of normal tails give the floats the quadrature built on
    every call gave, whatever the arguments (to 1e-12, absolute: they are probabilities)."""
    assert d.nct_tails(crit, df, shift) == pytest.approx(
        _nct_tails_by_object_array(crit, df, shift), rel=0, abs=1e-12
    )
