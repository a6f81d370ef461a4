"""Outcomes: per-trace numbers (completion time, throughput) per cell, B against A."""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from quicsm.compare.families.schema import VERDICT, F, I, S
from quicsm.compare.keys import KEY_SEP, Strata, key_expr, se_of
from quicsm.core.errors import InputError
from quicsm.stats import significance as sig


def outcomes(
    outcomes: pl.DataFrame | None,
    a: pl.DataFrame,
    b: pl.DataFrame,
    st: Strata | None,
    *,
    min_n: int,
    permutations: int,
) -> list[dict[str, Any]]:
    """Per metric and cell, ``mean(b) - mean(a)`` of a per-trace outcome and its relative
    change (exact permutation test when the splits are few, else Welch)."""
    if outcomes is None or outcomes.height == 0:
        return []
    missing = {"file", "trace", "cell", "metric", "value"} - set(outcomes.columns)
    if missing:
        raise InputError(
            f"outcomes need columns file, trace, cell, metric, value; missing {sorted(missing)}"
        )
    o = outcomes.select(
        key_expr().alias("key"),
        pl.col("cell").cast(pl.String),
        pl.col("metric").cast(pl.String),
        pl.col("value").cast(pl.Float64),
    ).filter(pl.col("value").is_finite())
    keys_a = set(a["trace"].unique().to_list())
    keys_b = set(b["trace"].unique().to_list())
    rows: list[dict[str, Any]] = []
    for (metric, cell), part in sorted(
        o.group_by("metric", "cell"), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))
    ):
        xa = part.filter(pl.col("key").is_in(list(keys_a)))["value"].to_numpy()
        xb = part.filter(pl.col("key").is_in(list(keys_b)))["value"].to_numpy()
        if not xa.size and not xb.size:
            continue
        w = sig.mean_shift(xa, xb, min_n=min_n, permutations=permutations)
        mean_a = float(xa.mean()) if xa.size else math.nan
        mean_b = float(xb.mean()) if xb.size else math.nan
        rel = w.difference / abs(mean_a) if xa.size and xb.size and mean_a else math.nan
        rows.append(
            {
                "metric": str(metric),
                "cell": str(cell),
                "a_mean": mean_a,
                "b_mean": mean_b,
                "difference": w.difference,
                "change": rel,
                "ci_low": w.ci_low,
                "ci_high": w.ci_high,
                "se": se_of(w),
                "n_a": int(xa.size),
                "n_b": int(xb.size),
                "p_unadjusted": w.result.p_value,
                "p_min": w.result.p_min,
                "test": w.result.test,
                "note": w.result.note,
                "example_a": example(part, keys_a, low=False),
                "example_b": example(part, keys_b, low=rel < 0 if rel == rel else True),
            }
        )
    return rows


def example(part: pl.DataFrame, keys: set[str], *, low: bool) -> str:
    """The trace of the group closest to its group's median value (a typical example)."""
    g = part.filter(pl.col("key").is_in(list(keys))).sort("value", "key")
    if g.height == 0:
        return ""
    return str(g["key"][g.height // 2]).replace(KEY_SEP, "#", 1)


# -- time in state ----------------------------------------------------------------------------


SCHEMA: dict[str, pl.DataType] = {
    "metric": S,
    "cell": S,
    "a_mean": F,
    "b_mean": F,
    "difference": F,
    "change": F,
    "ci_low": F,
    "ci_high": F,
    **VERDICT,
    "n_a": I,
    "n_b": I,
    "p_unadjusted": F,
    "p_min": F,
    "test": S,
    "note": S,
    "example_a": S,
    "example_b": S,
}
