"""k-tails coarsening: greedily merge same-label partitions while every invariant still holds.

Mirrors Synoptic's ``Bisimulation.mergePartitions`` and ``KTails.kEquals``
(``synoptic/algorithms/Bisimulation.java``, ``synoptic/algorithms/KTails.java``): scan pairs
``(p, q)`` in node order; when they are k-equivalent (for ``k = 1``: same label; for larger
``k``: same set of label strings of length up to ``k`` from the node, as ``getNodeKStrings``)
and not blacklisted, merge ``q`` into ``p``; keep the merge and rescan from the start if every
invariant still holds, otherwise undo it and blacklist the pair (the blacklist is kept for the
whole run, as in Synoptic).

Where Synoptic re-runs the model checker for every invariant after each tentative merge, we
check incrementally: the graph satisfied every invariant before the merge and only paths through
the merged node are new, so NeverFollowedBy needs two searches from that node
(:meth:`Checker.nfby_through`); AlwaysPrecedes / AlwaysFollowedBy are checked one label group at
a time, the group that failed last first, stopping at the first failure.
"""

from __future__ import annotations

from quicsm.model.synoptic.checking import Adjacency, Checker
from quicsm.model.synoptic.mining import Invariant
from quicsm.model.synoptic.options import tail_length
from quicsm.model.synoptic.partitions import PartitionGraph


def kstrings(adj: Adjacency, plabel: list[int], p: int, k: int) -> frozenset[tuple[int, ...]]:
    """Label strings of length 1..k of the paths starting at ``p`` (``getNodeKStrings``)."""
    out: set[tuple[int, ...]] = set()
    frontier: set[tuple[tuple[int, ...], int]] = {((plabel[p],), p)}
    for _ in range(k):
        nxt: set[tuple[tuple[int, ...], int]] = set()
        for s, u in frontier:
            out.add(s)
            if len(s) < k:
                for v in adj[u]:
                    nxt.add(((*s, plabel[v]), v))
        frontier = nxt
    return frozenset(out)


def coarsen(g: PartitionGraph, invariants: list[Invariant], *, k: int = 1) -> int:
    """Merge partitions of ``g`` in place (see the module docstring); returns merges done."""
    k = tail_length(k)
    checker = Checker(invariants, g.n_labels)
    blacklist: set[tuple[int, int]] = set()
    merges = 0
    while True:
        merged = False
        nodes = list(g.order)
        adj = g.adjacency() if k > 1 else []
        for p in nodes:
            for q in nodes:
                if p == q or g.plabel[p] != g.plabel[q]:
                    continue
                if (p, q) in blacklist or (q, p) in blacklist:
                    continue
                if k > 1 and kstrings(adj, g.plabel, p, k) != kstrings(adj, g.plabel, q, k):
                    continue
                pos = g.order.index(q)
                undo = g.merge(p, q)
                if not checker.nfby_through(g, p) and checker.satisfied(g, skip_nfby=True):
                    merged = True
                    merges += 1
                    break
                g.unmerge(p, q, undo, pos)
                blacklist.add((p, q))
            if merged:
                break
        if not merged:
            g.settle()
            return merges
