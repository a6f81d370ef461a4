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
from quicsm.model.synoptic.checking import counterexample, violates
from quicsm.model.synoptic.mining import Invariant
from quicsm.model.synoptic.partitions import INITIAL_ID, TERMINAL_ID, PartitionGraph

IntArray = npt.NDArray[np.int64]


def _candidate_splits(g: PartitionGraph, path: list[int]) -> list[tuple[int, IntArray]]:
    """Synoptic's ``getSplitsUnconstrained``: (partition, events to split out) pairs."""
    hot: IntArray = g.starts.astype(np.int64)  # the INITIAL event's successors
    ends_hit = False  # some hot event ends its trace (its successor is the TERMINAL event)
    prev = cur = nxt = -1
    broke = False
    for i, p in enumerate(path):
        prev, cur, nxt = cur, nxt, p
        if i == 0:
            continue
        if p == TERMINAL_ID:
            broke = not ends_hit
            break
        hot = hot[g.part[hot] == p]
        if len(hot) == 0:
            broke = True
            break
        succ = g.nxt[hot]
        ends_hit = bool((succ < 0).any())
        hot = succ[succ >= 0]
    if not broke:
        raise ModelError(f"counter-example path {path} is realised by a concrete trace")
    out: list[tuple[int, IntArray]] = []
    if cur < 0 or cur == INITIAL_ID:
        return out
    events = g.events_of(cur)
    # outgoing: events whose successor is in ``nxt`` (Partition.fulfillsStrong)
    to_next = g.succ_part(events) == nxt
    n_to = int(to_next.sum())
    if 0 < n_to < len(events):
        out.append((cur, events[to_next]))
    if prev >= 0:
        from_prev = g.pred_part(events) == prev
        n_from = int(from_prev.sum())
        if 0 < n_from < len(events):
            out.append((cur, events[from_prev]))
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
    """Split ``g`` until every invariant holds; returns the number of split rounds."""
    unsatisfied = list(invariants)
    rounds = 0
    while True:
        adj = g.adjacency()
        cexs: list[tuple[Invariant, list[int]]] = []
        for inv in unsatisfied:
            path = counterexample(g, inv, adj)
            if path is not None:
                cexs.append((inv, path))
        if not cexs:
            return rounds
        cexs.sort(key=lambda c: len(c[1]))  # TemporalInvariantSet.getAllCounterExamples
        unsatisfied = [inv for inv, _ in cexs]
        order = rng.permutation(len(cexs))
        todo: dict[int, list[IntArray]] = {}
        arbitrary: tuple[int, IntArray] | None = None
        for k in order:
            inv, path = cexs[int(k)]
            cands = _candidate_splits(g, path)
            cands = [cands[int(j)] for j in rng.permutation(len(cands))]
            if arbitrary is None and cands:
                arbitrary = cands[0]
            for p, split in cands:
                events = g.events_of(p)
                rest = np.setdiff1d(events, split, assume_unique=True)
                # the graph after the split is the same whichever side gets the new id, so
                # the trial moves the smaller side
                trial = g.count_if_split(p, split if len(split) <= len(rest) else rest)
                holds = not violates(g.adjacency(trial), [*g.plabel, g.plabel[p]], inv)
                if holds:
                    if p in todo:
                        todo[p] = _incorporate(todo[p], split)
                    else:
                        todo[p] = [split, rest]
                    break
        if todo:
            for p, blocks in todo.items():
                g.apply_multisplit(p, blocks)
        elif arbitrary is not None:
            p, split = arbitrary
            events = g.events_of(p)
            g.apply_multisplit(p, [split, np.setdiff1d(events, split, assume_unique=True)])
        else:
            raise ModelError(
                "could not satisfy invariants: "
                + ", ".join(f"{i.kind}:{i.a}->{i.b}" for i in unsatisfied)
            )
        rounds += 1
