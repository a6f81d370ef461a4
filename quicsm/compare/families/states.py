"""Time in state: each trace's share of its duration per state, B against A."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from quicsm.compare.families.schema import TEST, VERDICT, F, I, S
from quicsm.compare.keys import Strata, se_of, shift, state_names
from quicsm.stats import significance as sig
from quicsm.stats.descriptive import time_in_state


def fractions(transitions: pl.DataFrame, states: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Trace ids and the (traces x states) matrix of their time-in-state fractions (states
    absent from a trace are 0; traces of zero duration, which cannot say how time was spent,
    are left out). Traces in sorted order."""
    if transitions.height == 0:
        return [], np.zeros((0, len(states)))
    tis = time_in_state(transitions).with_columns(pl.col("state").cast(pl.String))
    traces = sorted(tis.filter(pl.col("fraction").is_not_null())["trace"].unique().to_list())
    out = np.zeros((len(traces), len(states)))
    row = {t: i for i, t in enumerate(traces)}
    col = {s: j for j, s in enumerate(states)}
    for trace, state, fraction in tis.select("trace", "state", "fraction").iter_rows():
        if trace in row and state in col and fraction is not None:
            out[row[trace], col[state]] = fraction
    return traces, out


def states(
    a: pl.DataFrame, b: pl.DataFrame, st: Strata | None, *, min_n: int, permutations: int
) -> list[dict[str, Any]]:
    names = state_names(a, b)
    ka, fa = fractions(a, names)
    kb, fb = fractions(b, names)
    rows: list[dict[str, Any]] = []
    for j, state in enumerate(names):
        ca, cb = sig.mean_ci(fa[:, j]), sig.mean_ci(fb[:, j])
        if st is None:
            # Welch's t over traces, not the exact permutation test: at 5 vs 5 the exact test
            # cannot go below 2/252, so within a family of shares it could never decide
            w = sig.welch(fa[:, j], fb[:, j], min_n=min_n)
        else:
            w = shift(fa[:, j], ka, fb[:, j], kb, st, min_n=min_n, permutations=permutations)
        rows.append(
            {
                "state": state,
                "a_fraction": ca.mean,
                "b_fraction": cb.mean,
                "difference": w.difference,
                "ci_low": w.ci_low,
                "ci_high": w.ci_high,
                "se": se_of(w),
                "p_unadjusted": w.result.p_value,
                "p_min": w.result.p_min,
                "test": w.result.test,
                "note": w.result.note,
                "n_a": ca.n,
                "n_b": cb.n,
                "a_ci_low": ca.ci_low,
                "a_ci_high": ca.ci_high,
                "b_ci_low": cb.ci_low,
                "b_ci_high": cb.ci_high,
            }
        )
    return rows


# -- transitions ------------------------------------------------------------------------------


SCHEMA: dict[str, pl.DataType] = {
    "state": S,
    "a_fraction": F,
    "b_fraction": F,
    "difference": F,
    "ci_low": F,
    "ci_high": F,
    **VERDICT,
    "n_a": I,
    "n_b": I,
    **TEST,
    "a_ci_low": F,
    "a_ci_high": F,
    "b_ci_low": F,
    "b_ci_high": F,
}
