"""How many runs would decide it: turn a pilot comparison into the traces per group each test
needs to detect a change with 80% power, from the pilot's own variance.

Every tested row of a :class:`quicsm.compare.diff.DiffResult` carries the standard error of its
difference (``se``) and the degrees of freedom of the reference its statistic is referred to
(``df``; none: the normal). The plan asks of each row what the results ask for its minimum
detectable effect, with the same functions (:func:`quicsm.stats.overdispersion.power_at`,
:func:`~quicsm.stats.overdispersion.detectable`: the noncentral t, or the normal): ``mde`` is
the row's MDE in the results, and the traces per group a test needs to detect an effect ``δ``
with power ``1 − β`` are the fewest ``n`` with

    power_at(δ, se · √(n_now / n), level, df(n)) ≥ 1 − β

with ``n_now`` the mean of the two groups' traces: a standard error shrinks as one over the
square root of the traces per group, and the reference's degrees of freedom grow with the
traces, ``df(n) = df · (2n − 2) / (2 n_now − 2)`` (the pilot's share of them kept: what length
strata or the traces' heterogeneity cost the pilot, they cost the runs to come). At ``n_now``
and the level a row faced, the effect planned for with ``n_now`` traces is its MDE.

With the traces planned, every test of a family can reach significance, so the level a single
discovery needs is its family's share of α (:func:`quicsm.compare.families.policy.levels`) over
K for the K primary tests run (Holm's first step) and over m for the m exploratory ones
(Benjamini-Hochberg's first rank). ``δ`` is the pilot's own difference unless one is asked for:
``effect`` is read in each family's units — a share or probability difference for states and
transitions (``0.1`` = 10 points), a relative change for outcomes (``0.1`` = 10%), a ratio for
dwell times (``1.5`` = 1.5 times as long).

This is a plan, not a promise: it assumes the pilot's variance is the variance of the runs to
come. Never fewer than 3 traces (no test below), and for the outcomes and the transitions,
whose tests are exact permutation tests over traces up to 7 per group, never fewer than an
exact test needs to reach the level at all (2 / C(2n, n) ≤ level). Time shares are Welch's
t-tests over traces: no such floor.
"""

from __future__ import annotations

import math

import polars as pl

from quicsm.compare.diff import DiffResult
from quicsm.compare.families.policy import levels
from quicsm.stats import overdispersion as od
from quicsm.stats.distributions import norm_ppf
from quicsm.stats.significance import MIN_N

#: up to this many traces per group the per-trace tests are exact permutation tests (6 vs 6:
#: 924 splits, 7 vs 7: 3,432, within the default 4,999)
EXACT_UP_TO = 8

__all__ = ["PLAN_SCHEMA", "df_at", "plan", "traces_needed"]

#: the most traces per group a plan names (beyond: no plan, ``None``)
MOST_TRACES = 10**9

PLAN_SCHEMA: dict[str, pl.DataType] = {
    "family": pl.String(),
    "kind": pl.String(),
    "subject": pl.String(),
    "n_a": pl.Int64(),
    "n_b": pl.Int64(),
    "effect": pl.Float64(),
    "units": pl.String(),
    "se": pl.Float64(),
    "df": pl.Float64(),
    "level": pl.Float64(),
    "mde": pl.Float64(),
    "traces_per_group": pl.Int64(),
}


def df_at(n: float, df: float, n_now: float) -> float:
    """The degrees of freedom of a reference with ``df`` at ``n_now`` traces per group, at
    ``n`` per group: in proportion to the traces less two (``inf`` stays so)."""
    if not (df == df and math.isfinite(df)) or 2 * n_now - 2 <= 0:
        return df
    return max(1.0, df * (2 * n - 2) / (2 * n_now - 2))


def traces_needed(
    se: float,
    effect: float,
    level: float,
    n_now: float,
    power: float = 0.8,
    *,
    df: float = math.inf,
    per_trace: bool = False,
) -> int | None:
    """The fewest traces per group (at least ``MIN_N``) with which a test whose difference has
    standard error ``se`` and whose reference has ``df`` degrees of freedom at ``n_now`` traces
    per group detects ``effect`` at ``level`` with ``power``
    (:func:`quicsm.stats.overdispersion.power_at`; see the module docstring). ``per_trace``: an
    outcome or a transition, whose exact test of n vs n must reach the level. None when nothing
    can be planned (no standard error, no effect, or more than :data:`MOST_TRACES`)."""
    if not (se == se and se > 0 and effect == effect and effect != 0 and n_now > 0):
        return None

    def enough(n: int) -> bool:
        at = od.power_at(effect, se * math.sqrt(n_now / n), alpha=level, df=df_at(n, df, n_now))
        return at >= power

    # the normal's answer is a lower bound (a t reference asks for more): search up from it
    z = norm_ppf(1 - level / 2) + norm_ppf(power)
    low = max(MIN_N, math.ceil(n_now * (z * se / abs(effect)) ** 2) - 1)
    if low > MOST_TRACES:
        return None
    if enough(low):
        n = low
    else:
        high = low
        while not enough(high):
            low, high = high, high * 2
            if low > MOST_TRACES:
                return None
        while high - low > 1:  # enough(high), not enough(low)
            mid = (low + high) // 2
            low, high = (low, mid) if enough(mid) else (mid, high)
        n = high
    if per_trace:  # an outcome or a transition: the exact test of n vs n must reach the level
        while n < EXACT_UP_TO and 2 / math.comb(2 * n, n) > level:
            n += 1
    return n


def plan(result: DiffResult, *, effect: float | None = None, power: float = 0.8) -> pl.DataFrame:
    """One row per tested quantity with a standard error: the traces per group needed to
    detect ``effect`` (default: the pilot's own difference) with ``power``. Primary rows
    first, then by traces needed."""
    rows = []
    # with the traces planned, every test of a family can reach significance: the level a
    # single discovery needs is α over the tests of its family that were run (Holm's first
    # step for the primary family, Benjamini-Hochberg's first rank for the exploratory one)
    run: dict[str, int] = {"primary": 0, "exploratory": 0}
    for f in result.frames():
        for fam, p in f.select("family", "p_unadjusted").iter_rows():
            if p is not None and fam in run:
                run[fam] += 1
    frames = (
        ("outcome", result.outcomes, "relative change"),
        ("state", result.states, "share of time"),
        ("edge", result.edges, "probability"),
        ("dwell", result.dwell, "log2 ratio"),
    )
    for kind, frame, units in frames:
        for r in frame.iter_rows(named=True):
            if r["p_unadjusted"] is None or r["se"] is None:
                continue
            level = levels(result.alpha).get(r["family"], result.alpha) / max(
                1, run.get(r["family"], 1)
            )
            se = float(r["se"])
            df = math.inf if r.get("df") is None else float(r["df"])
            faced = r.get("level")
            n_a = r.get("n_a", result.n_a)
            n_b = r.get("n_b", result.n_b)
            n_now = (n_a + n_b) / 2
            if kind == "outcome":
                subject = f"{r['metric']} in {r['cell']}"
                base = abs(r["a_mean"]) if r["a_mean"] else math.nan
                delta = r["difference"] if effect is None else effect * base
                shown = delta / base
            elif kind == "dwell":
                subject = r["state"]
                delta = r["log2_ratio"]
                if effect is not None:
                    delta = math.log2(effect) if effect > 0 else math.nan
                shown = delta
            else:
                subject = r["state"] if kind == "state" else f"{r['source']} → {r['target']}"
                delta = r["difference"] if effect is None else effect
                shown = delta
            rows.append(
                {
                    "family": r["family"],
                    "kind": kind,
                    "subject": subject,
                    "n_a": n_a,
                    "n_b": n_b,
                    "effect": shown,
                    "units": units,
                    "se": se,
                    "df": df,
                    "level": level,
                    # what the results say this row could have detected (the same function,
                    # at the level the row faced there)
                    "mde": math.nan
                    if faced is None
                    else od.detectable(se, alpha=float(faced), power=power, df=df),
                    "traces_per_group": traces_needed(
                        se,
                        delta,
                        level,
                        n_now,
                        power,
                        df=df,
                        per_trace=kind in ("outcome", "edge"),
                    ),
                }
            )
    table = (
        pl.DataFrame(rows, schema=PLAN_SCHEMA, orient="row")
        if rows
        else pl.DataFrame(schema=PLAN_SCHEMA)
    )
    return table.sort(
        [pl.col("family") != "primary", "traces_per_group", "kind", "subject"], nulls_last=True
    )
