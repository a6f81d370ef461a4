"""Intervals and design effects for proportions counted over clustered data (transitions inside
traces): the one implementation of the Wilson score interval and of the cluster-robust variance
that :mod:`quicsm.stats.descriptive` (transition-probability intervals) and
:mod:`quicsm.stats.significance` (the Rao-Scott correction of the G-test) share.

Notation, per category (a transition target) and group: ``y_i`` the count of the category in
trace *i*, ``n_i`` the trace's total (its exits from the source), ``m`` the traces with
``n_i > 0``, ``N = Σ n_i`` and ``p = Σ y_i / N``.

- cluster-robust (ratio-estimator) variance of ``p``: ``m/(m−1) · Σ (y_i − p n_i)² / N²``;
- multinomial variance: ``p (1 − p) / N``;
- design effect: their ratio, floored at 1.

At ``p ∈ {0, 1}`` both variances are 0 and the design effect cannot be estimated from the
data. The interval then takes the worst case the clustering allows — every trace counts as one
observation, ``n_eff = m`` — rather than the plain Wilson interval over all ``N`` transitions,
which would claim certainty the traces cannot give (4 traces of 10 transitions each, all of
them to one target: [0.51, 1], not [0.72, 1]).
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import polars as pl

#: two-sided 95 % normal quantile.
Z95: Final[float] = 1.959963984540054


def _z(level: float) -> float:
    from quicsm.stats.distributions import norm_ppf

    return Z95 if level == 0.95 else norm_ppf(0.5 + level / 2)


def wilson(successes: float, n: float, *, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of ``successes / n`` (``n`` may be an effective, fractional size;
    ``(nan, nan)`` when ``n <= 0``)."""
    if n <= 0:
        return (math.nan, math.nan)
    z = _z(level)
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(0.0, p * (1 - p) / n + z * z / (4 * n * n))) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def wilson_expr(p: pl.Expr, n: pl.Expr, *, z: float = Z95) -> tuple[pl.Expr, pl.Expr]:
    """:func:`wilson` as polars expressions: proportion ``p`` over ``n`` (effective) trials."""
    z2 = z * z
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = (z / denom) * ((p * (1 - p) / n + z2 / (4 * n * n)).clip(lower_bound=0)).sqrt()
    return (center - half).clip(lower_bound=0.0), (center + half).clip(upper_bound=1.0)


def effective_n_expr(
    p: pl.Expr, n: pl.Expr, m: pl.Expr, syy: pl.Expr, syn: pl.Expr, snn: pl.Expr
) -> pl.Expr:
    """Effective sample size ``N / deff`` of a clustered proportion, from the sums
    ``Σ y_i²`` (``syy``), ``Σ y_i n_i`` (``syn``), ``Σ n_i²`` (``snn``): the module's rule,
    including ``n_eff = m`` at the boundaries (and ``N`` for a single trace)."""
    resid = (syy - 2 * p * syn + p * p * snn).clip(lower_bound=0)
    var_cluster = m / (m - 1) * resid / (n**2)
    var_binom = p * (1 - p) / n
    deff = (
        pl.when((m > 1) & (var_binom > 0))
        .then(var_cluster / var_binom)
        .otherwise(1.0)
        .clip(lower_bound=1.0)
    )
    boundary = (m > 1) & ((p <= 0) | (p >= 1))
    return pl.when(boundary).then(pl.min_horizontal(m, n)).otherwise(n / deff)


def cluster_variances(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For one group's (traces x categories) count matrix: the pooled proportions, their
    cluster-robust variances and their multinomial variances (zeros with fewer than two traces
    or no counts)."""
    g = np.asarray(counts, dtype=float)
    k = g.shape[1]
    n_i = g.sum(axis=1)
    g, n_i = g[n_i > 0], n_i[n_i > 0]
    m, n = g.shape[0], float(n_i.sum())
    if n <= 0:
        return np.zeros(k), np.zeros(k), np.zeros(k)
    p = g.sum(axis=0) / n
    if m < 2:
        return p, np.zeros(k), np.zeros(k)
    resid = g - np.outer(n_i, p)
    return p, m / (m - 1) * (resid**2).sum(axis=0) / n**2, p * (1 - p) / n


def mean_design_effect(*groups: np.ndarray) -> float:
    """Rao-Scott first-order mean design effect of the category proportions of one or more
    groups of traces, floored at 1.

    Each category's design effect ``d_j`` is the ratio of the cluster-robust to the multinomial
    variance of the groups' proportions (summed over groups: the variance of their difference).
    The mean is Rao & Scott's (JASA 1981) ``δ̄ = Σ_j (1 − p_j) d_j / (k − 1)`` with ``p_j`` the
    pooled proportions — weighted, so that a rare category's noisy design effect counts less.
    """
    k = np.shape(groups[0])[1]
    cluster, binomial = np.zeros(k), np.zeros(k)
    for counts in groups:
        _, c, b = cluster_variances(counts)
        cluster += c
        binomial += b
    total = sum(np.asarray(g, dtype=float).sum(axis=0) for g in groups)
    grand = float(np.sum(total))
    ok = binomial > 0
    if not ok.any() or grand <= 0:
        return 1.0
    pooled = total / grand
    weights = (1.0 - pooled)[ok]
    if weights.sum() <= 0:
        return 1.0
    d = cluster[ok] / binomial[ok]
    return max(1.0, float(np.sum(weights * d) / np.sum(weights)))


def cluster_wilson(
    counts: np.ndarray, category: int, *, level: float = 0.95
) -> tuple[float, float]:
    """Cluster-aware Wilson interval of one category's pooled proportion in a (traces x
    categories) count matrix, with the module's effective sample size."""
    g = np.asarray(counts, dtype=float)
    g = g[g.sum(axis=1) > 0]
    n = float(g.sum())
    m = g.shape[0]
    if n <= 0:
        return (math.nan, math.nan)
    p, var_c, var_b = cluster_variances(g)
    pj = float(p[category])
    if m > 1 and (pj <= 0 or pj >= 1):
        n_eff = float(min(m, n))
    elif m > 1 and var_b[category] > 0:
        n_eff = n / max(1.0, float(var_c[category] / var_b[category]))
    else:
        n_eff = n
    return wilson(pj * n_eff, n_eff, level=level)
