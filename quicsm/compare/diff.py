"""Compare two groups of traces: what changed in time-in-state, transitions, dwell times and
invariants, and is it more than noise?

``diff(a, b)`` takes two transitions frames (:data:`quicsm.core.frames.TRANSITIONS_SCHEMA`) and
returns
a :class:`DiffResult` whose frames are ranked by effect size. The statistics themselves come from
:mod:`quicsm.stats.descriptive` (time in state, transition counts and probabilities, dwell times);
the tests
from :mod:`quicsm.stats.significance`:

- time-in-state fraction per state: mean of per-trace fractions, Welch's t-test, Holm-corrected
  across states;
- outgoing transitions per source state: G-test on the pooled counts when every expected count
  is at least 5, else a permutation test over traces; per edge the same on (this edge, any other
  edge from the source); Holm-corrected across sources and across edges;
- dwell time per state: Mann-Whitney U on the per-trace median dwell, Holm-corrected;
- invariants (AlwaysFollowedBy, NeverFollowedBy, AlwaysPrecedes) mined in each group that do not
  hold in the other, and states/edges seen in only one group (reported, not tested).

Differences are always ``b - a``. A group with fewer than ``min_n`` traces gets no p-value, and
the reason is stated (``"n=2 < 3: no test"``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from quicsm.core.errors import InputError
from quicsm.core.frames import normalize_transitions
from quicsm.core.states import CANONICAL_STATES
from quicsm.stats import significance as sig
from quicsm.stats.descriptive import (
    dwell_times,
    time_in_state,
    transition_counts,
    transition_probabilities,
)

__all__ = ["DiffResult", "Finding", "diff"]

_KEY_SEP = "\x1f"


@dataclass(frozen=True)
class Finding:
    """One plain-sentence result for the summary, with a score in [0, 1] used for ranking."""

    kind: str  # state | edge | source | dwell | presence | invariant
    subject: str
    sentence: str
    score: float
    p_value: float | None = None


@dataclass
class DiffResult:
    """Everything ``quicsm diff`` reports about group B relative to group A (``b - a``)."""

    states: pl.DataFrame
    sources: pl.DataFrame
    edges: pl.DataFrame
    dwell: pl.DataFrame
    invariants: pl.DataFrame  # kind, a, b, holds_in ("a" | "b"), violations_a/_b, p_value, ...
    presence: dict[str, list[str]]
    alpha: float
    names: tuple[str, str]
    n_a: int
    n_b: int
    files_a: list[str] = field(default_factory=list)
    files_b: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    # -- conclusions ------------------------------------------------------------------------
    @property
    def any_significant(self) -> bool:
        frames = (self.states, self.sources, self.edges, self.dwell, self.invariants)
        return any(f.height and bool(f["significant"].any()) for f in frames)

    def untested(self) -> tuple[int, int]:
        """(tests not run, tests in total) over states, sources, edges, dwell, invariants."""
        frames = (self.states, self.sources, self.edges, self.dwell, self.invariants)
        total = sum(f.height for f in frames)
        return sum(f["p_value"].null_count() for f in frames), total

    def untested_reasons(self) -> list[str]:
        """The distinct reasons tests were not run, e.g. ``["n=2 < 3: no test"]``."""
        frames = (self.states, self.sources, self.edges, self.dwell, self.invariants)
        reasons = {
            str(n) for f in frames for n in f.filter(pl.col("p_value").is_null())["note"].to_list()
        }
        return sorted(reasons)

    def findings(self) -> list[Finding]:
        """Significant changes and one-sided states/edges/invariants, ranked, as sentences."""
        return _findings(self)


def diff(
    a_transitions: pl.DataFrame,
    b_transitions: pl.DataFrame,
    *,
    alpha: float = 0.01,
    min_n: int = sig.MIN_N,
    permutations: int = 4999,
    seed: int = 0,
    names: tuple[str, str] = ("A", "B"),
    invariants: bool = True,
) -> DiffResult:
    """Compare group B against group A; see the module docstring for the tests used."""
    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha must be between 0 and 1, got {alpha}")
    if min_n < 2:
        raise InputError(f"min_n must be at least 2, got {min_n}")
    a = _keyed(a_transitions)
    b = _keyed(b_transitions)
    n_a, n_b = a["trace"].n_unique(), b["trace"].n_unique()
    for name, n in zip(names, (n_a, n_b), strict=True):
        if n == 0:
            raise InputError(f"group {name} has no traces: nothing to compare")
    states = _states(a, b, alpha=alpha, min_n=min_n)
    sources, edges = _transitions(
        a, b, alpha=alpha, min_n=min_n, permutations=permutations, seed=seed
    )
    dwell = _dwell(a, b, alpha=alpha, min_n=min_n)
    inv = _invariants(a, b, alpha=alpha, min_n=min_n) if invariants else _empty_invariants()
    presence = _presence(a, b, edges)
    return DiffResult(
        states=states,
        sources=sources,
        edges=edges,
        dwell=dwell,
        invariants=inv,
        presence=presence,
        alpha=alpha,
        names=names,
        n_a=n_a,
        n_b=n_b,
        files_a=_files(a_transitions),
        files_b=_files(b_transitions),
        settings={"min_n": min_n, "permutations": permutations, "seed": seed},
    )


# -- inputs -----------------------------------------------------------------------------------


def _keyed(df: pl.DataFrame) -> pl.DataFrame:
    """Normalise and make ``trace`` unique across files (ids only need be unique per file)."""
    if not isinstance(df, pl.DataFrame):
        raise InputError(f"diff needs transitions frames, got {type(df).__name__}")
    df = normalize_transitions(df)
    if df.height == 0:
        return df
    return df.with_columns(
        pl.concat_str([pl.col("file").fill_null(""), pl.lit(_KEY_SEP), pl.col("trace")]).alias(
            "trace"
        )
    )


def _files(df: pl.DataFrame) -> list[str]:
    if "file" not in df.columns or df.height == 0:
        return []
    return sorted(str(f) for f in df["file"].drop_nulls().unique().to_list())


# -- time in state ----------------------------------------------------------------------------


def _fractions(df: pl.DataFrame, states: Sequence[str]) -> np.ndarray:
    """(traces x states) matrix of time-in-state fractions; states absent from a trace are 0."""
    if df.height == 0:
        return np.zeros((0, len(states)))
    tis = time_in_state(df).with_columns(pl.col("state").cast(pl.String))
    # a trace of zero duration has no fractions: it cannot say how time was spent
    traces = sorted(tis.filter(pl.col("fraction").is_not_null())["trace"].unique().to_list())
    out = np.zeros((len(traces), len(states)))
    row = {t: i for i, t in enumerate(traces)}
    col = {s: j for j, s in enumerate(states)}
    for trace, state, fraction in tis.select("trace", "state", "fraction").iter_rows():
        if trace in row and state in col and fraction is not None:
            out[row[trace], col[state]] = fraction
    return out


def _state_names(*frames: pl.DataFrame) -> list[str]:
    seen: set[str] = set()
    for df in frames:
        seen.update(str(s) for s in df["state"].cast(pl.String).unique().to_list())
    order = {s: i for i, s in enumerate(CANONICAL_STATES)}
    return sorted(seen, key=lambda s: (order.get(s, len(order)), s))


def _states(a: pl.DataFrame, b: pl.DataFrame, *, alpha: float, min_n: int) -> pl.DataFrame:
    names = _state_names(a, b)
    fa, fb = _fractions(a, names), _fractions(b, names)
    rows: list[dict[str, Any]] = []
    for j, state in enumerate(names):
        ca, cb = sig.mean_ci(fa[:, j]), sig.mean_ci(fb[:, j])
        w = sig.welch(fa[:, j], fb[:, j], min_n=min_n)
        rows.append(
            {
                "state": state,
                "a_fraction": ca.mean,
                "b_fraction": cb.mean,
                "difference": w.difference,
                "ci_low": w.ci_low,
                "ci_high": w.ci_high,
                "p_unadjusted": w.result.p_value,
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
    return _finish(rows, _STATES_SCHEMA, alpha=alpha, effect="difference", key=["state"])


# -- transitions ------------------------------------------------------------------------------


def _count_matrix(
    df: pl.DataFrame, edges: Sequence[tuple[str, str]]
) -> tuple[list[str], np.ndarray]:
    """(traces x edges) matrix of transition counts."""
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
        seen.update((str(s), str(t)) for s, t in tc.unique().iter_rows())
    order = _state_order()
    return sorted(seen, key=lambda e: (order(e[0]), order(e[1]), e))


def _state_order() -> Any:
    rank = {"INITIAL": -1, **{s: i for i, s in enumerate(CANONICAL_STATES)}, "TERMINAL": 99}
    return lambda s: rank.get(s, 98)


def _probabilities(df: pl.DataFrame) -> dict[tuple[str, str], tuple[float, float, float]]:
    if df.height == 0:
        return {}
    tp = transition_probabilities(df).with_columns(
        pl.col("source").cast(pl.String), pl.col("target").cast(pl.String)
    )
    return {
        (s, t): (p, lo, hi)
        for s, t, p, lo, hi in tp.select(
            "source", "target", "probability", "ci_low", "ci_high"
        ).iter_rows()
    }


def _transitions(
    a: pl.DataFrame,
    b: pl.DataFrame,
    *,
    alpha: float,
    min_n: int,
    permutations: int,
    seed: int,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    edges = _edge_list(a, b)
    _, ma = _count_matrix(a, edges)
    _, mb = _count_matrix(b, edges)
    pa, pb = _probabilities(a), _probabilities(b)
    sources = sorted({s for s, _ in edges}, key=_state_order())
    src_rows: list[dict[str, Any]] = []
    edge_rows: list[dict[str, Any]] = []
    for source in sources:
        idx = [j for j, (s, _) in enumerate(edges) if s == source]
        sa, sb = ma[:, idx], mb[:, idx]
        res = sig.contingency_test(sa, sb, min_n=min_n, permutations=permutations, seed=seed)
        tot_a, tot_b = sa.sum(), sb.sum()
        qa = sa.sum(axis=0) / tot_a if tot_a else np.zeros(len(idx))
        qb = sb.sum(axis=0) / tot_b if tot_b else np.zeros(len(idx))
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
                "test": res.test,
                "note": res.note,
            }
        )
        for k, j in enumerate(idx):
            target = edges[j][1]
            this_a, this_b = ma[:, [j]], mb[:, [j]]
            two_a = np.hstack([this_a, sa.sum(axis=1, keepdims=True) - this_a])
            two_b = np.hstack([this_b, sb.sum(axis=1, keepdims=True) - this_b])
            er = sig.contingency_test(
                two_a, two_b, min_n=min_n, permutations=permutations, seed=seed
            )
            a_p = pa.get((source, target), (0.0, *sig.wilson(0, int(tot_a))))
            b_p = pb.get((source, target), (0.0, *sig.wilson(0, int(tot_b))))
            edge_rows.append(
                {
                    "source": source,
                    "target": target,
                    "a_count": int(this_a.sum()),
                    "b_count": int(this_b.sum()),
                    "a_probability": float(qa[k]) if tot_a else math.nan,
                    "b_probability": float(qb[k]) if tot_b else math.nan,
                    "difference": float(qb[k] - qa[k]) if tot_a and tot_b else math.nan,
                    "a_ci_low": a_p[1],
                    "a_ci_high": a_p[2],
                    "b_ci_low": b_p[1],
                    "b_ci_high": b_p[2],
                    "p_unadjusted": er.p_value,
                    "test": er.test,
                    "note": er.note,
                }
            )
    sources_df = _finish(src_rows, _SOURCES_SCHEMA, alpha=alpha, effect="effect", key=["source"])
    edges_df = _finish(
        edge_rows, _EDGES_SCHEMA, alpha=alpha, effect="difference", key=["source", "target"]
    )
    return sources_df, edges_df


# -- dwell times ------------------------------------------------------------------------------


def _dwell_medians(df: pl.DataFrame) -> pl.DataFrame:
    """Per trace and state: median dwell (ms) and number of visits."""
    if df.height == 0:
        return pl.DataFrame(
            schema={
                "trace": pl.String,
                "state": pl.String,
                "median": pl.Float64,
                "visits": pl.UInt32,
            }
        )
    return (
        dwell_times(df)
        .with_columns(pl.col("state").cast(pl.String))
        .group_by("trace", "state")
        .agg(pl.col("dwell_ms").median().alias("median"), pl.len().alias("visits"))
    )


def _dwell(a: pl.DataFrame, b: pl.DataFrame, *, alpha: float, min_n: int) -> pl.DataFrame:
    da, db = _dwell_medians(a), _dwell_medians(b)
    rows: list[dict[str, Any]] = []
    for state in _state_names(a, b):
        xa = np.sort(da.filter(pl.col("state") == state)["median"].to_numpy())
        xb = np.sort(db.filter(pl.col("state") == state)["median"].to_numpy())
        res = sig.mann_whitney(xa, xb, min_n=min_n)
        med_a = float(np.median(xa)) if xa.size else math.nan
        med_b = float(np.median(xb)) if xb.size else math.nan
        ratio = med_b / med_a if xa.size and xb.size and med_a > 0 and med_b > 0 else math.nan
        rows.append(
            {
                "state": state,
                "a_median_ms": med_a,
                "b_median_ms": med_b,
                "log2_ratio": math.log2(ratio) if ratio == ratio else math.nan,
                "n_a": int(xa.size),
                "n_b": int(xb.size),
                "a_visits": int(da.filter(pl.col("state") == state)["visits"].sum()),
                "b_visits": int(db.filter(pl.col("state") == state)["visits"].sum()),
                "p_unadjusted": res.p_value,
                "test": res.test,
                "note": res.note,
            }
        )
    return _finish(rows, _DWELL_SCHEMA, alpha=alpha, effect="log2_ratio", key=["state"])


# -- invariants and presence ------------------------------------------------------------------


def _empty_invariants() -> pl.DataFrame:
    return pl.DataFrame(schema=_INVARIANTS_SCHEMA)


def _mine(df: pl.DataFrame) -> pl.DataFrame:
    from quicsm.model.synoptic import EventLog, mine_invariants

    if df.height == 0:
        return pl.DataFrame(schema={"kind": pl.String, "a": pl.String, "b": pl.String})
    inv = mine_invariants(EventLog.from_transitions(df))
    return inv.select(
        pl.col("kind").cast(pl.String),
        pl.col("a").cast(pl.String),
        pl.col("b").cast(pl.String),
        pl.col("support").cast(pl.Int64),
    )


def _invariants(a: pl.DataFrame, b: pl.DataFrame, *, alpha: float, min_n: int) -> pl.DataFrame:
    """Invariants mined in one group that the other group breaks, with how many traces of
    each group violate them and Fisher's exact test on those trace counts (Holm-corrected).

    Only invariants over states both groups visit are compared: an invariant about a state that
    one group never enters is reported as that state's absence, not as a broken invariant.
    """
    ia, ib = _mine(a), _mine(b)
    both = set(_state_names(a)) & set(_state_names(b))
    keys = ["kind", "a", "b"]
    seq_a, seq_b = _sequences(a), _sequences(b)
    rows: list[dict[str, Any]] = []
    for mine, other, tag in ((ia, ib, "a"), (ib, ia, "b")):
        only = mine.join(other.select(keys), on=keys, how="anti").filter(
            pl.col("a").is_in(sorted(both)) & pl.col("b").is_in(sorted(both))
        )
        for kind, x, y, support in only.select(*keys, "support").iter_rows():
            va = sum(_violates(kind, x, y, s) for s in seq_a)
            vb = sum(_violates(kind, x, y, s) for s in seq_b)
            res = sig.fisher_traces(va, len(seq_a), vb, len(seq_b), min_n=min_n)
            rows.append(
                {
                    "kind": kind,
                    "a": x,
                    "b": y,
                    "support": support,
                    "holds_in": tag,
                    "violations_a": va,
                    "violations_b": vb,
                    # share of the breaking group's traces that break it
                    "effect": (vb / len(seq_b) if tag == "a" else va / len(seq_a)),
                    "p_unadjusted": res.p_value,
                    "test": res.test,
                    "note": res.note,
                }
            )
    return _finish(rows, _INVARIANTS_SCHEMA, alpha=alpha, effect="effect", key=keys)


def _sequences(df: pl.DataFrame) -> list[list[str]]:
    """The state sequence of every trace (time order)."""
    if df.height == 0:
        return []
    seqs = (
        df.sort("trace", "time_ms", maintain_order=True)
        .group_by("trace", maintain_order=True)
        .agg(pl.col("state").cast(pl.String))
    )
    return [list(s) for s in seqs["state"].to_list()]


def _violates(kind: str, a: str, b: str, seq: Sequence[str]) -> bool:
    """Does one trace break the invariant (Synoptic's definitions, over the whole trace)?"""
    if kind == "AlwaysFollowedBy":  # every a is followed, later, by some b
        if a not in seq:
            return False
        last_a = len(seq) - 1 - seq[::-1].index(a)
        return b not in seq[last_a + 1 :]
    if kind == "NeverFollowedBy":  # no a is followed, later, by b
        if a not in seq:
            return False
        return b in seq[seq.index(a) + 1 :]
    if kind == "AlwaysPrecedes":  # every b has some a before it
        if b not in seq:
            return False
        return a not in seq[: seq.index(b)]
    raise InputError(f"unknown invariant kind {kind!r}")


def _presence(a: pl.DataFrame, b: pl.DataFrame, edges: pl.DataFrame) -> dict[str, list[str]]:
    sa, sb = set(_state_names(a)), set(_state_names(b))
    order = _state_order()
    ea = edges.filter(pl.col("a_count") > 0).select("source", "target").iter_rows()
    eb = edges.filter(pl.col("b_count") > 0).select("source", "target").iter_rows()
    set_ea, set_eb = set(ea), set(eb)

    def fmt(es: Iterable[tuple[str, str]]) -> list[str]:
        return [f"{s} → {t}" for s, t in sorted(es, key=lambda e: (order(e[0]), order(e[1])))]

    return {
        "states_only_a": sorted(sa - sb, key=order),
        "states_only_b": sorted(sb - sa, key=order),
        "edges_only_a": fmt(set_ea - set_eb),
        "edges_only_b": fmt(set_eb - set_ea),
    }


# -- shared finishing: Holm, significance, ranking --------------------------------------------


def _finish(
    rows: list[dict[str, Any]],
    schema: dict[str, pl.DataType],
    *,
    alpha: float,
    effect: str,
    key: list[str],
) -> pl.DataFrame:
    adjusted = sig.holm([r["p_unadjusted"] for r in rows])
    for r, p in zip(rows, adjusted, strict=True):
        r["p_value"] = p
        r["significant"] = p is not None and p < alpha
    df = pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
    df = df.select(list(schema))
    # rank by effect size (absolute, NaN last), then by name: the order is the same for diff(a, b)
    # and diff(b, a)
    return (
        df.with_columns(
            pl.col(effect).abs().fill_nan(None).alias("_effect"),
        )
        .sort(["_effect", *key], descending=[True] + [False] * len(key), nulls_last=True)
        .drop("_effect")
    )


_F = pl.Float64()
_I = pl.Int64()
_S = pl.String()
_B = pl.Boolean()

_STATES_SCHEMA: dict[str, pl.DataType] = {
    "state": _S,
    "a_fraction": _F,
    "b_fraction": _F,
    "difference": _F,
    "ci_low": _F,
    "ci_high": _F,
    "p_value": _F,
    "significant": _B,
    "n_a": _I,
    "n_b": _I,
    "p_unadjusted": _F,
    "test": _S,
    "note": _S,
    "a_ci_low": _F,
    "a_ci_high": _F,
    "b_ci_low": _F,
    "b_ci_high": _F,
}
_SOURCES_SCHEMA: dict[str, pl.DataType] = {
    "source": _S,
    "effect": _F,
    "p_value": _F,
    "significant": _B,
    "n_a": _I,
    "n_b": _I,
    "a_count": _I,
    "b_count": _I,
    "statistic": _F,
    "p_unadjusted": _F,
    "test": _S,
    "note": _S,
}
_EDGES_SCHEMA: dict[str, pl.DataType] = {
    "source": _S,
    "target": _S,
    "a_probability": _F,
    "b_probability": _F,
    "difference": _F,
    "p_value": _F,
    "significant": _B,
    "a_count": _I,
    "b_count": _I,
    "a_ci_low": _F,
    "a_ci_high": _F,
    "b_ci_low": _F,
    "b_ci_high": _F,
    "p_unadjusted": _F,
    "test": _S,
    "note": _S,
}
_DWELL_SCHEMA: dict[str, pl.DataType] = {
    "state": _S,
    "a_median_ms": _F,
    "b_median_ms": _F,
    "log2_ratio": _F,
    "p_value": _F,
    "significant": _B,
    "n_a": _I,
    "n_b": _I,
    "a_visits": _I,
    "b_visits": _I,
    "p_unadjusted": _F,
    "test": _S,
    "note": _S,
}
_INVARIANTS_SCHEMA: dict[str, pl.DataType] = {
    "kind": _S,
    "a": _S,
    "b": _S,
    "holds_in": _S,
    "violations_a": _I,
    "violations_b": _I,
    "effect": _F,
    "p_value": _F,
    "significant": _B,
    "support": _I,
    "p_unadjusted": _F,
    "test": _S,
    "note": _S,
}


# -- findings ---------------------------------------------------------------------------------


def _pct(x: float) -> str:
    if x != x:
        return "n/a"
    v = 100.0 * x
    if 0 < abs(v) < 1:
        return f"{v:.1f}%"
    return f"{v:.0f}%"


def _ms(x: float) -> str:
    if x != x:
        return "n/a"
    return f"{x:.0f} ms" if x >= 10 else f"{x:.1f} ms"


def _findings(d: DiffResult) -> list[Finding]:
    na, nb = d.names
    out: list[Finding] = []
    for r in d.states.filter(pl.col("significant")).iter_rows(named=True):
        out.append(
            Finding(
                "state",
                r["state"],
                f"{r['state']}: {_pct(r['a_fraction'])} → {_pct(r['b_fraction'])} of time "
                f"({sig.format_p(r['p_value'])}, n = {r['n_a']} vs {r['n_b']})",
                abs(r["difference"]),
                r["p_value"],
            )
        )
    sig_sources = set()
    for r in d.edges.filter(pl.col("significant")).iter_rows(named=True):
        sig_sources.add(r["source"])
        out.append(
            Finding(
                "edge",
                f"{r['source']} -> {r['target']}",
                f"{r['source']} → {r['target']}: {_pct(r['a_probability'])} → "
                f"{_pct(r['b_probability'])} of exits from {r['source']} "
                f"({sig.format_p(r['p_value'])}, {r['a_count']} vs {r['b_count']} transitions)",
                abs(r["difference"]),
                r["p_value"],
            )
        )
    for r in d.sources.filter(pl.col("significant")).iter_rows(named=True):
        if r["source"] in sig_sources:
            continue
        out.append(
            Finding(
                "source",
                r["source"],
                f"exits from {r['source']} are distributed differently "
                f"({r['test']}, {sig.format_p(r['p_value'])}, total variation "
                f"{r['effect']:.2f})",
                r["effect"],
                r["p_value"],
            )
        )
    for r in d.dwell.filter(pl.col("significant")).iter_rows(named=True):
        ratio = 2.0 ** r["log2_ratio"] if r["log2_ratio"] == r["log2_ratio"] else math.nan
        score = 1.0 - min(ratio, 1.0 / ratio) if ratio == ratio and ratio > 0 else 0.0
        out.append(
            Finding(
                "dwell",
                r["state"],
                f"{r['state']}: median dwell {_ms(r['a_median_ms'])} → {_ms(r['b_median_ms'])} "
                f"({sig.format_p(r['p_value'])}, n = {r['n_a']} vs {r['n_b']} traces)",
                score,
                r["p_value"],
            )
        )
    states = d.states
    for key, name, frac_col, n in (
        ("states_only_a", na, "a_fraction", d.n_a),
        ("states_only_b", nb, "b_fraction", d.n_b),
    ):
        for state in d.presence[key]:
            row = states.filter(pl.col("state") == state)
            frac = float(row[frac_col][0]) if row.height else 0.0
            out.append(
                Finding(
                    "presence",
                    state,
                    f"{state} appears only in {name} ({_pct(frac)} of time, n = {n})",
                    frac,
                )
            )
    for r in d.invariants.filter(pl.col("significant")).iter_rows(named=True):
        if r["holds_in"] == "a":
            holds, breaks, k, n_hold, n_break = na, nb, r["violations_b"], d.n_a, d.n_b
        else:
            holds, breaks, k, n_hold, n_break = nb, na, r["violations_a"], d.n_b, d.n_a
        out.append(
            Finding(
                "invariant",
                f"{r['a']} {r['kind']} {r['b']}",
                f"“{r['a']} {r['kind']} {r['b']}” holds in all {n_hold} traces of {holds}, "
                f"broken in {k} of {n_break} of {breaks} ({sig.format_p(r['p_value'])})",
                r["effect"],
                r["p_value"],
            )
        )
    kinds = {"state": 0, "edge": 1, "source": 2, "dwell": 3, "presence": 4, "invariant": 5}
    # time in state first (the paper's headline quantity), then transitions, dwell, presence and
    # invariants; by effect size within each kind
    return sorted(out, key=lambda f: (kinds[f.kind], -f.score, f.subject))
