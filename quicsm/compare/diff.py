"""Compare two groups of traces: what changed in time-in-state, transitions, dwell times and
invariants, and is it more than noise?

``diff(a, b)`` takes two transitions frames (:data:`quicsm.core.frames.TRANSITIONS_SCHEMA`) and
returns
a :class:`DiffResult` whose frames are ranked by effect size. The statistics themselves come from
:mod:`quicsm.stats.descriptive` (time in state, transition counts and probabilities, dwell times);
the tests
from :mod:`quicsm.stats.significance`:

- time-in-state fraction per state: mean of per-trace fractions, Welch's t-test;
- one transition probability (source -> target): the beta-binomial z of
  :mod:`quicsm.stats.overdispersion` on every transition of every trace, with the intra-trace
  correlation pooled over all transitions of both groups, referred to its permutations over
  traces while the traces are few (``FEW_TRACES``), else to Student's t; Fisher's test on the
  effective counts when they are too small for the z;
- outgoing transitions per source state: G-test on the pooled counts (Rao-Scott corrected) when
  every expected count is at least 5, else a permutation test over traces;
- dwell time per state: random-effects test of the mean log dwell (within-trace variance from
  the visits, between-trace variance pooled over states and groups);
- invariants (AlwaysFollowedBy, NeverFollowedBy, AlwaysPrecedes) mined in each group that do not
  hold in the other (Fisher's exact test on the traces breaking them), and states/edges seen
  in only one group (facts, tested as time shares and transitions);
- outcomes (per-trace numbers such as completion time, per cell such as a scenario), when given.

Whenever the traces can be split between the groups in at most ``permutations`` ways
(5 vs 5 traces: 252), the tests on one number per trace (time shares, outcomes) are exact
permutation tests over traces instead.

With ``strata`` (a stratum per trace, e.g. its scenario), every test compares each trace only
with traces of its own stratum (:func:`quicsm.stats.significance.stratified_shift`, one number
per trace), so that groups that ran different mixes of conditions are compared like with like.

**Two families** (:data:`POLICY`): the *primary* family, fixed before looking (time share per
state and every outcome per stratum; ``primary=`` names others), is Holm-adjusted; every
other test is *exploratory*, Benjamini-Hochberg-adjusted. ``p_value`` is the p-value adjusted
within the row's ``family``, ``p_unadjusted`` the test's own; "significant" means adjusted
p < ``alpha``. ``primary_significant`` is what ``--fail-on-significant`` acts on. Every row
carries ``mde``: the smallest difference (in the row's effect units) its test would detect
with 80% power at the level it faced in its family.

Differences are always ``b - a``. A group with fewer than ``min_n`` traces gets no p-value, and
the reason is stated (``"n=2 < 3: no test"``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
from scipy import stats as sps

from quicsm.core.errors import InputError
from quicsm.core.frames import KEY_DTYPE, normalize_transitions
from quicsm.core.states import CANONICAL_STATES
from quicsm.stats import overdispersion as od
from quicsm.stats import significance as sig
from quicsm.stats.descriptive import (
    dwell_times,
    time_in_state,
    transition_counts,
)
from quicsm.stats.intervals import cluster_wilson

__all__ = [
    "POLICY",
    "DiffResult",
    "Finding",
    "diff",
    "fractions",
    "keyed_transitions",
    "split_key",
]

_KEY_SEP = "\x1f"

#: the error-control policy, stated wherever significance is reported
POLICY = (
    "primary tests (time share per state, outcomes per stratum) under Holm, leaving out tests "
    "that cannot reach significance with these traces (Tarone); every other test exploratory, "
    "under Benjamini-Hochberg"
)

#: families of tests, in the order of the findings
FAMILIES = ("outcomes", "states", "sources", "edges", "dwell", "invariants")


@dataclass(frozen=True)
class Finding:
    """One significant result, with a score in [0, 1] used for ranking and the table row it
    comes from (its words are a view: :func:`quicsm.render.findings.finding_sentence`)."""

    kind: str  # outcome | state | edge | source | dwell | invariant
    subject: str
    score: float
    p_value: float | None = None
    #: "primary" (Holm) or "exploratory" (Benjamini-Hochberg)
    family: str = "exploratory"
    row: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass
class DiffResult:
    """Everything ``quicsm diff`` reports about group B relative to group A (``b - a``).

    A result holds frames; its views (JSON, Markdown, the terminal table) are the functions of
    :mod:`quicsm.render.diff_format`.
    """

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
    outcomes: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=_OUTCOMES_SCHEMA))
    #: labels the comparison was stratified by (empty: not stratified)
    within: tuple[str, ...] = ()
    #: stratum -> (traces in A, traces in B); strata with none in one group were left out
    strata: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: how the groups were formed and matched (from :class:`quicsm.compare.grouping.Comparison`)
    notes: list[str] = field(default_factory=list)
    #: what the comparison cannot separate, shown above the findings
    caveats: list[str] = field(default_factory=list)

    def frames(self) -> tuple[pl.DataFrame, ...]:
        """The tested frames, in :data:`FAMILIES` order (the outgoing distributions of the
        source states are described, not tested: their transitions are)."""
        return (self.outcomes, self.states, self.edges, self.dwell, self.invariants)

    # -- conclusions ------------------------------------------------------------------------
    @property
    def any_significant(self) -> bool:
        """Anything significant, primary or exploratory."""
        return any(f.height and bool(f["significant"].any()) for f in self.frames())

    @property
    def primary_significant(self) -> bool:
        """Anything of the primary family significant (what ``--fail-on-significant`` acts
        on by default)."""
        return any(
            f.height and bool(f.filter(pl.col("family") == "primary")["significant"].any())
            for f in self.frames()
        )

    @property
    def n_tests(self) -> int:
        """Tests run, in both families."""
        return sum(f.height - f["p_value"].null_count() for f in self.frames())

    def untested(self) -> tuple[int, int]:
        """(tests not run, tests in total) over every family."""
        frames = self.frames()
        total = sum(f.height for f in frames)
        return sum(f["p_value"].null_count() for f in frames), total

    def untested_reasons(self) -> list[str]:
        """The distinct reasons tests were not run, e.g. ``["n=2 < 3: no test"]``."""
        reasons = {
            str(n)
            for f in self.frames()
            for n in f.filter(pl.col("p_value").is_null())["note"].to_list()
        }
        return sorted(reasons)

    def stratified_left_out(self) -> list[str]:
        """Strata with traces in one group only (they take no part in the tests)."""
        return [s for s, (na, nb) in self.strata.items() if not (na and nb)]

    def findings(self) -> list[Finding]:
        """The significant results, ranked: primary before exploratory, then outcomes, time
        in state, transitions, dwell and invariants, by effect size within each kind."""
        return _findings(self)


def diff(
    a_transitions: pl.DataFrame,
    b_transitions: pl.DataFrame,
    *,
    alpha: float = 0.05,
    min_n: int = sig.MIN_N,
    permutations: int = 4999,
    seed: int = 0,
    names: tuple[str, str] = ("A", "B"),
    invariants: bool = True,
    strata: Mapping[tuple[str, str], str] | None = None,
    within: Sequence[str] = (),
    outcomes: pl.DataFrame | None = None,
    primary: Sequence[str] | None = None,
) -> DiffResult:
    """Compare group B against group A; see the module docstring for the tests used.

    ``strata`` maps ``(file, trace)`` to the trace's stratum (``within`` names the labels it
    was made of, for the record); ``outcomes`` is a frame ``file, trace, cell, metric, value``
    of per-trace outcomes (e.g. ``completion_ms`` per ``scenario`` cell).
    """
    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha must be between 0 and 1, got {alpha}")
    if min_n < 2:
        raise InputError(f"min_n must be at least 2, got {min_n}")
    a = keyed_transitions(a_transitions)
    b = keyed_transitions(b_transitions)
    n_a, n_b = a["trace"].n_unique(), b["trace"].n_unique()
    for name, n in zip(names, (n_a, n_b), strict=True):
        if n == 0:
            raise InputError(f"group {name} has no traces: nothing to compare")
    st = _Strata.make(strata, a, b)
    opts = {"min_n": min_n, "permutations": permutations}
    families = {
        "outcomes": _outcomes(outcomes, a, b, st, **opts),
        "states": _states(a, b, st, **opts),
        **_transitions(a, b, st, seed=seed, **opts),
        "dwell": _dwell(a, b, st, **opts),
        "invariants": _invariants(a, b, st, **opts) if invariants else [],
    }
    family, exploratory = _adjust(families, alpha=alpha, primary=parse_primary(primary))
    return DiffResult(
        states=_frame(families["states"], _STATES_SCHEMA, "difference", ["state"]),
        sources=_frame(families["sources"], _SOURCES_SCHEMA, "effect", ["source"]),
        edges=_frame(families["edges"], _EDGES_SCHEMA, "difference", ["source", "target"]),
        dwell=_frame(families["dwell"], _DWELL_SCHEMA, "log2_ratio", ["state"]),
        invariants=_frame(families["invariants"], _INVARIANTS_SCHEMA, "effect", ["kind", "a", "b"]),
        outcomes=_frame(families["outcomes"], _OUTCOMES_SCHEMA, "change", ["metric", "cell"]),
        presence=_presence(a, b, families["edges"]),
        alpha=alpha,
        names=names,
        n_a=n_a,
        n_b=n_b,
        files_a=_files(a_transitions),
        files_b=_files(b_transitions),
        settings={
            "min_n": min_n,
            "permutations": permutations,
            "seed": seed,
            "policy": POLICY,
            "family": family,
            "exploratory": exploratory,
            "primary": list(parse_primary(primary)),
        },
        within=tuple(within),
        strata=st.counts if st is not None else {},
    )


# -- inputs -----------------------------------------------------------------------------------


def _key_expr() -> pl.Expr:
    return pl.concat_str(
        [
            pl.col("file").cast(KEY_DTYPE).fill_null(""),
            pl.lit(_KEY_SEP),
            pl.col("trace").cast(KEY_DTYPE),
        ]
    )


def keyed_transitions(df: pl.DataFrame) -> pl.DataFrame:
    """Make ``trace`` unique across files (ids only need be unique per file), then normalise:
    keying first keeps two files' traces of the same id apart."""
    if not isinstance(df, pl.DataFrame):
        raise InputError(f"diff needs transitions frames, got {type(df).__name__}")
    if "trace" in df.columns:
        if "file" not in df.columns:
            df = df.with_columns(pl.lit(None, pl.String).alias("file"))
        df = df.with_columns(_key_expr().alias("trace"))
    return normalize_transitions(df)


def split_key(key: str) -> tuple[str, str]:
    """``(file, trace)`` of a key made by :func:`keyed_transitions`."""
    file, _, trace = key.partition(_KEY_SEP)
    return file, trace


def _files(df: pl.DataFrame) -> list[str]:
    if "file" not in df.columns or df.height == 0:
        return []
    return sorted(str(f) for f in df["file"].drop_nulls().unique().to_list())


@dataclass
class _Strata:
    """The stratum of every trace key of both groups."""

    of: dict[str, str]
    counts: dict[str, tuple[int, int]]

    @classmethod
    def make(
        cls, strata: Mapping[tuple[str, str], str] | None, a: pl.DataFrame, b: pl.DataFrame
    ) -> _Strata | None:
        if strata is None:
            return None
        of = {f"{f or ''}{_KEY_SEP}{t}": str(s) for (f, t), s in strata.items()}
        counts: dict[str, list[int]] = {}
        for g, df in enumerate((a, b)):
            for key in df["trace"].unique().to_list():
                s = of.setdefault(key, "(no stratum)")
                counts.setdefault(s, [0, 0])[g] += 1
        return cls(of, {s: (c[0], c[1]) for s, c in sorted(counts.items())})

    def labels(self, keys: Sequence[str]) -> list[str]:
        return [self.of[k] for k in keys]


def _shift(
    xa: np.ndarray,
    keys_a: Sequence[str],
    xb: np.ndarray,
    keys_b: Sequence[str],
    st: _Strata | None,
    *,
    min_n: int,
    permutations: int,
) -> sig.WelchResult:
    """One number per trace, B against A: within strata when stratified."""
    if st is None:
        return sig.mean_shift(xa, xb, min_n=min_n, permutations=permutations)
    return sig.stratified_shift(
        xa, st.labels(keys_a), xb, st.labels(keys_b), min_n=min_n, permutations=permutations
    )


# -- outcomes ---------------------------------------------------------------------------------


def _outcomes(
    outcomes: pl.DataFrame | None,
    a: pl.DataFrame,
    b: pl.DataFrame,
    st: _Strata | None,
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
        _key_expr().alias("key"),
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
                "se": _se(w),
                "n_a": int(xa.size),
                "n_b": int(xb.size),
                "p_unadjusted": w.result.p_value,
                "p_min": w.result.p_min,
                "test": w.result.test,
                "note": w.result.note,
                "example_a": _example(part, keys_a, low=False),
                "example_b": _example(part, keys_b, low=rel < 0 if rel == rel else True),
            }
        )
    return rows


def _se(w: sig.WelchResult) -> float:
    """The standard error behind a 95% interval of a difference (its half-width / 1.96)."""
    return (w.ci_high - w.ci_low) / (2 * 1.959963984540054)


def _example(part: pl.DataFrame, keys: set[str], *, low: bool) -> str:
    """The trace of the group closest to its group's median value (a typical example)."""
    g = part.filter(pl.col("key").is_in(list(keys))).sort("value", "key")
    if g.height == 0:
        return ""
    return str(g["key"][g.height // 2]).replace(_KEY_SEP, "#", 1)


# -- time in state ----------------------------------------------------------------------------


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


def _state_names(*frames: pl.DataFrame) -> list[str]:
    seen: set[str] = set()
    for df in frames:
        seen.update(str(s) for s in df["state"].cast(pl.String).unique().to_list())
    order = {s: i for i, s in enumerate(CANONICAL_STATES)}
    return sorted(seen, key=lambda s: (order.get(s, len(order)), s))


def _states(
    a: pl.DataFrame, b: pl.DataFrame, st: _Strata | None, *, min_n: int, permutations: int
) -> list[dict[str, Any]]:
    names = _state_names(a, b)
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
            w = _shift(fa[:, j], ka, fb[:, j], kb, st, min_n=min_n, permutations=permutations)
        rows.append(
            {
                "state": state,
                "a_fraction": ca.mean,
                "b_fraction": cb.mean,
                "difference": w.difference,
                "ci_low": w.ci_low,
                "ci_high": w.ci_high,
                "se": _se(w),
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
        seen.update((str(s), str(t)) for s, t in tc.unique().iter_rows())
    order = _state_order()
    return sorted(seen, key=lambda e: (order(e[0]), order(e[1]), e))


def _state_order() -> Any:
    rank = {"INITIAL": -1, **{s: i for i, s in enumerate(CANONICAL_STATES)}, "TERMINAL": 99}
    return lambda s: rank.get(s, 98)


def _transitions(
    a: pl.DataFrame,
    b: pl.DataFrame,
    st: _Strata | None,
    *,
    min_n: int,
    permutations: int,
    seed: int,
) -> dict[str, list[dict[str, Any]]]:
    edges = _edge_list(a, b)
    ka, ma = _count_matrix(a, edges)
    kb, mb = _count_matrix(b, edges)
    sources = sorted({s for s, _ in edges}, key=_state_order())
    # within strata, the traces vary around their own stratum's probabilities: the
    # dispersion is pooled over every (stratum, group) as over the groups without strata
    parts = [(ma, mb)]
    if st is not None:
        la, lb = np.array(st.labels(ka)), np.array(st.labels(kb))
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
            mde = math.nan
            er: sig.TestResult | None
            if st is None:
                er, mde = _edge_test(
                    this_a[:, 0],
                    row_a,
                    this_b[:, 0],
                    row_b,
                    disp.rho(j),
                    min_n=min_n,
                    permutations=permutations,
                    seed=seed,
                )
            else:
                er, mde = _stratified_edge_test(
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
                w = _shift(
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
                    "se": mde,
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
        return cls(od.pooled_rho(own), prior, own)

    def rho(self, j: int) -> float:
        # never below the pooled value: a transition's own few traces may say it is more
        # heterogeneous than the others, not (noisily) less
        return max(self.pooled, od.shrunk_rho(self.own[j], self.pooled, self.prior))


def _stratified_edge_test(
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
    """One transition probability within strata: each stratum's beta-binomial difference,
    combined with inverse-variance weights (under the null), so every transition of every
    stratum counts and a trace is compared only with traces of its own stratum. Strata whose
    counts are too sparse for the normal approximation are left out (and counted in the
    note); None when every stratum is (the caller then tests one number per trace)."""
    n_a, n_b = int(np.count_nonzero(ma)), int(np.count_nonzero(mb))
    note = sig.too_few(n_a, n_b, min_n=min_n)
    if note:
        return sig.TestResult("none", None, note=note), math.nan
    num = den = 0.0
    used = sparse = 0
    for s in sorted(set(la.tolist()) & set(lb.tolist())):
        ia, ib = la == s, lb == s
        if not (ma[ia] > 0).any() or not (mb[ib] > 0).any():
            continue  # the source is left in one group only in this stratum: nothing to compare
        shift = od.proportion_shift(ya[ia], ma[ia], yb[ib], mb[ib], rho)
        if shift.se_null != shift.se_null:
            continue  # one outcome in both groups of the stratum: nothing could differ
        if shift.p_value is None or shift.se_null <= 0:
            sparse += 1  # too few effective transitions here for the normal approximation
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
    p = float(2.0 * sps.norm.sf(abs(z)))
    why = f"ρ {rho:.2f}, {used} strat{'um' if used == 1 else 'a'}" + (
        f" ({sparse} too sparse, left out)" if sparse else ""
    )
    return sig.TestResult("beta-binomial (stratified)", p, z, why), 1.0 / math.sqrt(den)


def _edge_test(
    ya: np.ndarray,
    ma: np.ndarray,
    yb: np.ndarray,
    mb: np.ndarray,
    rho: float,
    *,
    min_n: int,
    permutations: int,
    seed: int,
) -> tuple[sig.TestResult, float]:
    """One transition probability, B against A: the overdispersed (beta-binomial) z with the
    pooled intra-trace correlation. With few traces (at most ``od.FEW_TRACES`` in a group) the
    z is referred to its permutation distribution over traces, exact whatever the traces'
    heterogeneity; with more, to the normal / Satterthwaite t. When the effective counts are
    too small for the normal approximation: Fisher's test on the effective counts (or a
    permutation test of the counts over traces). Returns the test and the smallest
    difference it would detect with 80% power."""
    n_a, n_b = int(np.count_nonzero(ma)), int(np.count_nonzero(mb))
    note = sig.too_few(n_a, n_b, min_n=min_n)
    if note:
        return sig.TestResult("none", None, note=note), math.nan
    shift = od.proportion_shift(ya, ma, yb, mb, rho)
    mde = shift.se_null
    if shift.p_value is not None and shift.se_null != shift.se_null:
        # every exit of the source, in both groups, takes this transition (or none does):
        # whichever way the traces fell into the groups, nothing could differ
        return sig.TestResult("identical", 1.0, 0.0, "one outcome in both groups", 1.0), mde
    why = f"ρ {rho:.2f}, effective transitions {shift.effective[0]:.0f} vs " + (
        f"{shift.effective[1]:.0f}"
    )
    va, vb = ma > 0, mb > 0
    if shift.p_value is not None and min(int(va.sum()), int(vb.sum())) <= od.FEW_TRACES:
        # few traces: the same z, referred to its distribution over the splits of the traces
        # (exact whatever their heterogeneity). Not for sparse counts: there the z rests on
        # the few traces holding the events, and groups whose traces differ in their numbers
        # of exits would make it differ between the groups with the same probability
        units = np.vstack(
            [od.trace_units(ya[va], ma[va], rho), od.trace_units(yb[vb], mb[vb], rho)]
        )
        res = sig.permutation_over_traces(
            units,
            int(va.sum()),
            od.abs_z_statistics,
            permutations=permutations,
            seed=seed,
            name="permuted z",
        )
        return sig.TestResult(res.test, res.p_value, shift.z, why, res.p_min), mde
    if shift.p_value is not None:
        return sig.TestResult("beta-binomial", shift.p_value, shift.z, why), mde
    few = f"fewer than {od.MIN_EFFECTIVE:g} expected in a group"
    counts = od.effective_counts(ya, ma, yb, mb, rho)
    if counts is not None:
        # Fisher's exact test on the counts each group is worth once the clustering is
        # accounted for (each group's counts divided by its design effect)
        (ka, na), (kb, nb) = counts
        res = sig.fisher_traces(ka, na, kb, nb, min_n=1)
        why = f"ρ {rho:.2f}, effective transitions {na} vs {nb}; {few}"
        return sig.TestResult("fisher (effective)", res.p_value, res.statistic, why, res.p_min), mde
    two_a = np.column_stack([ya, ma - ya])[ma > 0]
    two_b = np.column_stack([yb, mb - yb])[mb > 0]
    res = sig.permutation_g(two_a, two_b, permutations=permutations, seed=seed)
    return sig.TestResult(
        res.test, res.p_value, res.statistic, f"{res.note}; {few}" if res.note else few, res.p_min
    ), mde


# -- dwell times ------------------------------------------------------------------------------


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


def _dwell(
    a: pl.DataFrame, b: pl.DataFrame, st: _Strata | None, *, min_n: int, permutations: int
) -> list[dict[str, Any]]:
    da, db = _dwell_medians(a), _dwell_medians(b)
    rows: list[dict[str, Any]] = []
    names = _state_names(a, b)
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
            labels = st.labels(keys_a) + st.labels(keys_b)
            r = sig.ranks_within(np.concatenate([xa, xb]), labels)
            res = _shift(
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


def _invariants(
    a: pl.DataFrame, b: pl.DataFrame, st: _Strata | None, *, min_n: int, permutations: int
) -> list[dict[str, Any]]:
    """Invariants mined in one group that the other group breaks, with how many traces of
    each group violate them and Fisher's exact test on those trace counts (within strata: the
    stratified test on each trace's 0/1 violation, i.e. Cochran-Mantel-Haenszel).

    Only invariants over states both groups visit are compared (the dummy INITIAL and
    TERMINAL included): an invariant about a state that one group never enters is reported as
    that state's absence, not as a broken invariant.
    """
    ia, ib = _mine(a), _mine(b)
    both = (set(_state_names(a)) & set(_state_names(b))) | {"INITIAL", "TERMINAL"}
    keys = ["kind", "a", "b"]
    seq_a, seq_b = _sequences(a), _sequences(b)
    rows: list[dict[str, Any]] = []
    for mine, other, tag in ((ia, ib, "a"), (ib, ia, "b")):
        only = mine.join(other.select(keys), on=keys, how="anti").filter(
            pl.col("a").is_in(sorted(both)) & pl.col("b").is_in(sorted(both))
        )
        for kind, x, y, support in only.select(*keys, "support").iter_rows():
            bad_a = np.array([_violates(kind, x, y, q) for _, q in seq_a], dtype=float)
            bad_b = np.array([_violates(kind, x, y, q) for _, q in seq_b], dtype=float)
            va, vb = int(bad_a.sum()), int(bad_b.sum())
            if st is None:
                res = sig.fisher_traces(va, len(seq_a), vb, len(seq_b), min_n=min_n)
            else:
                res = _shift(
                    bad_a,
                    [k for k, _ in seq_a],
                    bad_b,
                    [k for k, _ in seq_b],
                    st,
                    min_n=min_n,
                    permutations=permutations,
                ).result
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
                    "p_min": res.p_min,
                    "test": res.test,
                    "note": res.note,
                }
            )
    return rows


def _sequences(df: pl.DataFrame) -> list[tuple[str, list[str]]]:
    """Every trace's key and its observed chain ``INITIAL, states in time order, TERMINAL``
    (the dummy nodes the mined invariants speak of)."""
    if df.height == 0:
        return []
    seqs = (
        df.sort("trace", "time_ms", maintain_order=True)
        .group_by("trace", maintain_order=True)
        .agg(pl.col("state").cast(pl.String))
    )
    return [
        (str(k), ["INITIAL", *s, "TERMINAL"])
        for k, s in zip(seqs["trace"].to_list(), seqs["state"].to_list(), strict=True)
    ]


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


def _presence(
    a: pl.DataFrame, b: pl.DataFrame, edges: list[dict[str, Any]]
) -> dict[str, list[str]]:
    sa, sb = set(_state_names(a)), set(_state_names(b))
    order = _state_order()
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


#: the primary family when none is named: the quantities fixed before looking
DEFAULT_PRIMARY = ("outcomes", "states")


def _subjects(name: str, r: Mapping[str, Any]) -> set[str]:
    """The names a row answers to in a ``--primary`` item ``FAMILY:SUBJECT``."""
    if name == "outcomes":
        return {r["metric"], f"{r['metric']}@{r['cell']}"}
    if name in ("states", "dwell"):
        return {r["state"]}
    if name == "sources":
        return {r["source"]}
    if name == "edges":
        return {f"{r['source']}->{r['target']}", f"{r['source']}→{r['target']}"}
    return {f"{r['a']} {r['kind']} {r['b']}"}


def parse_primary(items: Sequence[str] | None) -> tuple[str, ...]:
    """Check a primary-family specification: each item ``FAMILY`` or ``FAMILY:SUBJECT``
    (``states:Recovery``, ``edges:Recovery->CongestionAvoidance``,
    ``outcomes:completion_ms@jitter``)."""
    if not items:
        return DEFAULT_PRIMARY
    out = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            family = part.split(":", 1)[0]
            if family not in FAMILIES:
                raise InputError(
                    f"--primary {part!r}: the family must be one of {', '.join(FAMILIES)} "
                    "(optionally FAMILY:SUBJECT, e.g. states:Recovery)"
                )
            out.append(part)
    return tuple(out) or DEFAULT_PRIMARY


def _is_primary(name: str, r: Mapping[str, Any], primary: Sequence[str]) -> bool:
    for item in primary:
        family, _, subject = item.partition(":")
        if family == name and (
            not subject
            or subject.replace(" ", "") in {x.replace(" ", "") for x in _subjects(name, r)}
        ):
            return True
    return False


def _adjust(
    families: Mapping[str, list[dict[str, Any]]], *, alpha: float, primary: Sequence[str]
) -> tuple[int, int]:
    """Two families (:data:`POLICY`): the primary tests under Holm, the exploratory ones under
    Benjamini-Hochberg, each over the tests that could reach significance (Tarone's rule for
    discrete tests; for BH, Gilbert's). Rows sharing a ``hypothesis`` key are one test seen
    twice (the two exits of a source with two exits): they count once. Sets every row's
    ``family``, ``p_value`` (adjusted within its family), ``significant`` and ``mde``; returns
    the sizes of the two families."""
    rows = [(name, r) for name in FAMILIES for r in families[name]]
    first = [r for name, r in rows if _is_primary(name, r, primary)]
    rest = [r for name, r in rows if not _is_primary(name, r, primary)]
    k_primary = _adjust_family(first, "primary", sig.holm_tarone, alpha=alpha)
    k_explore = _adjust_family(rest, "exploratory", sig.bh_tarone, alpha=alpha)
    # what each row could have detected at the level it faced: a single discovery of its
    # family (Holm: α/K; BH: α/m); none at all when its traces cannot reach significance
    for group, k in ((first, k_primary), (rest, k_explore)):
        for r in group:
            r["level"] = alpha / max(1, k)
            r["mde"] = od.detectable(r.get("se", math.nan), alpha=r["level"])
            if r["p_unadjusted"] is not None and "cannot reach" in (r["note"] or ""):
                r["mde"] = math.inf
    return k_primary, k_explore


def _adjust_family(
    rows: list[dict[str, Any]],
    family: str,
    method: Callable[..., tuple[list[float | None], list[bool]]],
    *,
    alpha: float,
) -> int:
    """Adjust one family in place; returns the number of distinct tests inside it."""
    keys: list[Any] = [r.get("hypothesis") or id(r) for r in rows]
    order = list(dict.fromkeys(keys))
    test_p: dict[Any, float | None] = {}
    test_min: dict[Any, float] = {}
    for key, r in zip(keys, rows, strict=True):
        p, pm = r["p_unadjusted"], r["p_min"]
        if p is not None:
            q = test_p.get(key)
            test_p[key] = p if q is None else min(q, p)
            test_min[key] = min(test_min.get(key, pm), pm)
        else:
            test_p.setdefault(key, None)
            test_min.setdefault(key, pm)
    adjusted, member = method([test_p[k] for k in order], [test_min[k] for k in order], alpha=alpha)
    by_key = {k: (p, inside) for k, p, inside in zip(order, adjusted, member, strict=True)}
    for key, r in zip(keys, rows, strict=True):
        p, inside = by_key[key]
        r["family"] = family
        if r["p_unadjusted"] is None:
            p = None
        elif not inside:
            p = p if p is not None else 1.0
            why = f"cannot reach significance (smallest possible p {r['p_min']:.3g})"
            r["note"] = f"{r['note']}; {why}" if r["note"] else why
        r["p_value"] = p
        r["significant"] = inside and p is not None and p < alpha
    return sum(member)


def _frame(
    rows: list[dict[str, Any]], schema: dict[str, pl.DataType], effect: str, key: list[str]
) -> pl.DataFrame:
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
    "family": _S,
    "mde": _F,
    "se": _F,
    "level": _F,
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
    "family": _S,
    "mde": _F,
    "se": _F,
    "level": _F,
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
    "family": _S,
    "mde": _F,
    "se": _F,
    "level": _F,
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
    "family": _S,
    "mde": _F,
    "se": _F,
    "level": _F,
    "n_a": _I,
    "n_b": _I,
    "a_visits": _I,
    "b_visits": _I,
    "p_unadjusted": _F,
    "test": _S,
    "note": _S,
}
_OUTCOMES_SCHEMA: dict[str, pl.DataType] = {
    "metric": _S,
    "cell": _S,
    "a_mean": _F,
    "b_mean": _F,
    "difference": _F,
    "change": _F,
    "ci_low": _F,
    "ci_high": _F,
    "p_value": _F,
    "significant": _B,
    "family": _S,
    "mde": _F,
    "se": _F,
    "level": _F,
    "n_a": _I,
    "n_b": _I,
    "p_unadjusted": _F,
    "p_min": _F,
    "test": _S,
    "note": _S,
    "example_a": _S,
    "example_b": _S,
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
    "family": _S,
    "mde": _F,
    "se": _F,
    "level": _F,
    "support": _I,
    "p_unadjusted": _F,
    "test": _S,
    "note": _S,
}


# -- findings ---------------------------------------------------------------------------------


#: outcome labels as people say them
_OUTCOME_NAMES = {"completion_ms": "completion time", "throughput_mbit": "throughput"}


def outcome_name(metric: str) -> str:
    """``completion_ms`` -> ``completion time`` (other labels as they are)."""
    return _OUTCOME_NAMES.get(metric, metric)


def _findings(d: DiffResult) -> list[Finding]:
    out: list[Finding] = []

    def add(kind: str, subject: str, score: float, r: Mapping[str, Any]) -> None:
        out.append(Finding(kind, subject, score, r["p_value"], r["family"], r))

    for r in d.outcomes.filter(pl.col("significant")).iter_rows(named=True):
        cell = "" if r["cell"] in ("", "all") else f" in {r['cell']}"
        size = min(1.0, abs(r["change"])) if r["change"] == r["change"] else 0.0
        add("outcome", f"{r['metric']}{cell}", size, r)
    for r in d.states.filter(pl.col("significant")).iter_rows(named=True):
        add("state", r["state"], abs(r["difference"]), r)
    sig_sources = set()
    for r in d.edges.filter(pl.col("significant")).iter_rows(named=True):
        sig_sources.add(r["source"])
        add("edge", f"{r['source']} -> {r['target']}", abs(r["difference"]), r)
    for r in d.sources.filter(pl.col("significant")).iter_rows(named=True):
        if r["source"] not in sig_sources:
            add("source", r["source"], r["effect"], r)
    for r in d.dwell.filter(pl.col("significant")).iter_rows(named=True):
        x = r["log2_ratio"]
        # 1 - min(ratio, 1/ratio), written so that extreme ratios cannot overflow
        add("dwell", r["state"], 1.0 - 2.0 ** (-abs(x)) if x == x else 0.0, r)
    for r in d.invariants.filter(pl.col("significant")).iter_rows(named=True):
        add("invariant", f"{r['a']} {r['kind']} {r['b']}", r["effect"], r)
    kinds = {"outcome": 0, "state": 1, "edge": 2, "source": 3, "dwell": 4, "invariant": 5}
    # primary findings first, then exploratory; within each, outcomes first (what users
    # feel), then time in state (the paper's headline quantity), transitions, dwell and
    # invariants; by effect size within each kind
    return sorted(out, key=lambda f: (f.family != "primary", kinds[f.kind], -f.score, f.subject))
