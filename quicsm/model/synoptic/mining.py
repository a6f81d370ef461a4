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

    With ``cum[i, x]`` = number of ``x`` events before position ``i`` of the log, the ``a``
    events followed by some ``b`` are those before the trace's last ``b``, and the ``b`` events
    preceded by some ``a`` are those after its first ``a``. The first and last ``x`` of each
    trace holding one are found from the positions of ``x`` alone (they are in trace order), so
    the work is linear in the events: no sort of (trace, label) pairs.
    """
    n_labels = len(log.labels)
    n_traces = log.n_unique
    codes = log.codes
    n_events = len(codes)
    trace = log.event_trace()
    w = log.weights
    starts = log.offsets[:-1]
    ends = log.offsets[1:]
    # cum[i, x]: x events among codes[:i] (int32 as counted, widened per pair below)
    cum = np.zeros((n_events + 1, n_labels), dtype=np.int32)
    positions = []
    for x in range(n_labels):
        is_x = codes == x
        np.cumsum(is_x, out=cum[1:, x])
        positions.append(np.flatnonzero(is_x))
    followed = np.zeros((n_labels, n_labels), dtype=np.int64)
    precedes = np.zeros((n_labels, n_labels), dtype=np.int64)
    present = np.zeros(n_labels, dtype=np.int64)
    for x, pos in enumerate(positions):
        if pos.size == 0:
            continue
        of = trace[pos]
        opens = np.empty(pos.size, dtype=np.bool_)  # the first x of its trace
        opens[0] = True
        np.not_equal(of[1:], of[:-1], out=opens[1:])
        at = np.flatnonzero(opens)
        t_idx = of[at]
        first = pos[at]
        last = pos[np.append(at[1:], pos.size) - 1]
        wt = w[t_idx][:, None]
        # a events before the last x of each trace, and events after its first x
        followed[:, x] = ((cum[last] - cum[starts[t_idx]]) * wt).sum(axis=0)
        precedes[x, :] = ((cum[ends[t_idx]] - cum[first + 1]) * wt).sum(axis=0)
        present[x] = t_idx.size
    count = np.bincount(codes, weights=log.event_weights(), minlength=n_labels)
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
