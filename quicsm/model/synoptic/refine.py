"""Counter-example-guided refinement: split partitions until every invariant holds.

Mirrors Synoptic's ``Bisimulation.splitUntilAllInvsSatisfied`` / ``performSplits`` /
``getSplitsUnconstrained`` and ``Partition.getCandidateSplitBasedOnOutgoing`` /
``getCandidateSplitBasedOnIncoming`` (``synoptic/algorithms/Bisimulation.java``,
``synoptic/model/Partition.java``):

1. get one shortest counter-example per still-unsatisfied invariant;
2. for each (in a seeded random order), walk the path over concrete events to the first
   partition ``next`` no event can reach along it; with ``cur`` the partition before it and
   ``prev`` the one before that, the candidate splits are: ``cur``'s events whose successor is
   in ``next`` vs the rest, and ``cur``'s events whose predecessor is in ``prev`` vs the rest;
3. keep the first candidate (in a seeded random order) after which that invariant holds, and
   combine the kept splits of one partition into one multi-way split;
4. apply all kept splits (or, when none made any invariant hold, the first candidate of the
   first counter-example), and repeat with the invariants that still failed.

Splitting only removes paths, so an invariant that holds stays satisfied and is not checked
again (as in Synoptic).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from quicsm.core.errors import ModelError
from quicsm.model.synoptic.checking import failing_path, shorten, violates
from quicsm.model.synoptic.mining import Invariant
from quicsm.model.synoptic.partitions import INITIAL_ID, TERMINAL_ID, PartitionGraph

IntArray = npt.NDArray[np.int64]

#: below this many hot events the counter-example walk goes on in plain Python
_FEW = 32


def _candidate_splits(g: PartitionGraph, path: list[int]) -> list[tuple[int, IntArray, IntArray]]:
    """Synoptic's ``getSplitsUnconstrained``: (partition, events to split out, the rest)."""
    # "hot" events realise the path so far: the i-th events of the traces whose first
    # partitions are the path's; they only get fewer, and once few the walk goes on in Python
    hot: IntArray = g.starts.astype(np.int64)  # the INITIAL event's successors
    ends_hit = False  # some hot event ends its trace (its successor is the TERMINAL event)
    prev = cur = nxt = -1
    broke = False
    few: list[int] | None = None
    part, succ_of = g.part, g.nxt
    for i, p in enumerate(path):
        prev, cur, nxt = cur, nxt, p
        if i == 0:
            continue
        if p == TERMINAL_ID:
            broke = not ends_hit
            break
        if few is None and len(hot) <= _FEW:
            few = hot.tolist()
        if few is not None:
            few = [succ_of.item(e) for e in few if part.item(e) == p]
            if not few:
                broke = True
                break
            ends_hit = -1 in few
            few = [e for e in few if e >= 0]
            continue
        hot = hot[part[hot] == p]
        if len(hot) == 0:
            broke = True
            break
        succ = succ_of[hot]
        ends_hit = bool((succ < 0).any())
        hot = succ[succ >= 0]
    if not broke:
        raise ModelError(f"counter-example path {path} is realised by a concrete trace")
    out: list[tuple[int, IntArray, IntArray]] = []
    if cur < 0 or cur == INITIAL_ID:
        return out
    events = g.events_of(cur)
    # outgoing: events whose successor is in ``nxt`` (Partition.fulfillsStrong)
    to_next = g.succ_part(events) == nxt
    n_to = int(to_next.sum())
    if 0 < n_to < len(events):
        out.append((cur, events[to_next], events[~to_next]))
    if prev >= 0:
        from_prev = g.pred_part(events) == prev
        n_from = int(from_prev.sum())
        if 0 < n_from < len(events):
            out.append((cur, events[from_prev], events[~from_prev]))
    return out


def _incorporate(blocks: list[IntArray], split: IntArray) -> list[IntArray]:
    """Synoptic's ``PartitionMultiSplit.incorporate``: refine every block by ``split``."""
    inside: list[IntArray] = []
    outside: list[IntArray] = []
    for b in blocks:
        mask = np.isin(b, split, assume_unique=True)
        outside.append(b[~mask])
        inside.append(b[mask])
    return [b for b in (*outside, *inside) if len(b)]


def refine(g: PartitionGraph, invariants: list[Invariant], *, rng: np.random.Generator) -> int:
    """Split ``g`` until every invariant holds; returns the number of split rounds.

    Incremental where Synoptic recomputes: a counter-example path none of whose partitions was
    split in the last round is still the one the search would return (see
    :func:`~quicsm.model.synoptic.checking.failing_path`), so it is kept instead of searched
    again; and a trial split only rebuilds the successor lists it changes.
    """
    unsatisfied = list(invariants)
    rounds = 0
    paths: dict[Invariant, list[int]] = {}  # the last unshortened counter-example of each
    split: set[int] = set()  # partitions split in the last round
    while True:
        adj = g.adjacency()
        plabel = g.plabel
        cexs: list[tuple[Invariant, list[int]]] = []
        for inv in unsatisfied:
            full = paths.get(inv)
            if full is None or not split.isdisjoint(full):
                full = failing_path(plabel, inv, adj)
            if full is None:
                paths.pop(inv, None)
                continue
            paths[inv] = full
            cexs.append((inv, shorten(full, inv, plabel)))
        if not cexs:
            return rounds
        cexs.sort(key=lambda c: len(c[1]))  # TemporalInvariantSet.getAllCounterExamples
        unsatisfied = [inv for inv, _ in cexs]
        order = rng.permutation(len(cexs))
        todo: dict[int, list[IntArray]] = {}
        arbitrary: tuple[int, IntArray, IntArray] | None = None
        for k in order:
            inv, path = cexs[int(k)]
            cands = _candidate_splits(g, path)
            cands = [cands[int(j)] for j in rng.permutation(len(cands))]
            if arbitrary is None and cands:
                arbitrary = cands[0]
            for p, part, rest in cands:
                if not _holds_if_split(g, p, part if len(part) <= len(rest) else rest, inv):
                    continue
                if p in todo:
                    todo[p] = _incorporate(todo[p], part)
                else:
                    todo[p] = [part, rest]
                break
        if todo:
            for p, blocks in todo.items():
                g.apply_multisplit(p, blocks)
            split = set(todo)
        elif arbitrary is not None:
            p, part, rest = arbitrary
            g.apply_multisplit(p, [part, rest])
            split = {p}
        else:
            raise ModelError(
                "could not satisfy invariants: "
                + ", ".join(f"{i.kind}:{i.a}->{i.b}" for i in unsatisfied)
            )
        rounds += 1


def _holds_if_split(g: PartitionGraph, p: int, moved: IntArray, inv: Invariant) -> bool:
    """Whether ``inv`` holds once ``moved`` (events of ``p``) form a new partition.

    The graph after the split is the same whichever side gets the new id, so callers move the
    smaller side."""
    q = len(g.plabel)
    label = g.plabel[p]
    adj = g.adjacency_if_split(p, moved)

    def nodes_with(x: int) -> list[int]:
        ids = g.nodes_with_label(x)
        return [*ids, q] if x == label else ids

    return not violates(adj, [*g.plabel, label], inv, nodes_with)
