"""Invariants mined in one group that the other group breaks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from quicsm.compare.families.schema import TEST, VERDICT, F, I, S
from quicsm.compare.keys import Strata, shift, state_names
from quicsm.core.errors import InputError
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
    a: pl.DataFrame, b: pl.DataFrame, st: Strata | None, *, min_n: int, permutations: int
) -> list[dict[str, Any]]:
    """Invariants mined in one group that the other group breaks, with how many traces of
    each group violate them and Fisher's exact test on those trace counts (within strata: the
    stratified test on each trace's 0/1 violation, i.e. Cochran-Mantel-Haenszel).

    Only invariants over states both groups visit are compared (the dummy INITIAL and
    TERMINAL included): an invariant about a state that one group never enters is reported as
    that state's absence, not as a broken invariant.
    """
    ia, ib = _mine(a), _mine(b)
    both = (set(state_names(a)) & set(state_names(b))) | {"INITIAL", "TERMINAL"}
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
                res = shift(
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


SCHEMA: dict[str, pl.DataType] = {
    "kind": S,
    "a": S,
    "b": S,
    "holds_in": S,
    "violations_a": I,
    "violations_b": I,
    "effect": F,
    **VERDICT,
    "support": I,
    **TEST,
}
