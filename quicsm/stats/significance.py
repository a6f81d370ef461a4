"""Statistical tests behind ``quicsm diff``: small, typed wrappers that refuse to answer when the
data cannot support an answer.

Every test returns a :class:`TestResult`. When a group is too small (fewer than ``min_n``
traces), ``p_value`` is ``None`` and ``note`` says so plainly (``"n=2 < 3: no test"``) instead
of reporting a p-value that means nothing.

The unit of replication is the *trace*: transitions and visits inside one connection are not
independent, so wherever a test could treat them as such, the permutation test shuffles whole
traces between the groups.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

#: fewest traces per group for any test.
MIN_N = 3
#: a contingency table whose expected counts are all at least this uses the G-test.
MIN_EXPECTED = 5.0
#: cells of one block of permutation draws (bounds the memory of a permutation test)
_MASK_CELLS = 2_000_000


@dataclass(frozen=True)
class TestResult:
    """The outcome of one test: ``p_value`` is ``None`` when no test was run (see ``note``)."""

    test: str
    p_value: float | None
    statistic: float | None = None
    note: str = ""

    __test__ = False  # not a pytest class


def too_few(n_a: int, n_b: int, *, min_n: int = MIN_N) -> str:
    """``""`` when both groups are large enough, else the plain reason (``"n=2 < 3: no test"``)."""
    small = min(n_a, n_b)
    return f"n={small} < {min_n}: no test" if small < min_n else ""


@dataclass(frozen=True)
class MeanCI:
    mean: float
    ci_low: float
    ci_high: float
    n: int


def mean_ci(values: Sequence[float] | np.ndarray, *, level: float = 0.95) -> MeanCI:
    """Mean with a Student-t confidence interval (degenerate to the mean when ``n < 2``)."""
    x = np.asarray(values, dtype=float)
    n = int(x.size)
    if n == 0:
        return MeanCI(math.nan, math.nan, math.nan, 0)
    mean = float(x.mean())
    if n < 2:
        return MeanCI(mean, mean, mean, n)
    half = float(sps.t.ppf(0.5 + level / 2, n - 1)) * float(x.std(ddof=1)) / math.sqrt(n)
    return MeanCI(mean, mean - half, mean + half, n)


@dataclass(frozen=True)
class WelchResult:
    difference: float  # mean(b) - mean(a)
    ci_low: float  # confidence interval of the difference (Welch-Satterthwaite)
    ci_high: float
    result: TestResult


def welch(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    min_n: int = MIN_N,
    level: float = 0.95,
) -> WelchResult:
    """Welch's unequal-variance t-test of ``mean(b) - mean(a)``, with its confidence interval.

    The paper used the same test (p < 0.01) for page-load times. When both groups have zero
    variance the t statistic is undefined: equal constants give p = 1, different constants are
    reported without a p-value ("no variance: no test").
    """
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    na, nb = int(xa.size), int(xb.size)
    diff = float(xb.mean() - xa.mean()) if na and nb else math.nan
    note = too_few(na, nb, min_n=min_n)
    if note:
        return WelchResult(diff, math.nan, math.nan, TestResult("welch", None, note=note))
    va, vb = float(xa.var(ddof=1)), float(xb.var(ddof=1))
    se2 = va / na + vb / nb
    if se2 <= 0.0:
        if diff == 0.0:
            return WelchResult(0.0, 0.0, 0.0, TestResult("welch", 1.0, 0.0, "no variance"))
        return WelchResult(diff, diff, diff, TestResult("welch", None, note="no variance: no test"))
    se = math.sqrt(se2)
    df = se2**2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
    t = diff / se
    p = float(2.0 * sps.t.sf(abs(t), df))
    half = float(sps.t.ppf(0.5 + level / 2, df)) * se
    return WelchResult(diff, diff - half, diff + half, TestResult("welch", p, t))


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1).

    ``None`` entries (no test) are kept as ``None`` and do not count towards the family size.
    """
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(tested)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def g_statistic(table: np.ndarray) -> float:
    """The G (log-likelihood ratio) statistic of a 2 x k contingency table."""
    table = np.asarray(table, dtype=float)
    total = table.sum()
    if total <= 0:
        return 0.0
    expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / total
    mask = table > 0
    return float(2.0 * np.sum(table[mask] * np.log(table[mask] / expected[mask])))


def _g_statistics(a_counts: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """G of many 2 x k tables at once: rows of ``a_counts`` against ``totals - a_counts``."""
    a = np.asarray(a_counts, dtype=float)
    b = totals[None, :] - a
    n = totals.sum()
    col = totals[None, :]
    row_a = a.sum(axis=1, keepdims=True)
    row_b = n - row_a
    g = np.zeros(a.shape[0])
    for obs, row in ((a, row_a), (b, row_b)):
        exp = row * col / n
        with np.errstate(divide="ignore", invalid="ignore"):
            term = np.where(obs > 0, obs * np.log(obs / exp), 0.0)
        g += term.sum(axis=1)
    return 2.0 * g


def contingency_test(
    a_per_trace: np.ndarray,
    b_per_trace: np.ndarray,
    *,
    min_n: int = MIN_N,
    permutations: int = 4999,
    seed: int = 0,
) -> TestResult:
    """Do two groups distribute their counts over the same categories the same way?

    ``a_per_trace`` / ``b_per_trace`` are (traces x categories) count matrices; only traces with
    at least one count take part. Which test is used:

    - G-test (log-likelihood chi-square) on the pooled 2 x k table when every expected count is
      at least :data:`MIN_EXPECTED`, with the Rao-Scott first-order correction for clustering:
      G is divided by the mean design effect of the cell proportions (see
      :func:`design_effect`), because transitions of one trace are not independent draws;
    - otherwise a permutation test over traces with the G statistic: whole traces are shuffled
      between the groups (exactly, over every split, when there are at most ``permutations``
      splits), so small counts and within-trace dependence do not invalidate it;
    - fewer than ``min_n`` contributing traces in a group: no test.

    Categories observed in neither group are dropped; a single remaining category means the
    distributions are identical (p = 1).
    """
    a = np.asarray(a_per_trace, dtype=float).reshape(-1, np.shape(a_per_trace)[-1])
    b = np.asarray(b_per_trace, dtype=float).reshape(-1, np.shape(b_per_trace)[-1])
    a = a[a.sum(axis=1) > 0]
    b = b[b.sum(axis=1) > 0]
    note = too_few(a.shape[0], b.shape[0], min_n=min_n)
    if note:
        return TestResult("none", None, note=note)
    table = np.vstack([a.sum(axis=0), b.sum(axis=0)])
    keep = table.sum(axis=0) > 0
    table, a, b = table[:, keep], a[:, keep], b[:, keep]
    if table.shape[1] < 2:
        return TestResult("identical", 1.0, 0.0, "one outcome in both groups")
    total = table.sum()
    expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / total
    g = g_statistic(table)
    if float(expected.min()) >= MIN_EXPECTED:
        dof = table.shape[1] - 1
        deff = design_effect(a, b)
        p = float(sps.chi2.sf(g / deff, dof))
        return TestResult("g-test", p, g, f"design effect {deff:.2f}" if deff > 1.0 else "")
    return _permutation(np.vstack([a, b]), a.shape[0], g, permutations=permutations, seed=seed)


def design_effect(a: np.ndarray, b: np.ndarray) -> float:
    """Mean design effect of the category proportions of two groups of traces (floored at 1).

    For each category j and group, with ``y_ij`` the count of j in trace i, ``N_i`` the trace's
    total, ``N = sum N_i``, ``m`` traces and ``p_j = sum y_ij / N``: the cluster-robust
    (ratio-estimator) variance of ``p_j`` is ``m/(m-1) * sum (y_ij - p_j N_i)^2 / N^2`` and the
    multinomial one ``p_j (1 - p_j) / N``. The design effect of the difference of the two
    groups' ``p_j`` is the ratio of the sums of these variances over both groups; its mean over
    categories divides the G statistic (Rao & Scott, JASA 1981, first-order correction) — the
    same design-effect idea as the transition-probability intervals of
    :mod:`quicsm.stats.descriptive`.
    Floored at 1, so the correction never makes the test less conservative than plain G.
    """
    cluster = np.zeros(a.shape[1])
    binomial = np.zeros(a.shape[1])
    for g in (a, b):
        m = g.shape[0]
        n_i = g.sum(axis=1)
        n = n_i.sum()
        if m < 2 or n <= 0:
            continue
        p = g.sum(axis=0) / n
        resid = g - np.outer(n_i, p)
        cluster += m / (m - 1) * (resid**2).sum(axis=0) / n**2
        binomial += p * (1 - p) / n
    ok = binomial > 0
    if not ok.any():
        return 1.0
    return max(1.0, float(np.mean(cluster[ok] / binomial[ok])))


def _permutation(
    units: np.ndarray, n_a: int, observed: float, *, permutations: int, seed: int
) -> TestResult:
    """Permutation p-value of the G statistic, shuffling rows (traces) between the groups.

    The statistic is symmetric in the two groups, so the subsets drawn are always of the
    smaller group's size: swapping A and B gives the same p-value.
    """
    n = units.shape[0]
    m = min(n_a, n - n_a)
    # a canonical order of the traces that does not depend on which group came first (equal
    # rows are interchangeable), so that the splits - and the p-value - are the same for
    # (A, B) and (B, A)
    units = units[np.lexsort(units.T[::-1])]
    totals = units.sum(axis=0)
    splits = math.comb(n, m)
    eps = 1e-9 * max(1.0, abs(observed))
    if splits <= permutations:
        masks = np.zeros((splits, n))
        for row, combo in enumerate(itertools.combinations(range(n), m)):
            masks[row, list(combo)] = 1.0
        g = _g_statistics(masks @ units, totals)
        p = float(np.count_nonzero(g >= observed - eps)) / splits
        return TestResult("permutation (exact)", p, observed)
    # A random split only matters through the sum of the traces drawn, and traces with equal
    # counts are interchangeable: drawing m traces at random is a multivariate hypergeometric
    # draw over the distinct count rows. Same distribution as shuffling, at a cost that grows
    # with the number of distinct rows rather than the number of traces.
    distinct, multiplicity = np.unique(units, axis=0, return_counts=True)
    rng = np.random.default_rng(seed)
    block = max(1, min(permutations, _MASK_CELLS // max(1, distinct.shape[0])))
    extreme = 0
    done = 0
    while done < permutations:
        rows = min(block, permutations - done)
        draws = rng.multivariate_hypergeometric(multiplicity, m, size=rows)
        g = _g_statistics(draws @ distinct, totals)
        extreme += int(np.count_nonzero(g >= observed - eps))
        done += rows
    p = (1.0 + extreme) / (permutations + 1.0)
    return TestResult("permutation", p, observed)


def mann_whitney(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, min_n: int = MIN_N
) -> TestResult:
    """Two-sided Mann-Whitney U test (no test below ``min_n`` values per group)."""
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    note = too_few(int(xa.size), int(xb.size), min_n=min_n)
    if note:
        return TestResult("mann-whitney", None, note=note)
    if np.ptp(np.concatenate([xa, xb])) == 0.0:
        return TestResult("mann-whitney", 1.0, float(xa.size * xb.size) / 2, "all values equal")
    res = sps.mannwhitneyu(xa, xb, alternative="two-sided")
    return TestResult("mann-whitney", float(res.pvalue), float(res.statistic))


def fisher_traces(k_a: int, n_a: int, k_b: int, n_b: int, *, min_n: int = MIN_N) -> TestResult:
    """Fisher's exact test: do ``k_a`` of ``n_a`` traces and ``k_b`` of ``n_b`` traces differ in
    the share having some property (e.g. breaking an invariant)?"""
    note = too_few(n_a, n_b, min_n=min_n)
    if note:
        return TestResult("fisher", None, note=note)
    res = sps.fisher_exact([[k_a, n_a - k_a], [k_b, n_b - k_b]], alternative="two-sided")
    return TestResult("fisher", float(res.pvalue), float(res.statistic))


def wilson(successes: int, n: int, *, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion (``(nan, nan)`` when ``n == 0``)."""
    if n <= 0:
        return (math.nan, math.nan)
    z = float(sps.norm.ppf(0.5 + level / 2))
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def format_p(p: float | None, *, note: str = "") -> str:
    """``"p < 0.001"``, ``"p = 0.013"`` or the plain reason no test was run."""
    if p is None:
        return note or "no test"
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.3f}"
