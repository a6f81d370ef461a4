"""``quicsm.infer``: from a transitions frame to a :class:`quicsm.model.tables.Model`.

Three algorithms, one result type:

``synoptic``  Synoptic's counter-example-guided refinement followed by k-tails coarsening
              (:func:`quicsm.model.synoptic.infer_graph`).
``ktails``    plain k-tails merging (:func:`quicsm.model.synoptic.infer_graph`,
``algorithm="ktails"``).
``observed``  one node per canonical state observed: the first-order chain the paper's Fig. 13
              draws. Nodes are the states, edges the observed transitions (INITIAL → first
              state, last state → TERMINAL included), computed here with polars.

Whatever the algorithm, the invariants are mined from the same traces
(:func:`quicsm.model.synoptic.mine_invariants`) and the statistics come from
:mod:`quicsm.stats.descriptive`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import polars as pl

from quicsm.core.choices import ALGORITHMS as ALGORITHMS  # valid values of ``algorithm``
from quicsm.core.errors import InputError, ModelError
from quicsm.model.replay import node_times
from quicsm.model.synoptic.options import tail_length
from quicsm.model.tables import Model, renumber
from quicsm.stats.descriptive import INITIAL, TERMINAL, Stats, Visits, compute_stats

if TYPE_CHECKING:
    from quicsm.model.synoptic import EventLog


def infer(
    transitions: pl.DataFrame | pl.LazyFrame,
    *,
    algorithm: str = "synoptic",
    k: int = 1,
    seed: int = 0,
) -> Model:
    """Infer the state machine of a transitions frame
    (:data:`quicsm.core.frames.TRANSITIONS_SCHEMA`).

    ``k`` is the k-tails depth (synoptic's coarsening and plain ktails); ``seed`` fixes every
    choice the algorithm makes at random, so the same input and seed give the same model.
    """
    k = check_options(algorithm=algorithm, k=k, seed=seed)
    if isinstance(transitions, pl.LazyFrame):
        transitions = transitions.collect()
    visits = Visits(transitions)
    if visits.n_visits == 0:
        raise ModelError("no transitions to infer a model from (the input has no state rows)")
    stats = compute_stats(visits)

    from quicsm.model.synoptic import EventLog

    return build_model(
        stats,
        EventLog.from_transitions(transitions),
        lambda nodes, edges: node_times(visits, nodes, edges),
        algorithm=algorithm,
        k=k,
        seed=seed,
    )


def build_model(
    stats: Stats,
    log: EventLog,
    node_time: Callable[[pl.DataFrame, pl.DataFrame], pl.DataFrame | None],
    *,
    algorithm: str,
    k: int,
    seed: int,
) -> Model:
    """The model of an event log and its statistics, however they were computed (one frame
    here, merged partitions in :mod:`quicsm.engine`); ``node_time(nodes, edges)`` gives the
    time per node of the inferred graph, or None."""
    from quicsm.model.synoptic import infer_graph, mine_invariants

    invariants = mine_invariants(log)
    if algorithm == "observed":
        nodes, edges = observed_graph(stats)
    else:
        nodes, edges = infer_graph(log, algorithm=algorithm, k=k, seed=seed)
    nodes, edges = renumber(nodes, edges)
    return Model(
        nodes=nodes,
        edges=edges,
        invariants=invariants,
        stats=stats,
        algorithm=algorithm,
        k=k,
        seed=seed,
        node_time=node_time(nodes, edges),
    )


def check_options(*, algorithm: str, k: int, seed: int) -> int:
    """Check the options of an inference (every entry point's one check); returns ``k``."""
    if algorithm not in ALGORITHMS:
        raise InputError(f"unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    k = tail_length(k)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InputError(f"seed must be an integer, got {seed!r}")
    return k


def observed_graph(stats: Stats) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Nodes and edges of the observed-state model, read off the statistics' transition table.

    A state node holds one event per visit; INITIAL and TERMINAL one per trace. Edge counts are
    the observed transitions and probabilities their share of the source's outgoing transitions.
    """
    tp = stats.transition_probabilities.select(
        pl.col("source").cast(pl.String),
        pl.col("target").cast(pl.String),
        "count",
        "probability",
    )
    visits = stats.dwell.select(pl.col("state").cast(pl.String), pl.col("visits").alias("events"))
    dummies = pl.DataFrame(
        {"state": [INITIAL, TERMINAL], "events": [stats.traces, stats.traces]},
        schema={"state": pl.String(), "events": pl.Int64()},
    )
    nodes = pl.concat([dummies, visits]).with_columns(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("id")
    )
    ids = nodes.select("state", "id")
    edges = (
        tp.join(ids.rename({"state": "source", "id": "_s"}), on="source")
        .join(ids.rename({"state": "target", "id": "_t"}), on="target")
        .select(pl.col("_s").alias("source"), pl.col("_t").alias("target"), "count", "probability")
    )
    return nodes.select("id", "state", "events"), edges
