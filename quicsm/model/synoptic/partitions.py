"""The partition graph: a partitioning of the log's concrete events, and the edges it implies.

Mirrors Synoptic's ``PartitionGraph`` / ``Partition`` (``synoptic/model/``): partition ``P`` has
an edge to ``Q`` when some event in ``P`` is immediately followed by an event in ``Q``. Every
trace starts at the dummy INITIAL event and ends at the dummy TERMINAL event; they have their
own partitions, ids 0 and 1. The initial graph (:func:`initial_graph`) has one partition per
event type, as Synoptic's ``partitionByLabels``.

Where Synoptic keeps object graphs (events point to their partitions, partitions hold sets of
events, transitions are recomputed on demand) we keep flat arrays: ``part[i]`` is the partition
of event ``i`` of the deduplicated log, and ``count[p, q]`` is the number of distinct-trace
events of ``p`` whose successor is in ``q`` (INITIAL's entry counts trace starts). Splits update
``count`` in time linear in the moved events; merges are two row/column additions.

The successor lists every search reads (:meth:`PartitionGraph.adjacency`) are kept up to date
with ``count``: a split or merge touches only the rows of the partitions whose edges changed, and
a trial split (:meth:`PartitionGraph.adjacency_if_split`) shares every untouched row with the
current graph, so evaluating one costs time linear in the moved events, not in the graph.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from quicsm.model.synoptic.log import EventLog

IntArray = npt.NDArray[np.int64]

INITIAL_ID = 0
TERMINAL_ID = 1

#: trial splits of at most this many events are evaluated in plain Python
_SMALL = 48


class PartitionGraph:
    """Mutable partition graph over the events of an :class:`EventLog`."""

    def __init__(self, log: EventLog, part: IntArray, plabel: Sequence[int]) -> None:
        self.log = log
        self.n_labels = len(log.labels)
        #: label code of INITIAL / TERMINAL partitions
        self.initial_label = self.n_labels
        self.terminal_label = self.n_labels + 1
        n_events = len(log.codes)
        self.part = part.astype(np.int64, copy=True)
        self.plabel: list[int] = list(plabel)
        #: partitions in Synoptic's node order (insertion order; merged-away ones removed)
        self.order: list[int] = list(range(len(self.plabel)))
        self.alive: list[bool] = [True] * len(self.plabel)
        starts = log.offsets[:-1]
        ends = log.offsets[1:] - 1
        self.starts = starts
        self.nxt = np.arange(1, n_events + 1, dtype=np.int64)
        self.nxt[ends] = -1
        self.prv = np.arange(-1, n_events - 1, dtype=np.int64)
        self.prv[starts] = -1
        # sorted event indices of every partition (INITIAL/TERMINAL have none)
        order = np.argsort(self.part, kind="stable")
        bounds = np.searchsorted(self.part[order], np.arange(len(self.plabel) + 1))
        self.members: list[IntArray] = [
            order[bounds[i] : bounds[i + 1]] for i in range(len(self.plabel))
        ]
        self._mask = np.zeros(n_events, dtype=np.bool_)  # scratch, always left all-False
        cap = max(16, 2 * len(self.plabel))
        self.count = np.zeros((cap, cap), dtype=np.int64)
        src, dst = self._pairs(np.arange(n_events, dtype=np.int64))
        self._add(self.count, src, dst, 1)
        self._add(self.count, np.zeros(len(starts), dtype=np.int64), self.part[starts], 1)
        n = len(self.plabel)
        #: sorted successor ids of every partition id (``count[p, q] > 0``), kept up to date
        self.adj: list[list[int]] = [np.flatnonzero(row).tolist() for row in self.count[:n, :n] > 0]
        #: partition ids per label (merged-away ids stay listed: they have no edges)
        self.by_label: dict[int, list[int]] = {}
        for i, lab in enumerate(self.plabel):
            self.by_label.setdefault(lab, []).append(i)
        # merged-away partition -> partition it was merged into (resolved by ``settle``)
        self._alias: dict[int, int] = {}

    # -- basic views -------------------------------------------------------------------------

    @property
    def n_partitions(self) -> int:
        return len(self.order)

    def label(self, p: int) -> int:
        return self.plabel[p]

    def successors(self, p: int) -> IntArray:
        return np.flatnonzero(self.count[p, : len(self.plabel)] > 0)

    def adjacency(self) -> list[list[int]]:
        """Sorted successor lists of every partition id (dead ids have none). The lists are
        the graph's own, kept up to date by every operation: callers must not change them."""
        return self.adj

    def nodes_with_label(self, label: int) -> list[int]:
        """Partition ids carrying ``label`` (merged-away ids included: they have no edges)."""
        return self.by_label.get(label, [])

    def events_of(self, p: int) -> IntArray:
        return self.members[p]

    def succ_part(self, events: IntArray) -> IntArray:
        """Partition of each event's successor (TERMINAL for a trace's last event)."""
        nx = self.nxt[events]
        return np.where(nx >= 0, self.part[np.maximum(nx, 0)], TERMINAL_ID)

    def pred_part(self, events: IntArray) -> IntArray:
        """Partition of each event's predecessor (INITIAL for a trace's first event)."""
        pv = self.prv[events]
        return np.where(pv >= 0, self.part[np.maximum(pv, 0)], INITIAL_ID)

    def _pairs(self, events: IntArray) -> tuple[IntArray, IntArray]:
        return self.part[events], self.succ_part(events)

    @staticmethod
    def _add(count: IntArray, src: IntArray, dst: IntArray, sign: int) -> None:
        n = count.shape[0]
        flat = np.bincount(src * n + dst, minlength=n * n)
        count += sign * flat.reshape(n, n)

    @staticmethod
    def _net(
        width: int, old_src: IntArray, old_dst: IntArray, new_src: IntArray, new_dst: IntArray
    ) -> tuple[IntArray, IntArray, IntArray]:
        """The net change of ``count`` when the edges ``old`` are replaced by ``new``: the
        (source, target, change) triples whose change is not zero."""
        keys = np.concatenate([old_src * width + old_dst, new_src * width + new_dst])
        signs = np.concatenate(
            [np.full(len(old_src), -1, dtype=np.int64), np.ones(len(new_src), dtype=np.int64)]
        )
        uniq, inverse = np.unique(keys, return_inverse=True)
        net = np.bincount(inverse.ravel(), weights=signs, minlength=len(uniq)).astype(np.int64)
        keep = net != 0
        src, dst = np.divmod(uniq[keep], width)
        return src, dst, net[keep]

    def _touch(self, src: IntArray, dst: IntArray) -> None:
        """Bring the successor lists in line with ``count`` at the given entries."""
        count = self.count
        adj = self.adj
        for s, d, present in zip(
            src.tolist(), dst.tolist(), (count[src, dst] > 0).tolist(), strict=True
        ):
            row = adj[s]
            i = bisect_left(row, d)
            listed = i < len(row) and row[i] == d
            if present and not listed:
                row.insert(i, d)
            elif listed and not present:
                del row[i]

    def _refresh_rows(self, rows: IntArray) -> None:
        n = len(self.plabel)
        for r in rows.tolist():
            self.adj[r] = np.flatnonzero(self.count[r, :n] > 0).tolist()

    # -- operations --------------------------------------------------------------------------

    def _grow(self) -> None:
        cap = self.count.shape[0]
        if len(self.plabel) < cap:
            return
        bigger = np.zeros((2 * cap, 2 * cap), dtype=np.int64)
        bigger[:cap, :cap] = self.count
        self.count = bigger

    def _edge_delta(
        self, events: IntArray, target: int
    ) -> tuple[IntArray, IntArray, IntArray, IntArray, IntArray]:
        """Edges touching ``events`` before and after moving them to ``target``:
        (old src, old dst, new src, new dst, incoming-edge event indices)."""
        mask = self._mask
        mask[events] = True
        try:
            pv = self.prv[events]
            # incoming edges from events that stay (moved ones are counted by their out-edge)
            inc = events[(pv < 0) | ~mask[np.maximum(pv, 0)]]
            inc_src = self.pred_part(inc)
            out_dst = self.succ_part(events)
            nx = self.nxt[events]
            succ_moves = (nx >= 0) & mask[np.maximum(nx, 0)]
        finally:
            mask[events] = False
        src = self.part[events]
        old_src = np.concatenate([src, inc_src])
        old_dst = np.concatenate([out_dst, self.part[inc]])
        new_out_dst = np.where(succ_moves, target, out_dst)
        new_src = np.concatenate([np.full(len(events), target, dtype=np.int64), inc_src])
        new_dst = np.concatenate([new_out_dst, np.full(len(inc), target, dtype=np.int64)])
        return old_src, old_dst, new_src, new_dst, inc

    def adjacency_if_split(self, p: int, events: IntArray) -> list[list[int]]:
        """The successor lists ``split_off(p, events)`` would give, without changing the graph
        (the new partition gets id ``len(plabel)``). Untouched rows are the graph's own lists:
        the result must not be changed. Costs time linear in ``events`` and the changed rows.
        """
        n = len(self.plabel)
        if len(events) <= _SMALL:
            flipped = self._flips_small(events, n)
        else:
            old_src, old_dst, new_src, new_dst, _ = self._edge_delta(events, n)
            src, dst, net = self._net(n + 1, old_src, old_dst, new_src, new_dst)
            inside = (src < n) & (dst < n)
            before = np.zeros(len(src), dtype=np.int64)
            before[inside] = self.count[src[inside], dst[inside]]
            flips = (before > 0) != (before + net > 0)
            flipped = list(zip(src[flips].tolist(), dst[flips].tolist(), strict=True))
        adj = self.adj.copy()
        adj.append([])
        changed: dict[int, list[int]] = {}
        for s, d in flipped:
            row = changed.get(s)
            if row is None:
                row = changed[s] = list(adj[s])
            i = bisect_left(row, d)
            if i < len(row) and row[i] == d:
                del row[i]
            else:
                row.insert(i, d)
        for s, row in changed.items():
            adj[s] = row
        return adj

    def _flips_small(self, events: IntArray, q: int) -> list[tuple[int, int]]:
        """The edges that appear or vanish when the few ``events`` move to the new partition
        ``q`` (the same as the array path of :meth:`adjacency_if_split`, in plain Python: for
        a handful of events it is many times faster than a dozen small array operations)."""
        moved = events.tolist()
        inside = set(moved)
        part = self.part
        nxt = self.nxt[events].tolist()
        prv = self.prv[events].tolist()
        net: dict[tuple[int, int], int] = {}
        for e, a, b in zip(moved, nxt, prv, strict=True):
            p = part.item(e)
            # the event's own edge to its successor (TERMINAL after a trace's last event)
            old_dst = TERMINAL_ID if a < 0 else part.item(a)
            new_dst = q if a in inside else old_dst
            net[p, old_dst] = net.get((p, old_dst), 0) - 1
            net[q, new_dst] = net.get((q, new_dst), 0) + 1
            # the edge from a predecessor that stays (INITIAL before a trace's first event)
            if b < 0 or b not in inside:
                src = INITIAL_ID if b < 0 else part.item(b)
                net[src, p] = net.get((src, p), 0) - 1
                net[src, q] = net.get((src, q), 0) + 1
        count = self.count
        out: list[tuple[int, int]] = []
        for (s, d), change in net.items():
            if change:
                before = count.item(s, d) if s < q and d < q else 0
                if (before > 0) != (before + change > 0):
                    out.append((s, d))
        return out

    def split_off(self, p: int, events: IntArray) -> int:
        """Move ``events`` (sorted) of partition ``p`` into a new partition; returns its id."""
        q = len(self.plabel)
        self.plabel.append(self.plabel[p])
        self.alive.append(True)
        self.order.append(q)
        self.adj.append([])
        self.by_label[self.plabel[p]].append(q)
        self._grow()
        old_src, old_dst, new_src, new_dst, _ = self._edge_delta(events, q)
        src, dst, net = self._net(self.count.shape[0], old_src, old_dst, new_src, new_dst)
        self.count[src, dst] += net
        self.part[events] = q
        self._touch(src, dst)
        keep = ~np.isin(self.members[p], events, assume_unique=True)
        self.members[p] = self.members[p][keep]
        self.members.append(events)
        return q

    def apply_multisplit(self, p: int, blocks: Sequence[IntArray]) -> list[int]:
        """Synoptic's ``PartitionMultiSplit``: the first block stays in ``p``, every other
        block becomes a new partition (in order)."""
        return [self.split_off(p, np.sort(b)) for b in blocks[1:]]

    def merge(self, p: int, q: int) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        """Merge ``q`` into ``p`` (Synoptic's ``PartitionMerge``); returns an undo record."""
        c = self.count
        undo = (c[p].copy(), c[q].copy(), c[:, p].copy(), c[:, q].copy())
        c[p] += c[q]
        c[q] = 0
        c[:, p] += c[:, q]
        c[:, q] = 0
        # rows that change: p, q and the predecessors of q (their edge to q now goes to p)
        self._refresh_rows(np.union1d(np.flatnonzero(undo[3]), [p, q]))
        self._alias[q] = p
        self.alive[q] = False
        self.order.remove(q)
        return undo

    def unmerge(
        self, p: int, q: int, undo: tuple[IntArray, IntArray, IntArray, IntArray], pos: int
    ) -> None:
        c = self.count
        row_p, row_q, col_p, col_q = undo
        c[p] = row_p
        c[q] = row_q
        c[:, p] = col_p
        c[:, q] = col_q
        self._refresh_rows(np.union1d(np.flatnonzero(col_q), [p, q]))
        del self._alias[q]
        self.alive[q] = True
        self.order.insert(pos, q)

    def settle(self) -> None:
        """Resolve merges into ``part`` and the member lists (after coarsening)."""
        if not self._alias:
            return
        target = np.arange(len(self.plabel), dtype=np.int64)
        for q in list(self._alias):
            r = q
            while r in self._alias:
                r = self._alias[r]
            target[q] = r
        self.part = target[self.part]
        for q in list(self._alias):
            r = int(target[q])
            self.members[r] = np.sort(np.concatenate([self.members[r], self.members[q]]))
            self.members[q] = self.members[q][:0]
        self._alias.clear()


def initial_graph(log: EventLog) -> PartitionGraph:
    """One partition per event type plus INITIAL (id 0) and TERMINAL (id 1)."""
    n = len(log.labels)
    present = np.unique(log.codes).astype(np.int64)
    ids = np.full(n, -1, dtype=np.int64)
    ids[present] = np.arange(len(present), dtype=np.int64) + 2
    plabel = [n, n + 1, *present.tolist()]
    return PartitionGraph(log, ids[log.codes], plabel)
