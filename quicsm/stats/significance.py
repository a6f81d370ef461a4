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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from quicsm.core.numbers import format_p as format_p
from quicsm.stats import distributions as dist
from quicsm.stats.intervals import mean_design_effect
from quicsm.stats.overdispersion import benjamini_hochberg

#: fewest traces per group for any test.
MIN_N = 3
#: up to this many traces in the smaller group, a stratified shift whose splits are too many to
#: enumerate is referred to random splits within strata rather than to the normal distribution
FEW_TRACES = 50
#: a contingency table whose expected counts are all at least this uses the G-test.
MIN_EXPECTED = 5.0
#: Mann-Whitney is exact (over every split) up to this many values per group, without ties
_MW_EXACT = 8
#: cells of one block of permutation draws (bounds the memory of a permutation test)
_MASK_CELLS = 2_000_000


@dataclass(frozen=True)
class TestResult:
    """The outcome of one test: ``p_value`` is ``None`` when no test was run (see ``note``)."""

    test: str
    p_value: float | None
    statistic: float | None = None
    note: str = ""
    #: the smallest p-value this test could have given with these traces (over every possible
    #: assignment of them to the groups): 0 for tests on a continuous scale, 2/252 for an exact
    #: test over 5 vs 5 distinct traces, 1 when every assignment looks the same
    p_min: float = 0.0

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
    half = dist.t_ppf(0.5 + level / 2, n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
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
            return WelchResult(0.0, 0.0, 0.0, TestResult("welch", 1.0, 0.0, "no variance", 1.0))
        return WelchResult(diff, diff, diff, TestResult("welch", None, note="no variance: no test"))
    se = math.sqrt(se2)
    # Welch-Satterthwaite, with each group's share of the variance (in [0, 1]) so that tiny
    # variances cannot underflow the denominator to zero
    wa, wb = (va / na) / se2, (vb / nb) / se2
    df = 1.0 / (wa**2 / (na - 1) + wb**2 / (nb - 1))
    t = diff / se
    p = 2.0 * dist.t_sf(abs(t), df)
    half = dist.t_ppf(0.5 + level / 2, df) * se
    return WelchResult(diff, diff - half, diff + half, TestResult("welch", p, t))


def splits(n_a: int, n_b: int) -> int:
    """How many ways ``n_a + n_b`` traces can be split into groups of ``n_a`` and ``n_b``."""
    return math.comb(n_a + n_b, n_a)


def _subset_sums(x: np.ndarray, k: int) -> np.ndarray:
    """The sum of every ``k``-subset of ``x`` (in :func:`itertools.combinations` order)."""
    n = x.size
    if k == 0:
        return np.zeros(1)
    idx = np.fromiter(
        itertools.chain.from_iterable(itertools.combinations(range(n), k)),
        dtype=np.int64,
        count=math.comb(n, k) * k,
    ).reshape(-1, k)
    return x[idx].sum(axis=1)


def mean_shift(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    min_n: int = MIN_N,
    permutations: int = 4999,
    level: float = 0.95,
) -> WelchResult:
    """``mean(b) - mean(a)`` tested over traces: an exact permutation test (every split of the
    traces between the groups) when there are at most ``permutations`` splits, else Welch's
    t-test. The interval is Welch's in both cases."""
    w = welch(a, b, min_n=min_n, level=level)
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    if w.result.p_value is None and not w.result.note.startswith("no variance"):
        return w
    if splits(xa.size, xb.size) > permutations:
        return w
    p, p_min = _exact_shift([xa], [xb])
    result = TestResult("permutation (exact)", p, note=w.result.note, p_min=p_min)
    return WelchResult(w.difference, w.ci_low, w.ci_high, result)


def _exact_shift(
    a_parts: Sequence[np.ndarray], b_parts: Sequence[np.ndarray]
) -> tuple[float, float]:
    """Exact two-sided p-value of the stratum-weighted difference of means over every split
    that keeps each stratum's group sizes, and the smallest p-value any split could give."""
    observed = 0.0
    every = np.zeros(1)
    for xa, xb in zip(a_parts, b_parts, strict=True):
        na, nb = xa.size, xb.size
        n = na + nb
        w = na * nb / n
        values = np.concatenate([xa, xb])
        total = float(values.sum())
        sums = _subset_sums(values, nb)  # B's sum under every split
        d = sums / nb - (total - sums) / na
        observed += w * (float(xb.mean()) - float(xa.mean()))
        every = (every[:, None] + w * d[None, :]).ravel()
    eps = 1e-9 * max(1.0, abs(observed))
    size = every.size
    extreme = float(np.abs(every).max())
    p_min = float(np.count_nonzero(np.abs(every) >= extreme - 1e-9 * max(1.0, extreme))) / size
    return float(np.count_nonzero(np.abs(every) >= abs(observed) - eps)) / size, p_min


def stratified_shift(
    a: Sequence[float] | np.ndarray,
    a_strata: Sequence[str],
    b: Sequence[float] | np.ndarray,
    b_strata: Sequence[str],
    *,
    min_n: int = MIN_N,
    permutations: int = 4999,
    level: float = 0.95,
) -> WelchResult:
    """Is B shifted against A *within* strata? One number per trace, compared only with traces
    of the same stratum, combined over strata.

    The statistic is ``T = Σ_s w_s (mean_b,s − mean_a,s)`` with ``w_s = n_a,s n_b,s / N_s``
    (the Cochran-Mantel-Haenszel weights: on 0/1 values this is the CMH test, on ranks within
    strata van Elteren's). Under the null that the grouping does not matter inside a stratum,
    shuffling traces within strata leaves ``T`` centred on 0 with variance ``Σ_s w_s S_s²``
    (``S_s²`` the variance of all values in the stratum). The p-value is exact (every such
    shuffle) when there are at most ``permutations`` of them, else from ``permutations``
    random shuffles within strata while the smaller group has at most :data:`FEW_TRACES`
    traces, else from the normal approximation. ``difference`` is ``T / Σ w_s``, the weighted
    mean within-stratum difference, with a normal interval from the within-group variances.

    Strata without traces in both groups carry no information and are left out (the note
    says how many traces); fewer than ``min_n`` traces in a group over the remaining strata:
    no test.
    """
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    sa, sb = np.asarray(a_strata, dtype=object), np.asarray(b_strata, dtype=object)
    shared = sorted(set(sa.tolist()) & set(sb.tolist()))
    parts_a = [xa[sa == s] for s in shared]
    parts_b = [xb[sb == s] for s in shared]
    na, nb = sum(p.size for p in parts_a), sum(p.size for p in parts_b)
    note = too_few(na, nb, min_n=min_n)
    if note:
        if not shared:
            note = "no stratum with traces in both groups: no test"
        return WelchResult(math.nan, math.nan, math.nan, TestResult("stratified", None, note=note))
    weights, diffs, null_var, se2 = [], [], 0.0, 0.0
    for pa, pb in zip(parts_a, parts_b, strict=True):
        n = pa.size + pb.size
        w = pa.size * pb.size / n
        weights.append(w)
        diffs.append(float(pb.mean() - pa.mean()))
        null_var += w * (float(np.concatenate([pa, pb]).var(ddof=1)) if n > 1 else 0.0)
        va = float(pa.var(ddof=1)) if pa.size > 1 else 0.0
        vb = float(pb.var(ddof=1)) if pb.size > 1 else 0.0
        se2 += w * w * (va / pa.size + vb / pb.size)
    total_w = float(sum(weights))
    stat = float(np.dot(weights, diffs))
    estimate = stat / total_w
    z_level = dist.norm_ppf(0.5 + level / 2)
    half = z_level * math.sqrt(se2) / total_w
    if null_var <= 0.0:
        return WelchResult(
            estimate,
            estimate,
            estimate,
            TestResult("stratified", 1.0, 0.0, "all values equal", 1.0),
        )
    count = math.prod(splits(pa.size, pb.size) for pa, pb in zip(parts_a, parts_b, strict=True))
    z = stat / math.sqrt(null_var)
    strata_note = f"{len(shared)} strata" if len(shared) != 1 else "1 stratum"
    left = xa.size + xb.size - na - nb
    if left:
        # said, never silently dropped: a trace alone with its group in its stratum has no
        # trace of the other group to be compared with
        strata_note += (
            f"; {left} trace{'s' * (left != 1)} left out (their stratum holds one group only)"
        )
    if count <= permutations:
        p, p_min = _exact_shift(parts_a, parts_b)
        result = TestResult("stratified (exact)", p, z, strata_note, p_min)
    elif min(na, nb) <= FEW_TRACES:
        # few traces: the normal approximation is not trusted (small strata and zero-heavy
        # values make it too liberal); random splits within strata instead. T is the constant
        # Σ w_s tot_s / n_b,s less A's sum over the strata, so a split only matters by A's sum
        values = np.concatenate([*parts_a, *parts_b])
        labels = [s for s, pa in zip(shared, parts_a, strict=True) for _ in range(pa.size)] + [
            s for s, pb in zip(shared, parts_b, strict=True) for _ in range(pb.size)
        ]
        const = sum(
            w * float(np.concatenate([pa, pb]).sum()) / pb.size
            for w, pa, pb in zip(weights, parts_a, parts_b, strict=True)
        )
        within = permutation_within_strata(
            values[:, None],
            np.arange(values.size) < na,
            labels,
            lambda sums, _totals: np.abs(const - sums[:, 0]),
            permutations=permutations,
            seed=0,
            name="stratified (random splits)",
        )
        assert within.result is not None  # every shared stratum holds both groups
        r = within.result
        result = TestResult(r.test, r.p_value, z, strata_note, r.p_min)
    else:
        result = TestResult("stratified", 2.0 * dist.norm_sf(abs(z)), z, strata_note)
    return WelchResult(estimate, estimate - half, estimate + half, result)


def ranks_within(values: np.ndarray, strata: Sequence[str]) -> np.ndarray:
    """Mid-ranks of ``values`` inside each stratum, scaled to (0, 1) by ``N_s + 1`` (the
    van Elteren scores)."""
    x = np.asarray(values, dtype=float)
    st = np.asarray(strata, dtype=object)
    out = np.zeros_like(x)
    for s in set(st.tolist()):
        mask = st == s
        out[mask] = dist.rankdata(x[mask]) / (int(mask.sum()) + 1)
    return out


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


def holm_tarone(
    p_values: Sequence[float | None], p_mins: Sequence[float], *, alpha: float
) -> tuple[list[float | None], list[bool]]:
    """Holm over the tests that could reach significance (Tarone's rule for discrete tests).

    A test whose smallest attainable p-value (:attr:`TestResult.p_min`) is above ``α/K`` can
    never be significant, so it need not dilute the others: ``K`` is the smallest number such
    that at most ``K`` tests have ``p_min <= α/K`` (Tarone, Biometrics 1990), and Holm runs over
    those tests. The smallest attainable p-values depend only on which traces there are, not on
    how they fall into the groups, so choosing the family this way keeps the family-wise error
    rate at ``α``. Returns the adjusted p-values (Holm inside the family; ``min(1, K p)`` outside
    it, never below ``α``) and whether each test is in the family.
    """
    tested = [i for i, p in enumerate(p_values) if p is not None]
    k = tarone_k([p_mins[i] for i in tested], alpha=alpha)
    family = [i for i in tested if p_mins[i] <= alpha / k]
    inside = holm([p_values[i] for i in family])
    out: list[float | None] = [None] * len(p_values)
    member = [False] * len(p_values)
    for i, p in zip(family, inside, strict=True):
        out[i] = p
        member[i] = True
    for i in tested:
        if not member[i]:
            p = p_values[i]
            assert p is not None
            out[i] = max(min(1.0, k * p), min(1.0, alpha))
    return out, member


def tarone_k(p_mins: Sequence[float], *, alpha: float) -> int:
    """Tarone's ``K``: the smallest number such that at most ``K`` of the tests have a smallest
    attainable p-value ``<= α/K`` (every test counted, whether it has a p-value or not, is the
    caller's choice: pass only the tests that were run)."""
    k = 1
    while k < len(p_mins) and sum(1 for pm in p_mins if pm <= alpha / k) > k:
        k += 1
    return k


def bh_tarone(
    p_values: Sequence[float | None], p_mins: Sequence[float], *, alpha: float
) -> tuple[list[float | None], list[bool]]:
    """Benjamini-Hochberg over the tests that could reach significance, chosen by Tarone's rule
    (Gilbert, JRSS C 2005: the false-discovery rate stays at ``α``). A discrete test whose
    smallest attainable p-value is above ``α/K`` could be a discovery only at a rank it can
    never reach among the others; leaving it out keeps it from diluting them. Returns the
    adjusted p-values (BH inside the family; ``None`` outside it) and whether each test is in
    the family."""
    tested = [i for i, p in enumerate(p_values) if p is not None]
    k = tarone_k([p_mins[i] for i in tested], alpha=alpha)
    family = [i for i in tested if p_mins[i] <= alpha / k]
    inside = benjamini_hochberg([p_values[i] for i in family])
    out: list[float | None] = [None] * len(p_values)
    member = [False] * len(p_values)
    for i, p in zip(family, inside, strict=True):
        out[i] = p
        member[i] = True
    return out, member


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
      :func:`quicsm.stats.intervals.mean_design_effect`), because transitions of one trace are
      not independent draws, unless the traces can be split between the groups in at most
      ``permutations`` ways;
    - otherwise a permutation test over traces with the G statistic: whole traces are shuffled
      between the groups (exactly, over every split, when there are at most ``permutations``
      splits), so small counts, few traces and within-trace dependence do not invalidate it;
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
        return TestResult("identical", 1.0, 0.0, "one outcome in both groups", 1.0)
    total = table.sum()
    expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / total
    g = g_statistic(table)
    few_splits = math.comb(a.shape[0] + b.shape[0], a.shape[0]) <= permutations
    if float(expected.min()) >= MIN_EXPECTED and not few_splits:
        dof = table.shape[1] - 1
        deff = mean_design_effect(a, b)
        p = dist.chi2_sf(g / deff, dof)
        return TestResult("g-test", p, g, f"design effect {deff:.2f}" if deff > 1.0 else "")
    return _permutation(np.vstack([a, b]), a.shape[0], g, permutations=permutations, seed=seed)


def permutation_g(
    a_per_trace: np.ndarray, b_per_trace: np.ndarray, *, permutations: int, seed: int
) -> TestResult:
    """The permutation test over traces with the G statistic, whatever the counts (exact over
    every split when there are at most ``permutations``): for tables too sparse for any
    approximation. ``a_per_trace`` / ``b_per_trace`` as in :func:`contingency_test`."""
    a = np.asarray(a_per_trace, dtype=float)
    b = np.asarray(b_per_trace, dtype=float)
    table = np.vstack([a.sum(axis=0), b.sum(axis=0)])
    keep = table.sum(axis=0) > 0
    if int(keep.sum()) < 2:
        return TestResult("identical", 1.0, 0.0, "one outcome in both groups", 1.0)
    a, b = a[:, keep], b[:, keep]
    g = g_statistic(table[:, keep])
    return _permutation(np.vstack([a, b]), a.shape[0], g, permutations=permutations, seed=seed)


def permutation_over_traces(
    units: np.ndarray,
    n_a: int,
    statistic: Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    permutations: int,
    seed: int,
    name: str,
) -> TestResult:
    """The permutation test over traces of any statistic that is a function of one group's
    column sums: ``units`` holds a row per trace (A's ``n_a`` rows first), ``statistic(sums,
    totals)`` gives the statistic of many splits at once from the sums of the rows drawn into
    one group (and the totals of every row), larger meaning more extreme, the same for a
    split and its mirror. Exact over every split when there are at most ``permutations``."""
    units = np.asarray(units, dtype=float)
    totals = units.sum(axis=0)
    observed = float(statistic(units[:n_a].sum(axis=0)[None, :], totals)[0])
    res = _permutation(
        units, n_a, observed, permutations=permutations, seed=seed, statistic=statistic
    )
    exact = res.test.endswith("(exact)")
    return TestResult(
        f"{name} (exact)" if exact else name, res.p_value, observed, res.note, res.p_min
    )


def _permutation(
    units: np.ndarray,
    n_a: int,
    observed: float,
    *,
    permutations: int,
    seed: int,
    statistic: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> TestResult:
    """Permutation p-value of the G statistic (or of ``statistic``, a function of the sums of
    the rows drawn and of the totals), shuffling rows (traces) between the groups.

    The statistic is symmetric in the two groups, so the subsets drawn are always of the
    smaller group's size: swapping A and B gives the same p-value.
    """
    stat = _g_statistics if statistic is None else statistic
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
        g = stat(masks @ units, totals)
        p = float(np.count_nonzero(g >= observed - eps)) / splits
        top = float(g.max())
        p_min = float(np.count_nonzero(g >= top - 1e-9 * max(1.0, top))) / splits
        return TestResult("permutation (exact)", p, observed, p_min=p_min)
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
        g = stat(draws @ distinct, totals)
        extreme += int(np.count_nonzero(g >= observed - eps))
        done += rows
    p = (1.0 + extreme) / (permutations + 1.0)
    return TestResult("permutation", p, observed, p_min=1.0 / (permutations + 1.0))


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
        return TestResult(
            "mann-whitney", 1.0, float(xa.size * xb.size) / 2, "all values equal", 1.0
        )
    small = max(xa.size, xb.size) <= _MW_EXACT and np.unique(np.concatenate([xa, xb])).size == (
        xa.size + xb.size
    )
    statistic, p = dist.mann_whitney_u(xa, xb, exact=small)
    p_min = min(1.0, 2.0 / splits(int(xa.size), int(xb.size))) if small else 0.0
    return TestResult("mann-whitney", p, statistic, p_min=p_min)


def fisher_traces(k_a: int, n_a: int, k_b: int, n_b: int, *, min_n: int = MIN_N) -> TestResult:
    """Fisher's exact test: do ``k_a`` of ``n_a`` traces and ``k_b`` of ``n_b`` traces differ in
    the share having some property (e.g. breaking an invariant)?"""
    note = too_few(n_a, n_b, min_n=min_n)
    if note:
        return TestResult("fisher", None, note=note)
    odds, p = dist.fisher_exact([[k_a, n_a - k_a], [k_b, n_b - k_b]])
    k = k_a + k_b  # the margins are fixed: any k_a' with k_a' + k_b' = k could have been seen
    p_min = min(
        dist.fisher_exact([[x, n_a - x], [k - x, n_b - k + x]])[1]
        for x in range(max(0, k - n_b), min(k, n_a) + 1)
    )
    return TestResult("fisher", p, odds, p_min=p_min)


def _row_subset_sums(units: np.ndarray, k: int) -> np.ndarray:
    """The column sums of every ``k``-subset of the rows of ``units``."""
    n = units.shape[0]
    out = np.zeros((math.comb(n, k), units.shape[1]))
    for i, combo in enumerate(itertools.combinations(range(n), k)):
        out[i] = units[list(combo)].sum(axis=0)
    return out


@dataclass(frozen=True)
class WithinStrata:
    """A permutation test within strata: its result (``None`` when no stratum holds traces of
    both groups: nothing can be permuted), and the traces held in their group because their
    stratum holds traces of one group only."""

    result: TestResult | None
    strata: int
    held: int


def permutation_within_strata(
    units: np.ndarray,
    in_a: np.ndarray,
    strata: Sequence[str],
    statistic: Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    permutations: int,
    seed: int,
    name: str,
) -> WithinStrata:
    """:func:`permutation_over_traces` with traces exchanged only within their stratum (e.g. of
    similar length): every split keeps each stratum's numbers of A and B traces. A stratum
    holding traces of one group only cannot be permuted: its traces stay in their group in
    every split (counted in ``held``). ``statistic`` must be the same for a split and its
    mirror (as in :func:`permutation_over_traces`); each stratum draws its smaller side, so
    that the p-value is the same with the groups swapped. Exact over every split when there
    are at most ``permutations``."""
    units = np.asarray(units, dtype=float)
    in_a = np.asarray(in_a, dtype=bool)
    labels = np.asarray(strata, dtype=object)
    totals = units.sum(axis=0)
    observed = float(statistic(units[in_a].sum(axis=0)[None, :], totals)[0])
    fixed = np.zeros(units.shape[1])
    parts: list[tuple[np.ndarray, int, bool]] = []  # (rows, drawn, drawn are A's)
    held = 0
    for s in sorted(set(labels.tolist())):
        rows = labels == s
        k, n = int((rows & in_a).sum()), int(rows.sum())
        if k in (0, n):
            fixed += units[rows & in_a].sum(axis=0)
            held += n
            continue
        u = units[rows]
        u = u[np.lexsort(u.T[::-1])]  # canonical: the same for (A, B) and (B, A)
        drawn_a = k <= n - k
        if not drawn_a:
            fixed += u.sum(axis=0)  # A's part = the stratum less the B traces drawn
        parts.append((u, min(k, n - k), drawn_a))
    if not parts:
        return WithinStrata(None, 0, held)
    eps = 1e-9 * max(1.0, abs(observed))
    count = math.prod(math.comb(u.shape[0], k) for u, k, _ in parts)
    if count <= permutations:
        sums = fixed[None, :]
        for u, k, drawn_a in parts:
            sub = _row_subset_sums(u, k) * (1.0 if drawn_a else -1.0)
            sums = (sums[:, None, :] + sub[None, :, :]).reshape(-1, units.shape[1])
        g = statistic(sums, totals)
        top = float(g.max())
        p = float(np.count_nonzero(g >= observed - eps)) / count
        p_min = float(np.count_nonzero(g >= top - 1e-9 * max(1.0, top))) / count
        return WithinStrata(
            TestResult(f"{name} (exact)", p, observed, p_min=p_min), len(parts), held
        )
    rng = np.random.default_rng(seed)
    block = max(1, min(permutations, _MASK_CELLS // max(1, units.shape[0])))
    extreme = done = 0
    distinct = [np.unique(u, axis=0, return_counts=True) for u, _, _ in parts]
    while done < permutations:
        size = min(block, permutations - done)
        sums = np.repeat(fixed[None, :], size, axis=0)
        for (rows, mult), (_, k, drawn_a) in zip(distinct, parts, strict=True):
            draw = rng.multivariate_hypergeometric(mult, k, size=size) @ rows
            sums += draw if drawn_a else -draw
        extreme += int(np.count_nonzero(statistic(sums, totals) >= observed - eps))
        done += size
    p = (1.0 + extreme) / (permutations + 1.0)
    return WithinStrata(
        TestResult(name, p, observed, p_min=1.0 / (permutations + 1.0)), len(parts), held
    )
