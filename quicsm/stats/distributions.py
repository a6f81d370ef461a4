"""The distribution functions and small exact tests the statistics use, written here so that a
report or a diff does not import ``scipy.stats`` (about 0.6 s of CPU per process).

Each gives what ``scipy.stats`` gives, up to floating-point noise (tests/test_distributions.py
compares them over wide argument ranges):

- the normal distribution's survival function and quantiles (``norm.sf``, ``norm.ppf``): the
  complementary error function of :mod:`math` and the inverse of :class:`statistics.NormalDist`;
- Student's t (``t.sf``, ``t.ppf``) through the regularized incomplete beta function (a
  continued fraction); the two tails of the noncentral t (``nct.sf``, ``nct.cdf``) as one
  integral over the scale of its denominator (Gauss-Legendre); and the chi-squared survival
  function (``chi2.sf``) through the
  regularized incomplete gamma function (a series or a continued fraction);
- mid-ranks (``rankdata``), Fisher's exact test of a 2x2 table (``fisher_exact``, two-sided:
  hypergeometric probabilities from exact binomial coefficients) and the two-sided
  Mann-Whitney U test (``mannwhitneyu``: the exact null distribution of U counted, or the normal
  approximation with the tie and continuity corrections).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from statistics import NormalDist
from typing import Final

import numpy as np

__all__ = [
    "chi2_sf",
    "fisher_exact",
    "mann_whitney_u",
    "nct_tails",
    "norm_ppf",
    "norm_sf",
    "rankdata",
    "t_ppf",
    "t_sf",
]

_STANDARD: Final = NormalDist()
#: the continued fractions and series stop when a step changes the value by less than this
_EPS: Final = 1e-16
_TINY: Final = 1e-300
_MAX_STEPS: Final = 100_000


def norm_sf(x: float) -> float:
    """P(Z > x) for a standard normal Z."""
    return 0.5 * math.erfc(x / math.sqrt(2.0))


def norm_ppf(q: float) -> float:
    """The standard normal quantile of ``q`` (-inf at 0, inf at 1, NaN outside [0, 1])."""
    if not 0.0 < q < 1.0:
        if q == 0.0:
            return -math.inf
        if q == 1.0:
            return math.inf
        return math.nan
    return _STANDARD.inv_cdf(q)


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz),
    converging for ``x < (a + 1) / (a + b + 2)``."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_STEPS):
        m2 = 2 * m
        for numerator in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            step = d * c
            h *= step
        if abs(step - 1.0) < _EPS:
            break
    return h


def _log_gamma_ratio_half(a: float) -> float:
    """log(Gamma(a + 1/2) / Gamma(a)), without the cancellation of two large log-gammas for
    large ``a`` (Stirling's series of both, their leading terms subtracted exactly)."""
    if a < 8.0:
        return math.lgamma(a + 0.5) - math.lgamma(a)

    def correction(z: float) -> float:  # lgamma(z) - ((z - 1/2) log z - z + log(2 pi) / 2)
        z2 = z * z
        return (1.0 / 12.0 - (1.0 / 360.0 - (1.0 / 1260.0 - 1.0 / (1680.0 * z2)) / z2) / z2) / z

    return a * math.log1p(0.5 / a) + 0.5 * math.log(a) - 0.5 + correction(a + 0.5) - correction(a)


def _log_beta(a: float, b: float) -> float:
    """log B(a, b) (with b = 1/2 for large ``a`` through :func:`_log_gamma_ratio_half`)."""
    if b == 0.5:
        return math.lgamma(0.5) - _log_gamma_ratio_half(a)
    if a == 0.5:
        return math.lgamma(0.5) - _log_gamma_ratio_half(b)
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _betainc(a: float, b: float, x: float, y: float, log_x: float, log_y: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, given ``x``, ``y`` = 1 - x and
    their logarithms (each formed by the caller without cancellation)."""
    if log_x == -math.inf:
        return 0.0
    if log_y == -math.inf:
        return 1.0
    log_beta = _log_beta(a, b)
    if x < (a + 1.0) / (a + b + 2.0):
        front = math.exp(a * log_x + b * log_y - log_beta) / a
        return front * _beta_fraction(a, b, x)
    front = math.exp(a * log_x + b * log_y - log_beta) / b
    return 1.0 - front * _beta_fraction(b, a, y)


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (``df`` > 0, may be
    fractional: Welch-Satterthwaite)."""
    if math.isnan(t) or math.isnan(df) or df <= 0.0:
        return math.nan
    if math.isinf(df):
        return norm_sf(t)
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    if abs(t) < 1e-150:  # t^2 underflows: the density at 0 is all that matters
        return 0.5 - t * _t_pdf(0.0, df)
    # P(|T| > |t|) = I_x(df / 2, 1 / 2) with x = df / (df + t^2), x, 1 - x and their logarithms
    # formed without cancellation (or overflow of t^2)
    log_x = -_log1p_square(t, df)
    x = math.exp(log_x)
    t2 = t * t
    if math.isinf(t2) or t2 > df * 1e300:
        y, log_y = 1.0, -x
    else:
        y = t2 / (df + t2)
        log_y = math.log(t2) - math.log(df + t2) if t2 < df else -math.log1p(df / t2)
    tail = 0.5 * _betainc(df / 2.0, 0.5, x, y, log_x, log_y)
    return tail if t > 0 else 1.0 - tail


def _log1p_square(t: float, df: float) -> float:
    """log(1 + t^2 / df), without overflow for huge ``t``."""
    at = abs(t)
    if at > 1e150:
        return 2.0 * math.log(at) - math.log(df) + math.log1p(df / at / at)
    return math.log1p(t * t / df)


def _t_pdf(t: float, df: float) -> float:
    log = (
        _log_gamma_ratio_half(df / 2.0)
        - 0.5 * math.log(df * math.pi)
        - (df + 1.0) / 2.0 * _log1p_square(t, df)
    )
    return math.exp(log)


def t_ppf(q: float, df: float) -> float:
    """The quantile of Student's t with ``df`` degrees of freedom (:func:`_t_upper`)."""
    if math.isnan(q) or math.isnan(df) or df <= 0.0 or not 0.0 <= q <= 1.0:
        return math.nan
    if q == 0.0:
        return -math.inf
    if q == 1.0:
        return math.inf
    if math.isinf(df):
        return norm_ppf(q)
    if q == 0.5:
        return 0.0
    # the tail beyond the quantile, exactly (1 - q is exact for q >= 1/2)
    return _t_upper(1.0 - q, df) if q > 0.5 else -_t_upper(q, df)


def _t_upper(tail: float, df: float) -> float:
    """The t > 0 with P(T > t) = ``tail`` (< 1/2): bracketed by doubling from the normal
    quantile, then Newton's method on log P(T > t), bisecting whenever a step leaves the
    bracket."""
    log_target = math.log(tail)
    lo, hi = 0.0, max(-norm_ppf(tail), 1e-3)
    while t_sf(hi, df) > tail:  # heavy tails: the quantile lies far beyond the normal's
        lo, hi = hi, hi * 2.0
        if math.isinf(hi):
            return math.inf
    t = hi
    for _ in range(500):
        sf = t_sf(t, df)
        if sf > tail:
            lo = t
        else:
            hi = t
        pdf = _t_pdf(t, df)
        new = t + (math.log(sf) - log_target) * sf / pdf if sf > 0.0 and pdf > 0.0 else math.nan
        if not lo < new < hi:  # outside the bracket (or no step): bisect
            new = math.sqrt(lo * hi) if lo > 0.0 and hi / lo > 4.0 else (lo + hi) / 2.0
        if abs(new - t) <= 4e-16 * abs(new) or not lo < new < hi:
            return new
        t = new
    return t


#: Gauss-Legendre nodes on [-1, 1] and their weights, for each panel (at most one unit of
#: log S wide) of the noncentral t's integral
_LEGENDRE: Final = np.polynomial.legendre.leggauss(24)
_NORM_SF_ARRAY: Final = np.frompyfunc(norm_sf, 1, 1)


def nct_tails(crit: float, df: float, shift: float) -> tuple[float, float]:
    """P(T > ``crit``) and P(T < −``crit``) for the noncentral t with ``df`` degrees of freedom
    and noncentrality ``shift``: T = (Z + shift) / S with S² a chi-squared over ``df``, so each
    tail is the normal's averaged over S, e.g. P(T > c) = E[Φ(shift − c·S)]. The average is
    taken over y = log S, whose density ∝ exp(df·(y − e^{2y}/2)) is smooth for any ``df`` > 0,
    in panels narrower than its spread; outside the panels' span it is below e^{−40} of its
    peak (:func:`_log_scale_span`)."""
    if math.isnan(crit) or math.isnan(df) or math.isnan(shift) or df <= 0.0:
        return math.nan, math.nan
    if math.isinf(df):
        return norm_sf(crit - shift), norm_sf(crit + shift)
    lo, hi = _log_scale_span(df)
    # panels narrower than the density's spread (about 1 / sqrt(2 df)) when df is large
    panels = math.ceil((hi - lo) / min(1.0, 2.0 / math.sqrt(df)))
    x, w = _LEGENDRE
    edges = np.linspace(lo, hi, panels + 1)
    half = (edges[1] - edges[0]) / 2.0
    y = (edges[:-1, None] + half + half * x[None, :]).ravel()
    w = np.tile(w, panels)
    log_density = df * (y - np.exp(2.0 * y) / 2.0)
    density = w * np.exp(log_density - log_density.max())
    density /= density.sum()
    s = np.exp(y)
    upper = _NORM_SF_ARRAY(crit * s - shift).astype(float)
    lower = _NORM_SF_ARRAY(crit * s + shift).astype(float)
    return float(density @ upper), float(density @ lower)


@functools.lru_cache(maxsize=256)  # one per degrees of freedom: a power search asks again
def _log_scale_span(df: float) -> tuple[float, float]:
    """Where df·(y − e^{2y}/2 + 1/2), the log density of y = log S against its peak at 0, is
    above −40: bisection on the left of 0 from −40/df − 1/2 (where it is below), and √(40/df)
    on the right (below: e^{2y} ≥ 1 + 2y + 2y²)."""
    drop = -40.0 / df
    lo, hi = drop - 0.5, 0.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        if mid - math.expm1(2.0 * mid) / 2.0 < drop:
            lo = mid
        else:
            hi = mid
    return lo, math.sqrt(-drop)


def _gamma_series(a: float, x: float) -> float:
    """P(a, x), the regularized lower incomplete gamma function, by its series (x < a + 1)."""
    term = total = 1.0 / a
    ap = a
    for _ in range(_MAX_STEPS):
        ap += 1.0
        term *= x / ap
        total += term
        if abs(term) < abs(total) * _EPS:
            break
    return total * math.exp(-x + a * math.log(x) - math.lgamma(a))


def _gamma_fraction(a: float, x: float) -> float:
    """Q(a, x), the regularized upper incomplete gamma function, by its continued fraction
    (x >= a + 1; modified Lentz)."""
    b = x + 1.0 - a
    c = 1.0 / _TINY
    d = 1.0 / b
    h = d
    for i in range(1, _MAX_STEPS):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = b + an / c
        c = c if abs(c) > _TINY else _TINY
        step = d * c
        h *= step
        if abs(step - 1.0) < _EPS:
            break
    return math.exp(-x + a * math.log(x) - math.lgamma(a)) * h


def chi2_sf(x: float, df: float) -> float:
    """P(X > x) for a chi-squared X with ``df`` degrees of freedom."""
    if math.isnan(x) or math.isnan(df) or df <= 0.0:
        return math.nan
    if x <= 0.0:
        return 1.0
    if math.isinf(x):
        return 0.0
    a, h = df / 2.0, x / 2.0
    if h < a + 1.0:
        return 1.0 - _gamma_series(a, h)
    return _gamma_fraction(a, h)


def rankdata(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Mid-ranks (1-based; ties share the mean of their ranks), as float."""
    x = np.asarray(values, dtype=float).ravel()
    n = len(x)
    if n == 0:
        return np.zeros(0)
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    # the start of each run of equal values, and each value's run
    starts = np.flatnonzero(np.concatenate([[True], sorted_x[1:] != sorted_x[:-1]]))
    ends = np.append(starts[1:], n)
    mean_rank = (starts + ends + 1) / 2.0  # the mean of ranks starts+1 .. ends
    run = np.repeat(np.arange(len(starts)), ends - starts)
    out = np.empty(n)
    out[order] = mean_rank[run]
    return out


def _tie_counts(values: np.ndarray) -> np.ndarray:
    _, counts = np.unique(values, return_counts=True)
    return counts


def fisher_exact(table: Sequence[Sequence[int]]) -> tuple[float, float]:
    """Fisher's exact test of a 2x2 table of counts, two-sided: ``(odds ratio, p)``, as
    ``scipy.stats.fisher_exact`` defines both (the sample odds ratio, NaN with p = 1 when a
    row or column is empty; p sums the tables no likelier than the one seen, with a relative
    tolerance of 1e-14 for ties)."""
    (a, b), (c, d) = ((int(v) for v in row) for row in table)
    if min(a, b, c, d) < 0:
        raise ValueError("a 2x2 table of non-negative counts is required")
    if 0 in (a + b, c + d, a + c, b + d):
        return math.nan, 1.0
    odds = a * d / (c * b) if c > 0 and b > 0 else math.inf
    n1, n2, n = a + b, c + d, a + c
    lo, hi = max(0, n - n2), min(n, n1)
    total = math.comb(n1 + n2, n)
    weights = {x: math.comb(n1, x) * math.comb(n2, n - x) for x in range(lo, hi + 1)}

    def pmf(x: int) -> float:
        return weights[x] / total if lo <= x <= hi else 0.0

    def tail(xs: range) -> float:  # the sum of pmf over xs, rounded once
        return sum(weights[x] for x in xs if lo <= x <= hi) / total

    mode = int((n + 1) * (n1 + 1) / (n1 + n2 + 2))
    exact, at_mode = pmf(a), pmf(mode)
    epsilon = 1e-14
    gamma = 1.0 + epsilon
    if abs(exact - at_mode) / max(exact, at_mode) <= epsilon:
        return odds, 1.0
    if a < mode:
        lower = tail(range(lo, a + 1))
        if pmf(n) > exact * gamma:
            return odds, lower
        # the last x >= mode with pmf(x) >= exact * gamma: the tables after it are counted
        guess = _last(lambda x: -pmf(x), -exact * gamma, mode, n)
        p = lower + tail(range(guess + 1, hi + 1))
    else:
        upper = tail(range(a, hi + 1))
        if pmf(0) > exact * gamma:
            return odds, upper
        guess = _last(pmf, exact * gamma, 0, mode)
        p = upper + tail(range(lo, guess + 1))
    return odds, min(p, 1.0)


def _last(f: Callable[[int], float], value: float, lo: int, hi: int) -> int:
    """A binary search over an ``f`` increasing on [lo, hi]: the ``i`` with
    ``f(i) <= value < f(i + 1)``, as ``scipy.stats.fisher_exact`` searches (the same steps, so
    the same table at the boundary)."""
    while lo < hi:
        mid = lo + (hi - lo) // 2
        got = f(mid)
        if got < value:
            lo = mid + 1
        elif got > value:
            hi = mid - 1
        else:
            return mid
    return lo if f(lo) <= value else lo - 1


def mann_whitney_u(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, exact: bool
) -> tuple[float, float]:
    """The two-sided Mann-Whitney U test of ``a`` against ``b``: ``(U of a, p)``, as
    ``scipy.stats.mannwhitneyu(a, b, alternative="two-sided", method=...)`` gives them
    (``exact``: the exact null distribution of U, meant for samples without ties; else the
    normal approximation with the tie and continuity corrections)."""
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    n1, n2 = len(xa), len(xb)
    both = np.concatenate([xa, xb])
    ranks = rankdata(both)
    u1 = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2
    u2 = n1 * n2 - u1
    u = max(u1, u2)
    if exact:
        small, large = min(n1, n2), max(n1, n2)
        k = int(small * large - u)  # P(U >= u) = P(U <= n1 n2 - u), by symmetry
        counts = _gaussian_binomial(small, large, k)
        p = 2.0 * (sum(counts[: k + 1]) / math.comb(small + large, small))
    else:
        n = n1 + n2
        ties = _tie_counts(both).astype(float)
        tie_term = float((ties**3 - ties).sum())
        s = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
        z = (u - n1 * n2 / 2 - 0.5) / s if s > 0 else math.copysign(math.inf, u - n1 * n2 / 2)
        p = 2.0 * norm_sf(z)
    return u1, min(max(p, 0.0), 1.0)


def _gaussian_binomial(m: int, n: int, top: int) -> list[int]:
    """The number of arrangements of two samples of ``m`` and ``n`` distinct values with
    U = 0, 1, ..., ``top`` (the first ``top + 1`` coefficients of the Gaussian binomial
    coefficient [m + n choose m]_q, exact integers): the product over i = 1..m of
    (1 - q^(n + i)) / (1 - q^i), multiplied in one factor at a time."""
    poly = [1] + [0] * top
    for i in range(1, m + 1):
        # times (1 - q^(n + i)): subtract the shifted copy (from the top down)
        shift = n + i
        for u in range(top, shift - 1, -1):
            poly[u] -= poly[u - shift]
        # divided by (1 - q^i): a running sum with stride i (from the bottom up)
        for u in range(i, top + 1):
            poly[u] += poly[u - i]
    return poly
