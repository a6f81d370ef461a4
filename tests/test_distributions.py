"""The distribution functions the tests use (:mod:`quicsm.stats.distributions`, from
``scipy.special``) give what ``scipy.stats`` gives for them, bit for bit, over their domains."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from quicsm.stats.distributions import chi2_sf, normal_ppf, normal_sf, t_ppf, t_sf

X = st.floats(min_value=-60.0, max_value=60.0, allow_nan=False)
Q = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
DF = st.one_of(st.integers(1, 400).map(float), st.floats(min_value=0.05, max_value=1e4))


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@settings(max_examples=300, deadline=None)
@given(x=X, q=Q, df=DF)
def test_each_is_scipy_stats_own(x: float, q: float, df: float) -> None:
    assert _same(normal_ppf(q), float(stats.norm.ppf(q)))
    assert _same(normal_sf(x), float(stats.norm.sf(x)))
    assert _same(t_sf(x, df), float(stats.t.sf(x, df)))
    assert _same(t_ppf(q, df), float(stats.t.ppf(q, df)))
    assert _same(chi2_sf(abs(x) * 10, df), float(stats.chi2.sf(abs(x) * 10, df)))
