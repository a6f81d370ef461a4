"""The test of a clustered proportion, B against A: events out of opportunities in every trace
(a transition out of the exits of its source; an invariant broken out of the chances to break
it), traces being clusters. Shared by the transition and invariant families.

Where the z is referred to its permutations over traces and the groups' traces differ in
length, traces are exchanged only within their length stratum (``lengths``): a long trace is
not exchangeable with a short one. A stratum with traces of one group only cannot be
permuted: its traces stay in their group, and the note says how many; when no stratum holds
both groups, the z is referred to Student's t and the note says why."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from quicsm.stats import overdispersion as od
from quicsm.stats import significance as sig
from quicsm.stats.distributions import norm_sf

__all__ = ["proportion_test", "stratified_proportion_test"]


def stratified_proportion_test(
    ya: np.ndarray,
    ma: np.ndarray,
    la: np.ndarray,
    yb: np.ndarray,
    mb: np.ndarray,
    lb: np.ndarray,
    rho: float,
    *,
    min_n: int,
) -> tuple[sig.TestResult | None, float]:
    """One proportion within strata: each stratum's beta-binomial difference, combined with
    inverse-variance weights (under the null), so every event of every stratum counts and a
    trace is compared only with traces of its own stratum. Strata whose counts are too sparse
    for the normal approximation are left out (and counted in the note); None when every
    stratum is (the caller then tests one number per trace)."""
    n_a, n_b = int(np.count_nonzero(ma)), int(np.count_nonzero(mb))
    note = sig.too_few(n_a, n_b, min_n=min_n)
    if note:
        return sig.TestResult("none", None, note=note), math.nan
    num = den = 0.0
    used = sparse = 0
    for s in sorted(set(la.tolist()) & set(lb.tolist())):
        ia, ib = la == s, lb == s
        if not (ma[ia] > 0).any() or not (mb[ib] > 0).any():
            continue  # opportunities in one group only in this stratum: nothing to compare
        shift = od.proportion_shift(ya[ia], ma[ia], yb[ib], mb[ib], rho)
        if shift.se_null != shift.se_null:
            continue  # one outcome in both groups of the stratum: nothing could differ
        if shift.p_value is None or shift.se_null <= 0:
            sparse += 1  # too few effective opportunities here for the normal approximation
            continue
        w = 1.0 / shift.se_null**2
        num += w * shift.difference
        den += w
        used += 1
    if not used:
        if sparse:
            return None, math.nan
        return sig.TestResult("identical", 1.0, 0.0, "one outcome in both groups", 1.0), math.nan
    z = num / math.sqrt(den)
    p = 2.0 * norm_sf(abs(z))
    why = f"ρ {rho:.2f}, {used} strat{'um' if used == 1 else 'a'}" + (
        f" ({sparse} too sparse, left out)" if sparse else ""
    )
    return sig.TestResult("beta-binomial (stratified)", p, z, why), 1.0 / math.sqrt(den)


def proportion_test(
    ya: np.ndarray,
    ma: np.ndarray,
    yb: np.ndarray,
    mb: np.ndarray,
    rho: float,
    *,
    min_n: int,
    permutations: int,
    seed: int,
    lengths: tuple[Sequence[str], Sequence[str]] | None = None,
    unit: str = "transitions",
    model_rho: float | None = None,
) -> tuple[sig.TestResult, float, float]:
    """One proportion, B against A: the overdispersed (beta-binomial) z with the pooled
    intra-trace correlation ``rho``. With few traces (at most ``od.FEW_TRACES`` in a group) the
    z is referred to its permutation distribution over traces, exact whatever the traces'
    heterogeneity (within length strata when ``lengths`` gives each trace's: see the module
    docstring); with more, to the normal / Satterthwaite t. When the effective counts are
    too small for the normal approximation: Fisher's test on the effective counts (or a
    permutation test of the counts over traces). Returns the test and what its power rests
    on: the difference's standard error under the fitted model (each group's probability,
    ``model_rho``, by default ``rho``) and the degrees of freedom of the reference (``inf``:
    the normal). A permutation over traces learns its variance from them, as a two-sample
    t-test does: ``N − 2`` over ``N`` traces, and within length strata ``N − 2·S`` over the
    ``N`` traces of the ``S`` strata that hold both groups (each stratum's two means are
    fixed)."""
    n_a, n_b = int(np.count_nonzero(ma)), int(np.count_nonzero(mb))
    note = sig.too_few(n_a, n_b, min_n=min_n)
    if note:
        return sig.TestResult("none", None, note=note), math.nan, math.inf
    shift = od.proportion_shift(ya, ma, yb, mb, rho)
    if shift.p_value is not None and shift.se_null != shift.se_null:
        # every opportunity, in both groups, is an event (or none is): whichever way the
        # traces fell into the groups, nothing could differ
        return (
            sig.TestResult("identical", 1.0, 0.0, "one outcome in both groups", 1.0),
            math.nan,
            math.inf,
        )
    se = od.difference_se(ya, ma, yb, mb, rho if model_rho is None else model_rho)
    if se != se:
        se = shift.se_null
    df = float(n_a + n_b - 2)
    why = f"ρ {rho:.2f}, effective {unit} {shift.effective[0]:.0f} vs " + (
        f"{shift.effective[1]:.0f}"
    )
    va, vb = ma > 0, mb > 0
    few_traces = min(int(va.sum()), int(vb.sum())) <= od.FEW_TRACES
    if shift.p_value is not None and few_traces:
        # few traces: the same z, referred to its distribution over the splits of the traces
        # (exact whatever their heterogeneity). Not for sparse counts: there the z rests on
        # the few traces holding the events, and groups whose traces differ in their numbers
        # of opportunities would make it differ between the groups with the same probability
        units = np.vstack(
            [od.trace_units(ya[va], ma[va], rho), od.trace_units(yb[vb], mb[vb], rho)]
        )
        if lengths is None:
            res = sig.permutation_over_traces(
                units,
                int(va.sum()),
                od.abs_z_statistics,
                permutations=permutations,
                seed=seed,
                name="permuted z",
            )
            return sig.TestResult(res.test, res.p_value, shift.z, why, res.p_min), se, df
        labels = [*np.asarray(lengths[0], dtype=object)[va], *np.asarray(lengths[1])[vb]]
        within = sig.permutation_within_strata(
            units,
            np.arange(units.shape[0]) < int(va.sum()),
            labels,
            od.abs_z_statistics,
            permutations=permutations,
            seed=seed,
            name="permuted z within length strata",
        )
        if within.result is not None:
            res = within.result
            why += f"; permuted within {within.strata} length strat" + (
                "um" if within.strata == 1 else "a"
            )
            if within.held:
                why += (
                    f", {within.held} traces held in their group (their length stratum has "
                    "traces of one group only)"
                )
            used = units.shape[0] - within.held
            return (
                sig.TestResult(res.test, res.p_value, shift.z, why, res.p_min),
                se,
                float(max(1, used - 2 * within.strata)),
            )
        why += "; no length stratum holds traces of both groups: not permuted"
    if shift.p_value is not None:
        # a fixed reference, not learnt from the traces: the z is decided against the standard
        # error it is divided by (the null's, with the test's ρ), and so is its power
        return (
            sig.TestResult("beta-binomial", shift.p_value, shift.z, why),
            shift.se_null,
            od.between_df(ma, mb, rho),
        )
    few = f"fewer than {od.MIN_EFFECTIVE:g} expected in a group"
    counts = od.effective_counts(ya, ma, yb, mb, rho)
    if counts is not None:
        # Fisher's exact test on the counts each group is worth once the clustering is
        # accounted for (each group's counts divided by its design effect)
        (ka, na), (kb, nb) = counts
        res = sig.fisher_traces(ka, na, kb, nb, min_n=1)
        why = f"ρ {rho:.2f}, effective {unit} {na} vs {nb}; {few}"
        test = sig.TestResult("fisher (effective)", res.p_value, res.statistic, why, res.p_min)
        return test, se, df
    two_a = np.column_stack([ya, ma - ya])[ma > 0]
    two_b = np.column_stack([yb, mb - yb])[mb > 0]
    res = sig.permutation_g(two_a, two_b, permutations=permutations, seed=seed)
    why = f"{res.note}; {few}" if res.note else few
    return sig.TestResult(res.test, res.p_value, res.statistic, why, res.p_min), se, df
