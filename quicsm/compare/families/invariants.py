"""Invariants mined in one group that the other group breaks."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from quicsm.compare.families.clustered import proportion_test, stratified_proportion_test
from quicsm.compare.families.schema import TEST, VERDICT, F, I, S
from quicsm.compare.keys import Strata, se_of, shift, state_names
from quicsm.core.errors import InputError
from quicsm.stats import overdispersion as od
from quicsm.stats import significance as sig


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


def invariants(
    a: pl.DataFrame,
    b: pl.DataFrame,
    st: Strata | None,
    by_length: Strata | None,
    *,
    min_n: int,
    permutations: int,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Invariants mined in one group that the other group breaks, each compared as a rate per
    opportunity to break it (:func:`opportunities`), so that a longer trace does not break
    more by construction:

    - "a NeverFollowedBy b" (a ≠ b): per *return* to ``a`` (the stretch from a visit of ``a``
      to the next one; the last visit's stretch is cut short by the end of the recording,
      censored like a trace's last transition, and not counted), broken when ``b`` is visited
      inside it; when fewer than ``min_n`` traces of a group return to ``a``, per trace that
      visits ``a``, as below. The test is the one of a transition probability
      (:func:`quicsm.compare.families.clustered.proportion_test`: the beta-binomial z over
      traces, permuted within length strata when the groups' lengths differ);
    - the others ("AlwaysFollowedBy", which only the end of a recording can break;
      "AlwaysPrecedes"; "a NeverFollowedBy a", a state visited at most once) have one
      opportunity per trace that visits the antecedent (``a``; ``b`` for AlwaysPrecedes): the
      share of those traces that break it, Fisher's exact test (within strata ``by_length``,
      the given strata split by length when the groups' lengths differ: the stratified test
      of each trace's 0/1, i.e. Cochran-Mantel-Haenszel; no test, and the note says so, when
      no stratum holds such traces of both groups).

    ``st`` are the given strata (None: none), ``by_length`` the strata the per-trace units are
    compared within (None: pooled).

    Only invariants over states both groups visit are compared (the dummy INITIAL and
    TERMINAL included): an invariant about a state that one group never enters is reported as
    that state's absence, not as a broken invariant.
    """
    ia, ib = _mine(a), _mine(b)
    both = (set(state_names(a)) & set(state_names(b))) | {"INITIAL", "TERMINAL"}
    keys = ["kind", "a", "b"]
    seq_a, seq_b = _sequences(a), _sequences(b)
    keys_a, keys_b = [k for k, _ in seq_a], [k for k, _ in seq_b]
    lengths = None
    if by_length is not None and by_length is not st:
        lengths = (by_length.labels(keys_a), by_length.labels(keys_b, b=True))
    rows: list[dict[str, Any]] = []
    for mine, other, tag in ((ia, ib, "a"), (ib, ia, "b")):
        only = mine.join(other.select(keys), on=keys, how="anti").filter(
            pl.col("a").is_in(sorted(both)) & pl.col("b").is_in(sorted(both))
        )
        for kind, x, y, support in only.select(*keys, "support").iter_rows():
            ya, ma = _opportunities(kind, x, y, seq_a)
            yb, mb = _opportunities(kind, x, y, seq_b)
            per_return = kind == "NeverFollowedBy" and x != y
            if per_return and min(np.count_nonzero(ma), np.count_nonzero(mb)) < min_n:
                # too few traces return to the state: per trace that visits it, the only unit
                per_return = False
                ya, ma = _opportunities(kind, x, y, seq_a, returns=False)
                yb, mb = _opportunities(kind, x, y, seq_b, returns=False)
            if per_return:
                res = _per_return(
                    (ya, yb),
                    (ma, mb),
                    (keys_a, keys_b),
                    st,
                    lengths,
                    min_n=min_n,
                    permutations=permutations,
                    seed=seed,
                )
            else:
                res = _per_trace(ya, ma, keys_a, yb, mb, keys_b, by_length, min_n, permutations)
            breaking = (yb, mb) if tag == "a" else (ya, ma)
            rows.append(
                {
                    "kind": kind,
                    "a": x,
                    "b": y,
                    "support": support,
                    "holds_in": tag,
                    # traces that break it anywhere (what "holds in every trace" is about)
                    "violations_a": sum(_violates(kind, x, y, q) for _, q in seq_a),
                    "violations_b": sum(_violates(kind, x, y, q) for _, q in seq_b),
                    "unit": f"return to {x}"
                    if per_return
                    else "trace with " + (y if kind == "AlwaysPrecedes" else x),
                    "broken_a": int(ya.sum()),
                    "opportunities_a": int(ma.sum()),
                    "broken_b": int(yb.sum()),
                    "opportunities_b": int(mb.sum()),
                    # the breaking group's rate per opportunity
                    "effect": float(breaking[0].sum() / breaking[1].sum())
                    if breaking[1].sum()
                    else math.nan,
                    "se": res[1],
                    "df": res[2],
                    "p_unadjusted": res[0].p_value,
                    "p_min": res[0].p_min,
                    "test": res[0].test,
                    "note": res[0].note,
                }
            )
    return rows


def _per_return(
    y: tuple[np.ndarray, np.ndarray],
    m: tuple[np.ndarray, np.ndarray],
    keys: tuple[list[str], list[str]],
    st: Strata | None,
    lengths: tuple[list[str], list[str]] | None,
    *,
    min_n: int,
    permutations: int,
    seed: int,
) -> tuple[sig.TestResult, float, float]:
    """Returns that visit the forbidden state, out of every return, B against A: the test of
    a clustered proportion, with the intra-trace correlation of both groups' returns (within
    the given strata when there are)."""
    (ya, yb), (ma, mb) = y, m
    rho = od.pooled_rho([od.row_moments(ya, ma), od.row_moments(yb, mb)])
    if st is None:
        return proportion_test(
            ya,
            ma,
            yb,
            mb,
            rho,
            min_n=min_n,
            permutations=permutations,
            seed=seed,
            lengths=lengths,
            unit="returns",
        )
    la = np.array(st.labels(keys[0]), dtype=object)
    lb = np.array(st.labels(keys[1], b=True), dtype=object)
    res, se = stratified_proportion_test(ya, ma, la, yb, mb, lb, rho, min_n=min_n)
    if res is not None:
        return res, se, math.inf
    # sparse in every stratum: one number per trace, its share of its returns
    va, vb = ma > 0, mb > 0
    w = shift(
        ya[va] / ma[va],
        [k for k, v in zip(keys[0], va, strict=True) if v],
        yb[vb] / mb[vb],
        [k for k, v in zip(keys[1], vb, strict=True) if v],
        st,
        min_n=min_n,
        permutations=permutations,
    )
    return w.result, se_of(w), math.inf


def _per_trace(
    ya: np.ndarray,
    ma: np.ndarray,
    keys_a: list[str],
    yb: np.ndarray,
    mb: np.ndarray,
    keys_b: list[str],
    by_length: Strata | None,
    min_n: int,
    permutations: int,
) -> tuple[sig.TestResult, float, float]:
    """The share of the traces visiting the antecedent that break the invariant."""
    va, vb = ma > 0, mb > 0
    if by_length is None:
        res = sig.fisher_traces(
            int(ya.sum()), int(va.sum()), int(yb.sum()), int(vb.sum()), min_n=min_n
        )
        return res, math.nan, math.inf
    w = shift(
        ya[va],
        [k for k, v in zip(keys_a, va, strict=True) if v],
        yb[vb],
        [k for k, v in zip(keys_b, vb, strict=True) if v],
        by_length,
        min_n=min_n,
        permutations=permutations,
    )
    return w.result, se_of(w), math.inf


def _opportunities(
    kind: str, a: str, b: str, seqs: Sequence[tuple[str, list[str]]], *, returns: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Per trace: the opportunities it broke the invariant at, and its opportunities (for
    "a NeverFollowedBy b", a ≠ b: its returns to ``a``, or with ``returns=False`` one per
    trace that visits ``a``)."""
    y, m = np.zeros(len(seqs)), np.zeros(len(seqs))
    for i, (_, seq) in enumerate(seqs):
        if kind == "NeverFollowedBy" and a != b and returns:
            at = [j for j, s in enumerate(seq) if s == a]
            m[i] = len(at) - 1 if at else 0
            y[i] = sum(b in seq[j + 1 : k] for j, k in zip(at[:-1], at[1:], strict=True))
        elif (b if kind == "AlwaysPrecedes" else a) in seq:
            m[i] = 1
            y[i] = float(_violates(kind, a, b, seq))
    return y, m


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


SCHEMA: dict[str, pl.DataType] = {
    "kind": S,
    "a": S,
    "b": S,
    "holds_in": S,
    "violations_a": I,
    "violations_b": I,
    "effect": F,
    "unit": S,
    "broken_a": I,
    "opportunities_a": I,
    "broken_b": I,
    "opportunities_b": I,
    **VERDICT,
    "support": I,
    **TEST,
}
