"""The incremental parts of refinement agree with recomputing from scratch.

Refinement keeps successor lists up to date instead of rebuilding them, evaluates trial splits
on the rows they change, and keeps a counter-example whose partitions were not split. Each is
checked here against the plain computation it replaces.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.model.synoptic import EventLog
from quicsm.model.synoptic import partitions as partitions_module
from quicsm.model.synoptic.checking import failing_path, violates
from quicsm.model.synoptic.mining import AFBY, mine
from quicsm.model.synoptic.partitions import TERMINAL_ID, PartitionGraph, initial_graph

traces_st = st.lists(
    st.lists(st.sampled_from("abcd"), min_size=1, max_size=8), min_size=1, max_size=8
)


def _rebuilt(g: PartitionGraph) -> list[list[int]]:
    n = len(g.plabel)
    return [np.flatnonzero(row).tolist() for row in g.count[:n, :n] > 0]


def _random_split(g: PartitionGraph, rnd: np.random.Generator) -> tuple[int, np.ndarray] | None:
    splittable = [p for p in g.order if len(g.events_of(p)) > 1]
    if not splittable:
        return None
    p = int(rnd.choice(splittable))
    events = g.events_of(p)
    take = rnd.random(len(events)) < 0.5
    if take.all() or not take.any():
        take[0] = not take[0]
    return p, events[take]


@settings(max_examples=150, deadline=None)
@given(traces_st, st.integers(0, 2**16), st.booleans())
def test_successor_lists_follow_splits_merges_and_trials(
    traces: list[list[str]], seed: int, small: bool
) -> None:
    g = initial_graph(EventLog.from_sequences(traces))
    rnd = np.random.default_rng(seed)
    saved = partitions_module._SMALL
    # both ways of evaluating a trial: in Python (few events) and with arrays
    partitions_module._SMALL = 10**9 if small else -1
    try:
        for _ in range(6):
            chosen = _random_split(g, rnd)
            if chosen is None:
                break
            p, moved = chosen
            trial = g.adjacency_if_split(p, moved)
            g.split_off(p, moved)
            assert g.adjacency() == _rebuilt(g)
            assert trial == g.adjacency()
    finally:
        partitions_module._SMALL = saved
    # merges and their undo
    by_label: dict[int, list[int]] = {}
    for q in g.order:
        by_label.setdefault(g.plabel[q], []).append(q)
    for ids in by_label.values():
        if len(ids) >= 2:
            before = [list(row) for row in g.adjacency()]
            pos = g.order.index(ids[1])
            undo = g.merge(ids[0], ids[1])
            assert g.adjacency() == _rebuilt(g)
            g.unmerge(ids[0], ids[1], undo, pos)
            assert g.adjacency() == before == _rebuilt(g)
    for lab, ids in g.by_label.items():
        assert ids == [u for u, x in enumerate(g.plabel) if x == lab]


def _lexmin_failing_path(g: PartitionGraph, inv_kind: int, a: int, b: int) -> list[int] | None:
    """The lexicographically smallest shortest failing path, by distances to the goal and a
    greedy walk (independent of the search order of :func:`failing_path`)."""
    from quicsm.model.synoptic.checking import _TABLES

    table = _TABLES[inv_kind]
    fail = 1 if inv_kind == AFBY else 2
    adj, plabel = g.adjacency(), g.plabel

    def nxt(u: int, s: int) -> list[tuple[int, int]]:
        if u == TERMINAL_ID:
            return []
        return [(v, table[4 * s + (plabel[v] == a) + 2 * (plabel[v] == b)]) for v in adj[u]]

    states = [(u, s) for u in range(len(adj)) for s in range(3)]
    radj: dict[tuple[int, int], list[tuple[int, int]]] = {x: [] for x in states}
    for u, s in states:
        for y in nxt(u, s):
            radj[y].append((u, s))
    dist = {(TERMINAL_ID, fail): 0}
    queue = deque([(TERMINAL_ID, fail)])
    while queue:
        y = queue.popleft()
        for x in radj[y]:
            if x not in dist:
                dist[x] = dist[y] + 1
                queue.append(x)
    lab0 = plabel[0]
    x = (0, table[(lab0 == a) + 2 * (lab0 == b)])
    if x not in dist:
        return None
    path = [x[0]]
    while x != (TERMINAL_ID, fail):
        x = min(y for y in nxt(*x) if dist.get(y) == dist[x] - 1)
        path.append(x[0])
    return path


@settings(max_examples=150, deadline=None)
@given(traces_st, st.integers(0, 2**16))
def test_counterexamples_are_lexicographically_smallest_and_survive_other_splits(
    traces: list[list[str]], seed: int
) -> None:
    log = EventLog.from_sequences(traces)
    invariants = mine(log)
    g = initial_graph(log)
    rnd = np.random.default_rng(seed)
    for _ in range(4):
        chosen = _random_split(g, rnd)
        if chosen is None:
            break
        g.split_off(*chosen)
    paths = {}
    for inv in invariants:
        path = failing_path(g.plabel, inv, g.adjacency())
        assert path == _lexmin_failing_path(g, inv.kind, inv.a, inv.b)
        assert (path is not None) == violates(g.adjacency(), g.plabel, inv)
        if path is not None:
            paths[inv] = path
    chosen = _random_split(g, rnd)
    if chosen is None:
        return
    g.split_off(*chosen)
    for inv, path in paths.items():
        if chosen[0] not in path:  # what refinement relies on to keep the path
            assert failing_path(g.plabel, inv, g.adjacency()) == path
