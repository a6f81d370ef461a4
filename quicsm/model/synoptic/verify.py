"""Checks of a finished model (node/edge tables) against a log and its invariants.

Used by the tests and the comparison with Synoptic, and usable on any model with the
:mod:`quicsm.model.tables` node/edge schemas: :func:`rejected_traces` lists the traces the model
cannot replay, :func:`violated_invariants` the invariants some model path breaks.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from quicsm.model.synoptic.checking import Checker
from quicsm.model.synoptic.log import INITIAL, TERMINAL, EventLog
from quicsm.model.synoptic.mining import KIND_NAMES, Invariant


class _FrameGraph:
    """The minimal graph interface :class:`Checker` reads, built from node/edge tables."""

    def __init__(self, nodes: pl.DataFrame, edges: pl.DataFrame, names: Sequence[str]) -> None:
        ids = nodes.get_column("id").to_list()
        if sorted(ids) != list(range(len(ids))) or len(ids) < 2:
            raise ValueError("node ids must be 0..n-1 with 0 = INITIAL and 1 = TERMINAL")
        code = {name: i for i, name in enumerate(names)}
        state = dict(zip(ids, nodes.get_column("state").to_list(), strict=True))
        self.plabel = [code[state[i]] for i in range(len(ids))]
        self.alive = [True] * len(ids)
        self._adj: list[list[int]] = [[] for _ in ids]
        for s, t in edges.select("source", "target").iter_rows():
            self._adj[s].append(t)

    def adjacency(self) -> list[list[int]]:
        return self._adj

    def nodes_with_label(self, label: int) -> list[int]:
        return [u for u, lab in enumerate(self.plabel) if lab == label]


def _names(log_labels: Sequence[str]) -> tuple[str, ...]:
    return (*log_labels, INITIAL, TERMINAL)


def rejected_traces(nodes: pl.DataFrame, edges: pl.DataFrame, log: EventLog) -> list[int]:
    """Indexes of the log's distinct traces that no INITIAL→TERMINAL path of the model spells."""
    state = dict(
        zip(nodes.get_column("id").to_list(), nodes.get_column("state").to_list(), strict=True)
    )
    succ: dict[int, dict[str, set[int]]] = {}
    for s, t in edges.select("source", "target").iter_rows():
        succ.setdefault(s, {}).setdefault(state[t], set()).add(t)
    bad: list[int] = []
    for t in range(log.n_unique):
        current = {0}
        for name in log.trace(t):
            current = {v for u in current for v in succ.get(u, {}).get(name, ())}
            if not current:
                break
        if not any(1 in succ.get(u, {}).get(TERMINAL, ()) for u in current):
            bad.append(t)
    return bad


def violated_invariants(
    nodes: pl.DataFrame, edges: pl.DataFrame, invariants: pl.DataFrame, labels: Sequence[str]
) -> pl.DataFrame:
    """The rows of ``invariants`` (kind, a, b, support) that the model violates."""
    names = _names(labels)
    graph = _FrameGraph(nodes, edges, names)
    code = {name: i for i, name in enumerate(names)}
    kinds = {name: i for i, name in enumerate(KIND_NAMES)}
    invs = [
        Invariant(kinds[k], code[a], code[b], s)
        for k, a, b, s in invariants.select("kind", "a", "b", "support").iter_rows()
    ]
    checker = Checker(invs, len(labels))
    keep = [checker.violates(graph, inv) for inv in invs]  # type: ignore[arg-type]
    return invariants.filter(pl.Series(keep, dtype=pl.Boolean))
