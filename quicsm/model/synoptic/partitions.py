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
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from quicsm.model.synoptic.log import EventLog

IntArray = npt.NDArray[np.int64]

INITIAL_ID = 0
TERMINAL_ID = 1


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

    def adjacency(self, count: IntArray | None = None) -> list[list[int]]:
        """Successor lists of every partition id (dead ids have none)."""
        c = self.count if count is None else count
        n = len(self.plabel) if count is None else count.shape[0]
        nz = c[:n, :n] > 0
        return [np.flatnonzero(row).tolist() for row in nz]

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

    def count_if_split(self, p: int, events: IntArray) -> IntArray:
        """The count matrix ``split_off(p, events)`` would give, without changing the graph
        (the new partition gets id ``len(plabel)``)."""
        n = len(self.plabel)
        c = np.zeros((n + 1, n + 1), dtype=np.int64)
        c[:n, :n] = self.count[:n, :n]
        old_src, old_dst, new_src, new_dst, _ = self._edge_delta(events, n)
        self._add(c, old_src, old_dst, -1)
        self._add(c, new_src, new_dst, 1)
        return c

    def split_off(self, p: int, events: IntArray) -> int:
        """Move ``events`` (sorted) of partition ``p`` into a new partition; returns its id."""
        q = len(self.plabel)
        self.plabel.append(self.plabel[p])
        self.alive.append(True)
        self.order.append(q)
        self._grow()
        old_src, old_dst, new_src, new_dst, _ = self._edge_delta(events, q)
        self._add(self.count, old_src, old_dst, -1)
        self.part[events] = q
        self._add(self.count, new_src, new_dst, 1)
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
