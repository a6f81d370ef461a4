"""Tests that use every transition inside the traces while staying honest about how much traces
differ from one another.

A trace is a cluster: its exits from a state are not independent coin flips but draws with a
trace-specific probability. The beta-binomial model says so with one number, the intra-trace
correlation ``ρ``: a trace with ``m`` exits from the source, ``y`` of them to the target, has

    Var(y) = m p (1 − p) (1 + (m − 1) ρ)

(``ρ = 0``: homogeneous traces, every transition counts; ``ρ = 1``: each trace counts once).
One trace per group cannot estimate ``ρ``, and five barely can; but every transition
probability of a comparison, in both groups, carries information about it. So ``ρ`` is
estimated once, **pooled over every transition row of both groups** (method of moments on the
Pearson statistics, each row around its own group's probability, so that a difference between
the groups does not count as dispersion), and each transition's own moments are shrunk towards
the pooled value (an empirical-Bayes compromise: a transition whose traces differ much more
than the others' gets its own, wider, variance once its data say so).

The test of one transition probability, B against A, is then the two-sample z-test on the
pooled (ratio) estimates with the beta-binomial variance under the null of a common ``p``.
Homogeneous traces give the power of the transitions inside them; heterogeneous ones give the
width their heterogeneity implies. When the effective number of transitions (``N / design
effect``) leaves fewer than :data:`MIN_EFFECTIVE` expected events in a group, the normal
approximation is not trusted and the caller falls back to a permutation test over traces.

The same pooled idea serves per-visit quantities (dwell times): :func:`random_effects_shift`
compares the groups' means of per-trace means with the within-trace variance from each trace's
own visits and a between-trace variance ``τ²`` estimated by pooling (DerSimonian–Laird moments
over every state of both groups).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from quicsm.stats import distributions as dist

#: fewest expected events (and non-events) per group, in effective transitions, for the z-test
MIN_EFFECTIVE = 5.0
#: the largest intra-trace correlation used (1 would make every trace a single draw)
MAX_RHO = 0.99
#: up to this many traces in the smaller group, the z of a transition is referred to its
#: permutation distribution over traces (exact under the null whatever the traces'
#: heterogeneity) rather than to Student's t: with few traces the estimated ``ρ`` is too
#: noisy for any large-sample reference (docs/diff.md, "Measured false-positive rate")
FEW_TRACES = 50
#: beyond this many degrees of freedom Student's t is taken for the normal (the noncentral t's
#: power and a printed MDE no longer tell them apart)
NORMAL_DF = 1000.0


@dataclass(frozen=True)
class Moments:
    """Method-of-moments pieces of ``ρ`` from one row (one transition, one group): the
    Pearson excess ``X² − (k − 1)`` and its expected value per unit of ``ρ``."""

    excess: float = 0.0
    weight: float = 0.0

    def __add__(self, other: Moments) -> Moments:
        return Moments(self.excess + other.excess, self.weight + other.weight)


def row_moments(y: np.ndarray, m: np.ndarray) -> Moments:
    """The moments of one row: per-trace successes ``y`` out of ``m`` trials (traces with
    ``m = 0`` do not take part).

    With ``p̂ = Σy / M`` and ``X² = Σ (y_i − m_i p̂)² / (m_i p̂ (1 − p̂))``, the beta-binomial
    gives ``E[X²] ≈ (k − 1) + ρ C`` with ``C = Σ (m_i − 1) − Σ m_i (m_i − 1) / M``.
    """
    y = np.asarray(y, dtype=float)
    m = np.asarray(m, dtype=float)
    keep = m > 0
    y, m = y[keep], m[keep]
    k = y.size
    total = float(m.sum())
    if k < 2 or total <= 0:
        return Moments()
    p = float(y.sum()) / total
    if p <= 0.0 or p >= 1.0:
        return Moments()
    x2 = float(np.sum((y - m * p) ** 2 / m)) / (p * (1.0 - p))
    c = float(np.sum(m - 1.0) - np.sum(m * (m - 1.0)) / total)
    if c <= 0:
        return Moments()
    return Moments(x2 - (k - 1), c)


def pooled_rho(moments: Sequence[Moments]) -> float:
    """``ρ`` pooled over rows: ``Σ excess / Σ weight``, in ``[0, MAX_RHO]``."""
    total = sum(moments, Moments())
    if total.weight <= 0:
        return 0.0
    return min(MAX_RHO, max(0.0, total.excess / total.weight))


def shrunk_rho(own: Moments, pooled: float, prior_weight: float) -> float:
    """One row's ``ρ``: its own moments with the pooled value counted as ``prior_weight``
    units of weight (the average row's), in ``[0, MAX_RHO]``."""
    w = own.weight + prior_weight
    if w <= 0:
        return pooled
    return min(MAX_RHO, max(0.0, (own.excess + prior_weight * pooled) / w))


@dataclass(frozen=True)
class ProportionShift:
    """``p_b − p_a`` of a clustered proportion, its interval and its z-test (``p_value`` is
    ``None`` when the normal approximation is not trusted: see ``effective``)."""

    difference: float
    ci_low: float
    ci_high: float
    z: float
    p_value: float | None
    #: effective numbers of transitions (``N / design effect``) per group
    effective: tuple[float, float]
    rho: float
    #: the standard error of the difference under the null (for the detectable effect)
    se_null: float


def _inflation(m: np.ndarray, rho: float) -> float:
    """``Σ m_i (1 + (m_i − 1) ρ)``: the variance of a total in units of ``p (1 − p)``."""
    return float(np.sum(m * (1.0 + (m - 1.0) * rho)))


def proportion_shift(
    ya: np.ndarray,
    ma: np.ndarray,
    yb: np.ndarray,
    mb: np.ndarray,
    rho: float,
    *,
    level: float = 0.95,
) -> ProportionShift:
    """Compare ``Σ y_b / Σ m_b`` with ``Σ y_a / Σ m_a`` under the beta-binomial with
    intra-trace correlation ``rho`` (traces with ``m = 0`` do not take part)."""
    ya, ma = np.asarray(ya, dtype=float), np.asarray(ma, dtype=float)
    yb, mb = np.asarray(yb, dtype=float), np.asarray(mb, dtype=float)
    ya, ma = ya[ma > 0], ma[ma > 0]
    yb, mb = yb[mb > 0], mb[mb > 0]
    big_a, big_b = float(ma.sum()), float(mb.sum())
    nan = math.nan
    if big_a <= 0 or big_b <= 0:
        return ProportionShift(nan, nan, nan, nan, None, (0.0, 0.0), rho, nan)
    pa, pb = float(ya.sum()) / big_a, float(yb.sum()) / big_b
    p0 = (float(ya.sum()) + float(yb.sum())) / (big_a + big_b)
    ia, ib = _inflation(ma, rho), _inflation(mb, rho)
    eff = (big_a**2 / ia, big_b**2 / ib)
    diff = pb - pa
    z_level = dist.norm_ppf(0.5 + level / 2)
    se_alt = math.sqrt(pa * (1 - pa) * ia / big_a**2 + pb * (1 - pb) * ib / big_b**2)
    se0 = math.sqrt(p0 * (1 - p0) * (ia / big_a**2 + ib / big_b**2))
    # the interval: unpooled variances, and never narrower than the null's at the boundary
    half = z_level * max(se_alt, se0 if pa in (0.0, 1.0) or pb in (0.0, 1.0) else 0.0)
    low, high = max(-1.0, diff - half), min(1.0, diff + half)
    if se0 <= 0:  # p0 in {0, 1}: both groups all one way (no test could say otherwise)
        return ProportionShift(diff, low, high, 0.0, 1.0, eff, rho, math.nan)
    z = diff / se0
    trusted = min(min(e * p0, e * (1 - p0)) for e in eff) >= MIN_EFFECTIVE
    df = between_df(ma, mb, rho)
    p = 2.0 * dist.t_sf(abs(z), df) if trusted else None
    return ProportionShift(diff, low, high, z, p, eff, rho, se0)


def trace_units(y: np.ndarray, m: np.ndarray, rho: float) -> np.ndarray:
    """One row per trace for :func:`abs_z_statistics`: its transitions ``y``, its exits ``m``
    and its variance weight ``m (1 + (m − 1) ρ)``."""
    y, m = np.asarray(y, dtype=float), np.asarray(m, dtype=float)
    return np.column_stack([y, m, m * (1.0 + (m - 1.0) * rho)])


def abs_z_statistics(sums: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """``|z|`` of :func:`proportion_shift` for many splits of the traces at once: ``sums`` are
    the :func:`trace_units` columns summed over the traces drawn into one group, ``totals``
    over all of them (the pooled probability, hence the null's variance, is the same for
    every split). 0 where a split leaves a group without exits."""
    sums = np.atleast_2d(np.asarray(sums, dtype=float))
    y1, m1, i1 = sums[:, 0], sums[:, 1], sums[:, 2]
    y2, m2, i2 = totals[0] - y1, totals[1] - m1, totals[2] - i1
    p0 = totals[0] / totals[1] if totals[1] > 0 else 0.0
    ok = (m1 > 0) & (m2 > 0)
    m1s, m2s = np.where(ok, m1, 1.0), np.where(ok, m2, 1.0)
    var = p0 * (1.0 - p0) * (i1 / m1s**2 + i2 / m2s**2)
    ok &= var > 0
    z = np.abs(y2 / m2s - y1 / m1s) / np.sqrt(np.where(ok, var, 1.0))
    return np.where(ok, z, 0.0)


def between_df(ma: np.ndarray, mb: np.ndarray, rho: float) -> float:
    """Degrees of freedom of the beta-binomial z statistic (Satterthwaite): its variance is a
    binomial part, known given the probability, plus a between-trace part ``ρ Σ m (m − 1)``
    whose size rests on the traces (``n_a + n_b − 2`` degrees of freedom). With ``f`` the
    between-trace share of the variance, ``df = (n_a + n_b − 2) / f²``: homogeneous traces
    (``ρ = 0``) keep the normal reference, heterogeneous ones few traces' width."""
    ma, mb = np.asarray(ma, dtype=float), np.asarray(mb, dtype=float)
    ma, mb = ma[ma > 0], mb[mb > 0]
    if rho <= 0 or ma.size + mb.size <= 2:
        return math.inf
    total = between = 0.0
    for m in (ma, mb):
        big = float(m.sum())
        total += _inflation(m, rho) / big**2
        between += rho * float(np.sum(m * (m - 1.0))) / big**2
    share = between / total if total > 0 else 0.0
    if share**2 <= 0:  # none, or so little that its square underflows
        return math.inf
    return (ma.size + mb.size - 2) / share**2


def effective_counts(
    ya: np.ndarray, ma: np.ndarray, yb: np.ndarray, mb: np.ndarray, rho: float
) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """Each group's (events, trials) divided by its design effect and rounded: the
    independent transitions the clustered ones are worth (for an exact test on sparse rows);
    ``None`` when a group is worth less than one transition."""
    out = []
    for y, m in ((ya, ma), (yb, mb)):
        y, m = np.asarray(y, dtype=float), np.asarray(m, dtype=float)
        y, m = y[m > 0], m[m > 0]
        total = float(m.sum())
        if total <= 0:
            return None
        deff = _inflation(m, rho) / total
        n = round(total / deff)
        k = min(n, round(float(y.sum()) / deff))
        if n < 1:
            return None
        out.append((int(k), int(n)))
    return out[0], out[1]


def detectable(se: float, *, alpha: float, power: float = 0.8, df: float = math.inf) -> float:
    """The smallest true difference a two-sided test at level ``alpha`` detects with
    probability ``power``, given the standard error ``se`` of the difference and the degrees
    of freedom ``df`` of the reference its statistic is referred to (``inf``: the normal,
    ``(z_{1−α/2} + z_{power}) · se``; else the noncentral t of :func:`power_at`, solved for
    the difference)."""
    if se != se or se <= 0:
        return math.nan
    if not 0 < df <= NORMAL_DF:
        return float((dist.norm_ppf(1 - alpha / 2) + dist.norm_ppf(power)) * se)
    crit = dist.t_ppf(1 - alpha / 2, df)
    low, high = 0.0, crit + dist.norm_ppf(power) + 1.0
    while _t_power(abs(high * se) / se, crit, df) < power:
        low, high = high, high * 2.0
    # bisection in units of se, to 1e-4 of one (a printed MDE has three digits); the power
    # grows with the difference
    while high - low > 1e-4:
        mid = (low + high) / 2.0
        if _t_power(abs(mid * se) / se, crit, df) < power:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0 * se


def power_at(effect: float, se: float, *, alpha: float, df: float = math.inf) -> float:
    """The probability that a two-sided test at level ``alpha`` rejects when the true
    difference is ``effect`` and its estimate has standard error ``se``: the statistic is
    ``effect / se`` away from 0, referred to Student's t with ``df`` degrees of freedom (the
    reference's own: a permutation test over ``N`` traces learns its variance from them, like
    a two-sample t-test, ``N − 2``) or, with ``df = inf``, to the normal."""
    if se != se or se <= 0 or effect != effect:
        return math.nan
    shift = abs(effect) / se
    if not 0 < df <= NORMAL_DF:
        crit = dist.norm_ppf(1 - alpha / 2)
        return dist.norm_sf(crit - shift) + dist.norm_sf(crit + shift)
    return _t_power(shift, dist.t_ppf(1 - alpha / 2, df), df)


def _t_power(shift: float, crit: float, df: float) -> float:
    """:func:`power_at` referred to Student's t, given its critical value ``crit`` (a search
    over the difference computes that quantile once, not at every step)."""
    upper, lower = dist.nct_tails(crit, df, shift)
    return upper + lower


def model_rho(own: Moments, pooled: Moments, prior_weight: float) -> float:
    """The intra-trace correlation of one row *for its detectable effect*: its own moments
    shrunk towards the pooled ones (as :func:`shrunk_rho`), but neither floored at the pooled
    value nor truncated at 0 — a truncated moment estimate is biased upwards (homogeneous
    traces would look heterogeneous and their power be underrated). Bounded below by the
    smallest value that keeps a trace's variance positive for traces of up to 100 exits."""
    total = pooled.excess / pooled.weight if pooled.weight > 0 else 0.0
    w = own.weight + prior_weight
    rho = (own.excess + prior_weight * total) / w if w > 0 else total
    return min(MAX_RHO, max(-1.0 / 99.0, rho))


def difference_se(
    ya: np.ndarray, ma: np.ndarray, yb: np.ndarray, mb: np.ndarray, rho: float
) -> float:
    """The standard error of ``p_b − p_a`` under the beta-binomial at each group's own
    probability (traces with ``m = 0`` do not take part): the spread of the estimated
    difference the fitted model expects, for the power of a test of it."""
    out = 0.0
    for y, m in ((ya, ma), (yb, mb)):
        y, m = np.asarray(y, dtype=float), np.asarray(m, dtype=float)
        y, m = y[m > 0], m[m > 0]
        big = float(m.sum())
        if big <= 0:
            return math.nan
        p = float(y.sum()) / big
        out += p * (1.0 - p) * max(0.0, _inflation(m, rho)) / big**2
    return math.sqrt(out) if out > 0 else math.nan


@dataclass(frozen=True)
class MeanShift:
    """Difference of the groups' random-effects means, its interval and z-test."""

    difference: float
    ci_low: float
    ci_high: float
    z: float
    p_value: float | None
    se: float


def between_moments(x: np.ndarray, v: np.ndarray) -> Moments:
    """DerSimonian–Laird moments of one set of per-trace means ``x`` with within-trace
    variances ``v``: ``Q − (k − 1)`` and ``C = Σw − Σw² / Σw`` (``τ² = excess / weight``),
    so that sets (states, groups) can be pooled like the rows of :func:`row_moments`."""
    x, v = np.asarray(x, dtype=float), np.asarray(v, dtype=float)
    ok = np.isfinite(x) & np.isfinite(v) & (v > 0)
    x, v = x[ok], v[ok]
    if x.size < 2:
        return Moments()
    w = 1.0 / v
    mu = float(np.sum(w * x) / w.sum())
    q = float(np.sum(w * (x - mu) ** 2))
    c = float(w.sum() - np.sum(w * w) / w.sum())
    return Moments(q - (x.size - 1), c) if c > 0 else Moments()


def pooled_between(moments: Sequence[Moments]) -> float:
    """``τ²`` pooled over sets, ``≥ 0``."""
    total = sum(moments, Moments())
    return max(0.0, total.excess / total.weight) if total.weight > 0 else 0.0


def shrunk_between(own: Moments, pooled: float, prior_weight: float) -> float:
    """One set's ``τ²``: its own moments with the pooled value worth ``prior_weight``."""
    w = own.weight + prior_weight
    return max(0.0, (own.excess + prior_weight * pooled) / w) if w > 0 else pooled


def random_effects_shift(
    xa: np.ndarray,
    va: np.ndarray,
    xb: np.ndarray,
    vb: np.ndarray,
    tau2: float,
    *,
    df: int,
    level: float = 0.95,
) -> MeanShift:
    """B's weighted mean of per-trace means minus A's, with weights ``1 / (v_i + τ²)``
    (``v_i`` a trace's within-trace variance of its mean), referred to Student's t with
    ``df`` degrees of freedom (the traces less two: ``τ²`` is estimated, and few traces must
    not be taken for many)."""
    out = []
    for x, v in ((xa, va), (xb, vb)):
        x, v = np.asarray(x, dtype=float), np.asarray(v, dtype=float)
        w = 1.0 / (v + tau2)
        out.append((float(np.sum(w * x) / w.sum()), 1.0 / float(w.sum())))
    (ma, sa2), (mb, sb2) = out
    diff = mb - ma
    se = math.sqrt(sa2 + sb2)
    df = max(1, df)
    z_level = dist.t_ppf(0.5 + level / 2, df)
    if se <= 0:
        return MeanShift(diff, diff, diff, 0.0, 1.0 if diff == 0 else None, 0.0)
    z = diff / se
    p = 2.0 * dist.t_sf(abs(z), df)
    return MeanShift(diff, diff - z_level * se, diff + z_level * se, z, p, se)


def benjamini_hochberg(p_values: Sequence[float | None]) -> list[float | None]:
    """Benjamini–Hochberg adjusted p-values (step-up, monotone, capped at 1); ``None`` entries
    (no test) stay ``None`` and do not count towards the family size."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(tested)
    out: list[float | None] = [None] * len(p_values)
    running = 1.0
    for rank in range(m, 0, -1):
        p, i = tested[rank - 1]
        running = min(running, min(1.0, m * p / rank))
        out[i] = running
    return out
