"""Replay traces through a model to give each visit a node, so time can be told per node.

When a state is split into several nodes (Synoptic refines states to satisfy invariants), the
fraction of time in the *state* no longer says how long traces stay in each *node*. If the
model is deterministic — from every node, at most one edge into nodes of each label — every
trace it accepts follows exactly one path, so each visit belongs to exactly one node and the
per-node time is exact. Otherwise (plain k-tails with k > 1 can be nondeterministic) visits
cannot be attributed without the inference's own bookkeeping, and :func:`node_times` returns
``None``; the diagram then shows the state's total on each of its nodes.

The replay advances all traces together, one position at a time (numpy arrays over visits).
"""

from __future__ import annotations

from typing import Final

import numpy as np
import polars as pl

from quicsm.stats import NODE_LABELS, TERMINAL, Visits

NODE_TIMES_SCHEMA: Final[dict[str, pl.DataType]] = {
    "id": pl.Int64(),
    "seconds": pl.Float64(),
    "fraction": pl.Float64(),
}

_AMBIGUOUS: Final[int] = -2
_MISSING: Final[int] = -1


def _step_table(nodes: pl.DataFrame, edges: pl.DataFrame) -> np.ndarray | None:
    """``table[node, label]`` = the successor of ``node`` with ``label`` (-1 none), or None when
    some node has two successors with the same label."""
    code = {name: i for i, name in enumerate(NODE_LABELS)}
    ids = nodes.get_column("id").to_numpy()
    states = nodes.get_column("state").to_list()
    if any(s not in code for s in states) or sorted(ids.tolist()) != list(range(len(ids))):
        return None
    label = np.empty(len(ids), dtype=np.int64)
    label[ids] = [code[s] for s in states]
    src = edges.get_column("source").to_numpy().astype(np.int64)
    tgt = edges.get_column("target").to_numpy().astype(np.int64)
    table = np.full((len(ids), len(NODE_LABELS)), _MISSING, dtype=np.int64)
    key = src * len(NODE_LABELS) + label[tgt]
    if np.unique(key).size != key.size:
        return None
    table[src, label[tgt]] = tgt
    return table


def replay(visits: Visits, nodes: pl.DataFrame, edges: pl.DataFrame) -> np.ndarray | None:
    """The node id of every visit (in :class:`Visits` row order), or None if the model is
    nondeterministic or does not accept every trace."""
    table = _step_table(nodes, edges)
    if table is None:
        return None
    f = visits.frame
    tid = f.get_column("tid").to_numpy().astype(np.int64)
    label = f.get_column("code").to_numpy().astype(np.int64) + 1  # state code -> label code
    n = len(tid)
    starts = np.flatnonzero(f.get_column("first").to_numpy())
    position = np.arange(n, dtype=np.int64) - starts[tid]
    order = np.argsort(position, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(position))])
    current = np.zeros(len(starts), dtype=np.int64)  # every trace starts at INITIAL (id 0)
    node = np.empty(n, dtype=np.int64)
    for j in range(len(bounds) - 1):
        rows = order[bounds[j] : bounds[j + 1]]
        t = tid[rows]
        nxt = table[current[t], label[rows]]
        if (nxt < 0).any():
            return None
        node[rows] = nxt
        current[t] = nxt
    if (table[current, NODE_LABELS.index(TERMINAL)] < 0).any():
        return None
    return node


def node_times(visits: Visits, nodes: pl.DataFrame, edges: pl.DataFrame) -> pl.DataFrame | None:
    """Time per node: ``id, seconds, fraction`` (pooled over traces, like the state fractions;
    null for INITIAL and TERMINAL), or None when visits cannot be attributed to nodes."""
    node = replay(visits, nodes, edges)
    if node is None:
        return None
    n_nodes = nodes.height
    counts = np.bincount(node, minlength=n_nodes)
    expected = np.zeros(n_nodes, dtype=np.int64)
    ids = nodes.get_column("id").to_numpy()
    expected[ids] = nodes.get_column("events").to_numpy()
    if not np.array_equal(counts[2:], expected[2:]):
        return None  # the model's own assignment differs: do not pretend
    dwell = visits.frame.get_column("dwell_ms").to_numpy()
    ms = np.bincount(node, weights=dwell, minlength=n_nodes)
    total = float(dwell.sum())
    out = pl.DataFrame(
        {"id": np.arange(n_nodes, dtype=np.int64), "seconds": ms / 1000.0, "ms": ms},
    ).with_columns(
        pl.when(pl.col("id") >= 2).then(pl.col("seconds")).alias("seconds"),
        pl.when((pl.col("id") >= 2) & pl.lit(total > 0))
        .then(pl.col("ms") / (total if total > 0 else 1.0))
        .alias("fraction"),
    )
    return out.select(list(NODE_TIMES_SCHEMA)).cast(NODE_TIMES_SCHEMA)  # type: ignore[arg-type]
