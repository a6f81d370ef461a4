"""Run an inference algorithm and turn the final partition graph into node/edge tables.

Table schemas are those of :mod:`quicsm.model.tables`: node ids are 0 = INITIAL, 1 = TERMINAL, then
ordered by state label (the log's label order) and, within a label, by the partition's first
event in the canonical order of the deduplicated traces, so equal inputs give equal ids
whatever the order of their traces. INITIAL and TERMINAL count one event per input trace.
"""

from __future__ import annotations

from typing import Final, Literal

import numpy as np
import polars as pl

from quicsm.core.errors import InputError
from quicsm.core.frames import EDGES_SCHEMA, NODES_SCHEMA
from quicsm.model.synoptic.coarsen import coarsen
from quicsm.model.synoptic.ktails import ktails_graph
from quicsm.model.synoptic.log import INITIAL, TERMINAL, EventLog
from quicsm.model.synoptic.mining import mine
from quicsm.model.synoptic.options import tail_length
from quicsm.model.synoptic.partitions import INITIAL_ID, TERMINAL_ID, PartitionGraph, initial_graph
from quicsm.model.synoptic.refine import refine

ALGORITHMS: Final[tuple[str, ...]] = ("synoptic", "ktails")


def infer_graph(
    log: EventLog,
    *,
    algorithm: Literal["synoptic", "ktails"] | str = "synoptic",
    k: int = 1,
    seed: int = 0,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Infer a state machine from ``log``; returns ``(nodes, edges)`` frames.

    ``algorithm="synoptic"``: mine invariants, refine the initial partition graph until they
    all hold, then coarsen with k-tails (``k``) under the invariants; ``seed`` drives the
    random choices refinement makes (as Synoptic's ``--randomSeed``).
    ``algorithm="ktails"``: plain k-tails with tail length ``k``.
    """
    if algorithm not in ALGORITHMS:
        raise InputError(f"unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    k = tail_length(k)
    if log.n_unique == 0:
        raise InputError("cannot infer a model from an empty log")
    if algorithm == "ktails":
        g = ktails_graph(log, k=k)
    else:
        g = initial_graph(log)
        invariants = mine(log)
        refine(g, invariants, rng=np.random.default_rng(seed))
        coarsen(g, invariants, k=k)
    return graph_frames(g)


def graph_frames(g: PartitionGraph) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Node and edge tables of a partition graph (weights included)."""
    g.settle()
    log = g.log
    n_ids = len(g.plabel)
    w = log.event_weights()
    events = np.bincount(g.part, weights=w, minlength=n_ids).astype(np.int64)
    events[INITIAL_ID] = events[TERMINAL_ID] = log.n_traces
    first = [int(m[0]) if len(m) else -1 for m in g.members]
    real = [p for p in range(n_ids) if g.alive[p] and p not in (INITIAL_ID, TERMINAL_ID)]
    real.sort(key=lambda p: (g.plabel[p], first[p]))
    new_id = np.full(n_ids, -1, dtype=np.int64)
    new_id[INITIAL_ID], new_id[TERMINAL_ID] = 0, 1
    new_id[real] = np.arange(2, len(real) + 2)
    names = (*log.labels, INITIAL, TERMINAL)
    ids = [INITIAL_ID, TERMINAL_ID, *real]
    nodes = pl.DataFrame(
        {
            "id": new_id[ids],
            "state": [names[g.plabel[p]] for p in ids],
            "events": events[ids],
        },
        schema=NODES_SCHEMA,
    )
    n_events = len(g.part)
    src = np.concatenate([np.full(log.n_unique, INITIAL_ID), g.part])
    dst = np.concatenate([g.part[g.starts], g.succ_part(np.arange(n_events, dtype=np.int64))])
    wt = np.concatenate([log.weights, w])
    edges = (
        pl.DataFrame({"source": new_id[src], "target": new_id[dst], "count": wt})
        .group_by("source", "target")
        .agg(pl.col("count").sum())
        .join(nodes.select(pl.col("id").alias("source"), pl.col("events")), on="source")
        .with_columns((pl.col("count") / pl.col("events")).alias("probability"))
        .select(list(EDGES_SCHEMA))
        .sort("source", "target")
        .cast(EDGES_SCHEMA)  # type: ignore[arg-type]
    )
    return nodes.sort("id"), edges
