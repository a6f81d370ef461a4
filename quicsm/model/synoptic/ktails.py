"""Plain k-tails (``algorithm="ktails"``): merge events whose next ``k`` labels agree.

Mirrors Synoptic's ``KTails.performKTails`` (``synoptic/algorithms/KTails.java``): every event
starts in its own partition, each gets its set of k-strings (its label followed by up to
``k - 1`` successor labels, TERMINAL included), and all events with equal sets are merged in
one pass. On totally ordered traces an event has a single future, so its k-string set is fixed
by the tuple of its next ``k - 1`` labels (cut after TERMINAL); we group by that tuple with
numpy instead of comparing sets pairwise. ``k = 1`` gives the initial partition graph.
"""

from __future__ import annotations

import numpy as np

from quicsm.model.synoptic.log import EventLog
from quicsm.model.synoptic.options import tail_length
from quicsm.model.synoptic.partitions import PartitionGraph


def ktails_graph(log: EventLog, *, k: int = 1) -> PartitionGraph:
    k = tail_length(k)
    n = len(log.labels)
    terminal, beyond = n, n + 1
    codes = log.codes.astype(np.int64)
    n_events = len(codes)
    ends = np.repeat(log.offsets[1:], np.diff(log.offsets))  # one past each event's trace
    idx = np.arange(n_events, dtype=np.int64)
    columns = [codes]
    for j in range(1, k):
        pos = idx + j
        col = np.where(pos < ends, codes[np.minimum(pos, max(n_events - 1, 0))], beyond)
        col = np.where(pos == ends, terminal, col)
        columns.append(col)
    keys = np.stack(columns, axis=1) if n_events else np.zeros((0, k), dtype=np.int64)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    part = inverse.ravel().astype(np.int64) + 2
    plabel = [n, n + 1, *uniq[:, 0].astype(int).tolist()]
    return PartitionGraph(log, part, plabel)
