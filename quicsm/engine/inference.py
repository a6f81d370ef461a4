"""Inference on a corpus' aggregate: the model of :func:`quicsm.model.inference.infer`, built
from the deduplicated, weighted trace set and the merged statistics instead of every row."""

from __future__ import annotations

from quicsm.core.errors import ModelError
from quicsm.engine.aggregate import Aggregate
from quicsm.model.inference import build_model, check_options
from quicsm.model.tables import Model


def infer_aggregate(
    aggregate: Aggregate, *, algorithm: str = "synoptic", k: int = 1, seed: int = 0
) -> Model:
    """The model :func:`quicsm.model.inference.infer` infers from the same traces (same nodes,
    edges, invariants and counts; float statistics equal up to the last bits)."""
    k = check_options(algorithm=algorithm, k=k, seed=seed)
    if aggregate.visits == 0:
        raise ModelError("no transitions to infer a model from (the input has no state rows)")
    return build_model(
        aggregate.stats(),
        aggregate.event_log(),
        aggregate.node_times,
        algorithm=algorithm,
        k=k,
        seed=seed,
    )
