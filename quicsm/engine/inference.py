"""Inference on a corpus' aggregate: the model of :func:`quicsm.model.inference.infer`, built
from the deduplicated, weighted trace set and the merged statistics instead of every row."""

from __future__ import annotations

from quicsm.core.errors import ModelError
from quicsm.engine.aggregate import Aggregate
from quicsm.model.inference import check_options, observed_graph
from quicsm.model.synoptic import infer_graph, mine_invariants
from quicsm.model.tables import Model, renumber


def infer_aggregate(
    aggregate: Aggregate, *, algorithm: str = "synoptic", k: int = 1, seed: int = 0
) -> Model:
    """The model :func:`quicsm.model.inference.infer` infers from the same traces (same nodes,
    edges, invariants and counts; float statistics equal up to the last bits)."""
    k = check_options(algorithm=algorithm, k=k, seed=seed)
    if aggregate.visits == 0:
        raise ModelError("no transitions to infer a model from (the input has no state rows)")
    stats = aggregate.stats()
    log = aggregate.event_log()
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
        node_time=aggregate.node_times(nodes, edges),
    )
