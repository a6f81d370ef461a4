"""Dwell times: how long each visit of a state lasts, B against A."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from quicsm.compare.families.schema import TEST, VERDICT, F, I, S
from quicsm.compare.keys import Strata, shift, state_names
from quicsm.core.frames import KEY_DTYPE
from quicsm.stats import overdispersion as od
from quicsm.stats import significance as sig
from quicsm.stats.descriptive import dwell_times


def _dwell_medians(df: pl.DataFrame) -> pl.DataFrame:
    """Per trace and state: median dwell (ms) and number of visits."""
    if df.height == 0:
        return pl.DataFrame(
            schema={
                "trace": KEY_DTYPE,
                "state": pl.String,
                "median": pl.Float64,
                "visits": pl.UInt32,
                "log_mean": pl.Float64,
                "log_var": pl.Float64,
            }
        )
    return (
        dwell_times(df)
        .with_columns(pl.col("state").cast(pl.String))
        .group_by("trace", "state")
        .agg(
            pl.col("dwell_ms").median().alias("median"),
            pl.len().alias("visits"),
            pl.col("dwell_ms").log1p().mean().alias("log_mean"),
            pl.col("dwell_ms").log1p().var(ddof=1).alias("log_var"),
        )
        .sort("trace", "state")
    )


def dwell(
    a: pl.DataFrame, b: pl.DataFrame, st: Strata | None, *, min_n: int, permutations: int
) -> list[dict[str, Any]]:
    da, db = _dwell_medians(a), _dwell_medians(b)
    rows: list[dict[str, Any]] = []
    names = state_names(a, b)
    effects = _DwellEffects.make(names, da, db)
    for state in names:
        pa = da.filter(pl.col("state") == state)
        pb = db.filter(pl.col("state") == state)
        xa, xb = pa["median"].to_numpy(), pb["median"].to_numpy()
        mde = math.nan
        if st is None:
            res, mde = effects.test(state, pa, pb, min_n=min_n)
        else:  # van Elteren: ranks within strata, compared within strata
            keys_a, keys_b = pa["trace"].to_list(), pb["trace"].to_list()
            labels = st.labels(keys_a) + st.labels(keys_b, b=True)
            r = sig.ranks_within(np.concatenate([xa, xb]), labels)
            res = shift(
                r[: xa.size],
                keys_a,
                r[xa.size :],
                keys_b,
                st,
                min_n=min_n,
                permutations=permutations,
            ).result
        med_a = float(np.median(xa)) if xa.size else math.nan
        med_b = float(np.median(xb)) if xb.size else math.nan
        ratio = med_b / med_a if xa.size and xb.size and med_a > 0 and med_b > 0 else math.nan
        rows.append(
            {
                "state": state,
                "a_median_ms": med_a,
                "b_median_ms": med_b,
                "log2_ratio": math.log2(med_b) - math.log2(med_a) if ratio == ratio else math.nan,
                "n_a": int(xa.size),
                "n_b": int(xb.size),
                "a_visits": int(pa["visits"].sum()),
                "b_visits": int(pb["visits"].sum()),
                "p_unadjusted": res.p_value,
                "p_min": res.p_min,
                "test": res.test,
                "note": res.note,
                "se": mde / math.log(2),
                # the random-effects mean is referred to Student's t over the traces
                "df": float(xa.size + xb.size - 2) if mde == mde else math.inf,
            }
        )
    return rows


def _within_variance(*parts: pl.DataFrame) -> float:
    """The within-trace variance of log dwell of one state, pooled over the traces of both
    groups with at least two visits (NaN when none has)."""
    num = den = 0.0
    for p in parts:
        q = p.filter(pl.col("visits") >= 2)
        num += float((q["log_var"] * (q["visits"].cast(pl.Float64) - 1)).sum() or 0.0)
        den += float((q["visits"].cast(pl.Float64) - 1).sum() or 0.0)
    return num / den if den > 0 else math.nan


@dataclass
class _DwellEffects:
    """Per state: the within-trace variance of log dwell, and the between-trace variance τ²
    pooled over every state of both groups, shrunk per state."""

    within: dict[str, float]
    own: dict[str, od.Moments]
    pooled: float
    prior: float

    @classmethod
    def make(cls, names: Sequence[str], da: pl.DataFrame, db: pl.DataFrame) -> _DwellEffects:
        within, own = {}, {}
        for state in names:
            pa = da.filter(pl.col("state") == state)
            pb = db.filter(pl.col("state") == state)
            s2 = _within_variance(pa, pb)
            within[state] = s2
            total = od.Moments()
            if s2 == s2 and s2 > 0:
                for p in (pa, pb):
                    v = s2 / p["visits"].cast(pl.Float64).to_numpy()
                    total = total + od.between_moments(p["log_mean"].to_numpy(), v)
            own[state] = total
        rows = [m for m in own.values() if m.weight > 0]
        prior = sum(m.weight for m in rows) / len(rows) if rows else 0.0
        return cls(within, own, od.pooled_between(list(own.values())), prior)

    def test(
        self, state: str, pa: pl.DataFrame, pb: pl.DataFrame, *, min_n: int
    ) -> tuple[sig.TestResult, float]:
        """Random-effects test of the mean log dwell (Mann-Whitney on the per-trace medians
        when no trace visits the state twice: no within-trace variance to go by)."""
        note = sig.too_few(pa.height, pb.height, min_n=min_n)
        s2 = self.within[state]
        if note or not (s2 == s2 and s2 > 0):
            xa, xb = pa["median"].to_numpy(), pb["median"].to_numpy()
            return sig.mann_whitney(np.sort(xa), np.sort(xb), min_n=min_n), math.nan
        tau2 = max(self.pooled, od.shrunk_between(self.own[state], self.pooled, self.prior))
        shift = od.random_effects_shift(
            pa["log_mean"].to_numpy(),
            s2 / pa["visits"].cast(pl.Float64).to_numpy(),
            pb["log_mean"].to_numpy(),
            s2 / pb["visits"].cast(pl.Float64).to_numpy(),
            tau2,
            df=pa.height + pb.height - 2,
        )
        why = f"log(1 + ms) per visit, τ² {tau2:.3g}"
        return sig.TestResult("random effects", shift.p_value, shift.z, why), shift.se


# -- invariants and presence ------------------------------------------------------------------


SCHEMA: dict[str, pl.DataType] = {
    "state": S,
    "a_median_ms": F,
    "b_median_ms": F,
    "log2_ratio": F,
    **VERDICT,
    "n_a": I,
    "n_b": I,
    "a_visits": I,
    "b_visits": I,
    **TEST,
}
