"""Transitions: the probability of each exit of a source state, B against A, and the outgoing
distributions of the sources (described, not tested).

The end of a trace is censoring, not a transition: the last visit of a trace was cut short by the
end of the recording, so it says nothing about where the state goes next. Every probability is
per *observed exit* of the source (``last state -> TERMINAL`` is left out of the counts, of the
tests and of the edges seen in one group only), so that a group whose connections run longer,
and so end less often per visit, does not look as if its states were left differently."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from quicsm.compare.families.clustered import proportion_test, stratified_proportion_test
from quicsm.compare.families.schema import TEST, VERDICT, F, I, S
from quicsm.compare.keys import Strata, shift, state_names, state_order
from quicsm.stats import overdispersion as od
from quicsm.stats import significance as sig
from quicsm.stats.descriptive import TERMINAL, transition_counts
from quicsm.stats.intervals import cluster_wilson


def _count_matrix(
    df: pl.DataFrame, edges: Sequence[tuple[str, str]]
) -> tuple[list[str], np.ndarray]:
    """Trace ids and the (traces x edges) matrix of their transition counts."""
    traces = sorted(df["trace"].unique().to_list())
    out = np.zeros((len(traces), len(edges)))
    if not traces:
        return traces, out
    tc = transition_counts(df).with_columns(
        pl.col("source").cast(pl.String), pl.col("target").cast(pl.String)
    )
    row = {t: i for i, t in enumerate(traces)}
    col = {e: j for j, e in enumerate(edges)}
    for trace, s, t, count in tc.select("trace", "source", "target", "count").iter_rows():
        j = col.get((s, t))
        if j is not None:
            out[row[trace], j] += count
    return traces, out


def _edge_list(*frames: pl.DataFrame) -> list[tuple[str, str]]:
    seen: set[tuple[str, str]] = set()
    for df in frames:
        if df.height == 0:
            continue
        tc = transition_counts(df).select(
            pl.col("source").cast(pl.String), pl.col("target").cast(pl.String)
        )
        seen.update((str(s), str(t)) for s, t in tc.unique().iter_rows() if t != TERMINAL)
    order = state_order()
    return sorted(seen, key=lambda e: (order(e[0]), order(e[1]), e))


def transitions(
    a: pl.DataFrame,
    b: pl.DataFrame,
    st: Strata | None,
    *,
    min_n: int,
    permutations: int,
    seed: int,
    lengths: Strata | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """The transition rows and the source rows; ``lengths`` (groups of very different
    lengths): the length stratum of every trace, within which alone a permutation test
    exchanges traces (:mod:`quicsm.compare.families.clustered`)."""
    edges = _edge_list(a, b)
    ka, ma = _count_matrix(a, edges)
    kb, mb = _count_matrix(b, edges)
    sources = sorted({s for s, _ in edges}, key=state_order())
    # within strata, the traces vary around their own stratum's probabilities: the
    # dispersion is pooled over every (stratum, group) as over the groups without strata
    parts = [(ma, mb)]
    if st is not None:
        la, lb = np.array(st.labels(ka)), np.array(st.labels(kb, b=True))
        parts = [(ma[la == s], mb[lb == s]) for s in sorted(set(la.tolist()) & set(lb.tolist()))]
    disp = _Dispersion.make(edges, parts)
    src_rows: list[dict[str, Any]] = []
    edge_rows: list[dict[str, Any]] = []
    for source in sources:
        idx = [j for j, (s, _) in enumerate(edges) if s == source]
        sa, sb = ma[:, idx], mb[:, idx]
        tot_a, tot_b = sa.sum(), sb.sum()
        qa = sa.sum(axis=0) / tot_a if tot_a else np.zeros(len(idx))
        qb = sb.sum(axis=0) / tot_b if tot_b else np.zeros(len(idx))
        # the outgoing distribution as a whole is described (total variation), and tested
        # transition by transition: one test per question, none duplicating another
        res = sig.TestResult("none", None, note="tested per transition")
        src_rows.append(
            {
                "source": source,
                "a_count": int(tot_a),
                "b_count": int(tot_b),
                "n_a": int(np.count_nonzero(sa.sum(axis=1))),
                "n_b": int(np.count_nonzero(sb.sum(axis=1))),
                # total variation distance between the two outgoing distributions
                "effect": float(0.5 * np.abs(qb - qa).sum()) if tot_a and tot_b else math.nan,
                "statistic": res.statistic,
                "p_unadjusted": res.p_value,
                "p_min": res.p_min,
                "test": res.test,
                "note": res.note,
            }
        )
        row_a, row_b = sa.sum(axis=1), sb.sum(axis=1)
        for k, j in enumerate(idx):
            target = edges[j][1]
            this_a, this_b = ma[:, [j]], mb[:, [j]]
            difference = float(qb[k] - qa[k]) if tot_a and tot_b else math.nan
            se, df = math.nan, math.inf
            er: sig.TestResult | None
            if st is None:
                er, se, df = proportion_test(
                    this_a[:, 0],
                    row_a,
                    this_b[:, 0],
                    row_b,
                    disp.rho(j),
                    min_n=min_n,
                    permutations=permutations,
                    seed=seed,
                    model_rho=disp.model(j),
                    lengths=None
                    if lengths is None
                    else (lengths.labels(ka), lengths.labels(kb, b=True)),
                )
            else:
                er, se = stratified_proportion_test(
                    this_a[:, 0],
                    row_a,
                    la,
                    this_b[:, 0],
                    row_b,
                    lb,
                    disp.rho(j),
                    min_n=min_n,
                )
            if er is None:  # sparse strata: one number per trace, its share of the exits
                va, vb = row_a > 0, row_b > 0
                w = shift(
                    this_a[va, 0] / row_a[va],
                    [ka[i] for i in np.flatnonzero(va)],
                    this_b[vb, 0] / row_b[vb],
                    [kb[i] for i in np.flatnonzero(vb)],
                    st,
                    min_n=min_n,
                    permutations=permutations,
                )
                er = w.result
            a_ci = cluster_wilson(sa, k) if tot_a else (math.nan, math.nan)
            b_ci = cluster_wilson(sb, k) if tot_b else (math.nan, math.nan)
            edge_rows.append(
                {
                    "source": source,
                    "target": target,
                    "a_count": int(this_a.sum()),
                    "b_count": int(this_b.sum()),
                    "a_probability": float(qa[k]) if tot_a else math.nan,
                    "b_probability": float(qb[k]) if tot_b else math.nan,
                    "difference": difference,
                    "a_ci_low": a_ci[0],
                    "a_ci_high": a_ci[1],
                    "b_ci_low": b_ci[0],
                    "b_ci_high": b_ci[1],
                    "p_unadjusted": er.p_value,
                    "p_min": er.p_min,
                    "test": er.test,
                    "note": er.note,
                    "se": se,
                    "df": df,
                }
            )
        if len(idx) == 2 and all(r["p_unadjusted"] is not None for r in edge_rows[-2:]):
            # a source with two exits: each is the other's complement, so their two rows are
            # one test, counted once in its family (a permutation test drawn twice could
            # differ by its random splits: the second row takes the first's result)
            first, second = edge_rows[-2:]
            for key in ("p_unadjusted", "p_min", "test"):
                second[key] = first[key]
            for r, other in zip(edge_rows[-2:], reversed(edge_rows[-2:]), strict=True):
                r["hypothesis"] = ("edges", source)
                same = f"one test with {source} → {other['target']}"
                r["note"] = f"{r['note']}; {same}" if r["note"] else same
    return {"sources": src_rows, "edges": edge_rows}


@dataclass
class _Dispersion:
    """The intra-trace correlation of every transition, pooled over all transitions of both
    groups and shrunk per transition (:mod:`quicsm.stats.overdispersion`)."""

    pooled: float
    prior: float
    own: list[od.Moments]
    total: od.Moments = od.Moments()

    @classmethod
    def make(
        cls, edges: Sequence[tuple[str, str]], parts: Sequence[tuple[np.ndarray, np.ndarray]]
    ) -> _Dispersion:
        """``parts``: (A's, B's) traces x edges counts, of each stratum (or of the groups)."""
        own: list[od.Moments] = []
        for j, (source, _) in enumerate(edges):
            idx = [i for i, (s, _) in enumerate(edges) if s == source]
            total = od.Moments()
            for m in (m for pair in parts for m in pair):
                total = total + od.row_moments(m[:, j], m[:, idx].sum(axis=1))
            own.append(total)
        rows = [m for m in own if m.weight > 0]
        prior = sum(m.weight for m in rows) / len(rows) if rows else 0.0
        return cls(od.pooled_rho(own), prior, own, sum(own, od.Moments()))

    def rho(self, j: int) -> float:
        # never below the pooled value: a transition's own few traces may say it is more
        # heterogeneous than the others, not (noisily) less
        return max(self.pooled, od.shrunk_rho(self.own[j], self.pooled, self.prior))

    def model(self, j: int) -> float:
        """The ρ of the transition's detectable effect (:func:`od.model_rho`: unbiased, not
        floored), where the test's (:meth:`rho`) errs on the safe side."""
        return od.model_rho(self.own[j], self.total, self.prior)


# -- dwell times ------------------------------------------------------------------------------


def presence(a: pl.DataFrame, b: pl.DataFrame, edges: list[dict[str, Any]]) -> dict[str, list[str]]:
    sa, sb = set(state_names(a)), set(state_names(b))
    order = state_order()
    set_ea = {(r["source"], r["target"]) for r in edges if r["a_count"] > 0}
    set_eb = {(r["source"], r["target"]) for r in edges if r["b_count"] > 0}

    def fmt(es: Iterable[tuple[str, str]]) -> list[str]:
        return [f"{s} → {t}" for s, t in sorted(es, key=lambda e: (order(e[0]), order(e[1])))]

    return {
        "states_only_a": sorted(sa - sb, key=order),
        "states_only_b": sorted(sb - sa, key=order),
        "edges_only_a": fmt(set_ea - set_eb),
        "edges_only_b": fmt(set_eb - set_ea),
    }


# -- shared finishing: the two families, significance, detectable effects ---------------------


SOURCES_SCHEMA: dict[str, pl.DataType] = {
    "source": S,
    "effect": F,
    **VERDICT,
    "n_a": I,
    "n_b": I,
    "a_count": I,
    "b_count": I,
    "statistic": F,
    **TEST,
}
SCHEMA: dict[str, pl.DataType] = {
    "source": S,
    "target": S,
    "a_probability": F,
    "b_probability": F,
    "difference": F,
    **VERDICT,
    "a_count": I,
    "b_count": I,
    "a_ci_low": F,
    "a_ci_high": F,
    "b_ci_low": F,
    "b_ci_high": F,
    **TEST,
}
