"""Temporal invariant mining over totally ordered traces, linear in the number of events.

Mirrors Synoptic's ``ChainWalkingTOInvMiner`` + ``CountingInvariantMiner``
(``synoptic/invariants/miners/``) and the filtering in ``AbstractMain.createInitialPartitionGraph``:

- ``followed[a, b]``: number of ``a`` events that have some ``b`` later in their trace;
- ``precedes[a, b]``: number of ``b`` events that have some ``a`` earlier in their trace;
- ``a AlwaysFollowedBy b``  iff ``followed[a, b] == count[a]``   (support ``count[a]``);
- ``a NeverFollowedBy b``   iff ``followed[a, b] == 0``           (support ``count[a]``);
- ``a AlwaysPrecedes b``    iff ``precedes[a, b] == count[b]``    (support ``count[b]``);
- ``INITIAL AlwaysFollowedBy x`` iff ``x`` occurs in every trace  (support ``count[x]``).

As in Synoptic, ``a AlwaysFollowedBy a`` and ``a AlwaysPrecedes a`` can never hold (the last
``a`` is followed by no ``a``, the first is preceded by none), ``a NeverFollowedBy a`` means
"at most one ``a`` per trace", and InterruptedBy invariants are not mined (Synoptic drops
them before model checking). Counts include trace weights, so they equal Synoptic's support
counts on the undeduplicated log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import polars as pl

from quicsm.core.frames import INVARIANTS_SCHEMA
from quicsm.model.synoptic.log import INITIAL, EventLog

AFBY: Final = 0
NFBY: Final = 1
AP: Final = 2
KIND_NAMES: Final[tuple[str, ...]] = ("AlwaysFollowedBy", "NeverFollowedBy", "AlwaysPrecedes")


@dataclass(frozen=True)
class Invariant:
    """One mined invariant over label codes; ``a == len(labels)`` stands for INITIAL."""

    kind: int
    a: int
    b: int
    support: int


@dataclass(frozen=True)
class Counts:
    """The walk counts of the miner (all weighted)."""

    count: npt.NDArray[np.int64]  # events per label
    followed: npt.NDArray[np.int64]  # [a, b]: a events with a later b in their trace
    precedes: npt.NDArray[np.int64]  # [a, b]: b events with an earlier a in their trace
    in_every_trace: npt.NDArray[np.bool_]  # label occurs in every trace


def walk_counts(log: EventLog) -> Counts:
    """The miner's counts from per-trace prefix counts.

    With ``before[i, x]`` = number of ``x`` events before position ``i`` of its trace, the
    ``a`` events followed by some ``b`` are those before the trace's last ``b``, and the ``b``
    events preceded by some ``a`` are those after its first ``a``; one row lookup per
    (trace, label present) pair, so the work is linear in the events.
    """
    n_labels = len(log.labels)
    n_traces = log.n_unique
    codes = log.codes.astype(np.int64)
    n_events = len(codes)
    trace = log.event_trace()
    w = log.weights
    # cum[i, x]: x events among codes[:i]
    cum_by_label = np.zeros((n_labels, n_events + 1), dtype=np.int32)
    for x in range(n_labels):
        np.cumsum(codes == x, out=cum_by_label[x, 1:])
    cum = np.ascontiguousarray(cum_by_label.T)  # int32 as counted (widened per pair below)
    del cum_by_label
    starts = log.offsets[:-1]
    ends = log.offsets[1:]
    key = trace * n_labels + codes
    first_flat = np.full(n_traces * n_labels, -1, dtype=np.int64)
    uniq, at = np.unique(key, return_index=True)  # first occurrence of each (trace, label)
    first_flat[uniq] = at
    last_flat = np.full(n_traces * n_labels, -1, dtype=np.int64)
    uniq, at = np.unique(key[::-1], return_index=True)
    last_flat[uniq] = n_events - 1 - at
    t_idx, x_idx = np.divmod(uniq, n_labels)  # the (trace, label) pairs present
    first = first_flat[uniq]
    last = last_flat[uniq]
    wt = w[t_idx][:, None]
    # a events before the last x, per pair: a row per pair, summed by x
    before_last = (cum[last] - cum[starts[t_idx]]) * wt
    # events after the first x, per pair
    after_first = (cum[ends[t_idx]] - cum[first + 1]) * wt
    followed = np.zeros((n_labels, n_labels), dtype=np.int64)
    precedes = np.zeros((n_labels, n_labels), dtype=np.int64)
    for x in range(n_labels):
        sel = x_idx == x
        followed[:, x] = before_last[sel].sum(axis=0)
        precedes[x, :] = after_first[sel].sum(axis=0)
    count = np.bincount(codes, weights=log.event_weights(), minlength=n_labels)
    present = np.bincount(x_idx, minlength=n_labels)
    in_every: npt.NDArray[np.bool_] = present == n_traces
    return Counts(np.rint(count).astype(np.int64), followed, precedes, in_every)


def mine(log: EventLog) -> list[Invariant]:
    """The invariants of ``log`` in a fixed order: kind, then a (INITIAL last), then b.

    The result is cached on the (immutable) log, so mining for a table and then inferring a
    model walks the events once.
    """
    cached: list[Invariant] | None = getattr(log, "_mined", None)
    if cached is not None:
        return list(cached)
    result = _mine(log)
    object.__setattr__(log, "_mined", result)
    return list(result)


def _mine(log: EventLog) -> list[Invariant]:
    if log.n_unique == 0:
        return []
    c = walk_counts(log)
    n = len(log.labels)
    out: list[Invariant] = []
    for a in range(n):
        for b in range(n):
            if c.followed[a, b] == c.count[a]:
                out.append(Invariant(AFBY, a, b, int(c.count[a])))
    for x in range(n):
        if c.in_every_trace[x]:
            out.append(Invariant(AFBY, n, x, int(c.count[x])))
    for a in range(n):
        for b in range(n):
            if c.followed[a, b] == 0:
                out.append(Invariant(NFBY, a, b, int(c.count[a])))
    for a in range(n):
        for b in range(n):
            if c.precedes[a, b] == c.count[b]:
                out.append(Invariant(AP, a, b, int(c.count[b])))
    return out


def invariants_frame(invariants: list[Invariant], labels: tuple[str, ...]) -> pl.DataFrame:
    names = (*labels, INITIAL)
    return pl.DataFrame(
        {
            "kind": [KIND_NAMES[i.kind] for i in invariants],
            "a": [names[i.a] for i in invariants],
            "b": [names[i.b] for i in invariants],
            "support": [i.support for i in invariants],
        },
        schema=INVARIANTS_SCHEMA,
    )


def mine_invariants(log: EventLog) -> pl.DataFrame:
    """Mine AlwaysFollowedBy / NeverFollowedBy / AlwaysPrecedes invariants with support counts.

    Returns a frame ``kind, a, b, support`` (see the module docstring for the semantics).
    """
    return invariants_frame(mine(log), log.labels)
