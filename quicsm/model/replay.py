"""Replay traces through a model to give each visit a node, so time can be told per node.

When a state is split into several nodes (Synoptic refines states to satisfy invariants), the
fraction of time in the *state* no longer says how long traces stay in each *node*. A trace
the model accepts follows a path from INITIAL to TERMINAL; when that accepting path is unique,
each visit belongs to exactly one node and the time per node is exact. Synoptic's graphs may
offer two successors with the same label — only the rest of the trace tells which one leads to
TERMINAL — so the replay looks ahead: a backward pass marks, for every visit, the nodes from
which the rest of its trace can still be spelled to TERMINAL; a forward pass from INITIAL then
follows the only successor that is both an edge and so marked. If some trace has no accepting
path, or two (the model does not say which node a visit was in), :func:`node_times` returns
``None`` and the diagram shows each split state's total instead.

Node sets are bit masks (models of at most 63 nodes; larger ones are not attributed), and the
passes advance all traces together, one position at a time, with numpy arrays over visits.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import polars as pl

from quicsm.stats.descriptive import NODE_LABELS, Visits

NODE_TIMES_SCHEMA: Final[dict[str, pl.DataType]] = {
    "id": pl.Int64(),
    "seconds": pl.Float64(),
    "fraction": pl.Float64(),
}

#: largest model whose node sets fit in one uint64 mask
MAX_NODES: Final[int] = 63
_TERMINAL_BIT: Final[np.uint64] = np.uint64(1 << 1)  # node id 1


def _masks(nodes: pl.DataFrame, edges: pl.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
    """Successor mask of every node and node mask of every label, or None if not applicable."""
    code = {name: i for i, name in enumerate(NODE_LABELS)}
    ids = nodes.get_column("id").to_list()
    states = nodes.get_column("state").to_list()
    n = len(ids)
    if n > MAX_NODES or sorted(ids) != list(range(n)) or any(s not in code for s in states):
        return None
    succ = np.zeros(n, dtype=np.uint64)
    for s, t in edges.select("source", "target").iter_rows():  # edges of the model, not rows
        succ[s] |= np.uint64(1 << t)
    label_mask = np.zeros(len(NODE_LABELS), dtype=np.uint64)
    for i, state in zip(ids, states, strict=True):
        label_mask[code[state]] |= np.uint64(1 << i)
    return succ, label_mask


def _by_position(starts: np.ndarray, tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Visits grouped by their position in the trace: a permutation and group bounds."""
    position = np.arange(len(tid), dtype=np.int64) - starts[tid]
    order = np.argsort(position, kind="stable")
    return order, np.concatenate([[0], np.cumsum(np.bincount(position))])


def replay(visits: Visits, nodes: pl.DataFrame, edges: pl.DataFrame) -> np.ndarray | None:
    """The node id of every visit (in :class:`Visits` row order), or None when some trace has
    no accepting path or more than one, or the model is too large to attribute."""
    masks = _masks(nodes, edges)
    if masks is None:
        return None
    succ, label_mask = masks
    f = visits.frame
    tid = f.get_column("tid").to_numpy().astype(np.int64)
    first = f.get_column("first").to_numpy()
    last = f.get_column("last").to_numpy()
    label = f.get_column("code").to_numpy().astype(np.int64) + 1
    direct = _one_node_per_label(succ, label_mask, label, first, last)
    if direct is not None:
        return direct
    return _passes(succ, label_mask, tid, label, first, last)


def _passes(
    succ: np.ndarray,
    label_mask: np.ndarray,
    tid: np.ndarray,
    label: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
) -> np.ndarray | None:
    """The backward and forward passes of :func:`replay`."""
    n = len(label)
    starts, ends = np.flatnonzero(first), np.flatnonzero(last)
    candidates = label_mask[label]
    one = np.uint64(1)
    # backward: live[i] = nodes with visit i's label from which the rest can reach TERMINAL
    live = np.zeros(n, dtype=np.uint64)
    order, bounds = _by_position_from_end(ends, tid)
    for j in range(len(bounds) - 1):
        rows = order[bounds[j] : bounds[j + 1]]
        ahead = np.full(len(rows), _TERMINAL_BIT) if j == 0 else live[rows + 1]
        cand = candidates[rows]
        alive = np.zeros(len(rows), dtype=np.uint64)
        for u in range(len(succ)):  # a pass per model node, not per row
            bit = one << np.uint64(u)
            ok = ((cand & bit) != 0) & ((succ[u] & ahead) != 0)
            alive |= np.where(ok, bit, np.uint64(0))
        live[rows] = alive
    # forward: from INITIAL, follow the only live successor
    node = np.empty(n, dtype=np.int64)
    current = np.zeros(len(starts), dtype=np.int64)
    order, bounds = _by_position(starts, tid)
    for j in range(len(bounds) - 1):
        rows = order[bounds[j] : bounds[j + 1]]
        t = tid[rows]
        options = succ[current[t]] & live[rows]
        single = (options != 0) & ((options & (options - np.uint64(1))) == 0)
        if not single.all():
            return None  # no accepting path, or two
        nxt = np.log2(options.astype(np.float64)).astype(np.int64)
        node[rows] = nxt
        current[t] = nxt
    return node


def _one_node_per_label(
    succ: np.ndarray, label_mask: np.ndarray, label: np.ndarray, first: np.ndarray, last: np.ndarray
) -> np.ndarray | None:
    """The replay when each label of the visits has one node (the observed model): each
    visit's node is its label's, provided every step (INITIAL to the first visit, visit to
    visit, the last to TERMINAL) is an edge; then that path is the only one and accepting, as
    the passes of :func:`replay` would find. None when a label has several nodes or a step is
    not an edge (the passes decide)."""
    masks = label_mask[np.flatnonzero(np.bincount(label, minlength=len(label_mask)))]
    if not ((masks != 0) & ((masks & (masks - np.uint64(1))) == 0)).all():
        return None
    node_of = np.zeros(len(label_mask), dtype=np.int64)
    single = (label_mask != 0) & ((label_mask & (label_mask - np.uint64(1))) == 0)
    node_of[single] = np.log2(label_mask[single].astype(np.float64)).astype(np.int64)
    node = node_of[label]
    previous = np.empty_like(node)
    previous[1:] = node[:-1]
    previous[first] = 0  # INITIAL
    one = np.uint64(1)
    if not ((succ[previous] >> node.astype(np.uint64)) & one).all():
        return None
    if not (succ[node[last]] & _TERMINAL_BIT).all():
        return None
    return node


def _by_position_from_end(ends: np.ndarray, tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Visits grouped by their distance from the end of their trace (0 = last)."""
    distance = ends[tid] - np.arange(len(tid), dtype=np.int64)
    order = np.argsort(distance, kind="stable")
    return order, np.concatenate([[0], np.cumsum(np.bincount(distance))])


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
