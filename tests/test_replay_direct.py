"""A model with one node per label (the observed model) is replayed without the passes: each
visit's node is its label's when every step is an edge; it is what the passes give, and the
passes decide whenever a step is not an edge or a label has several nodes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.model.inference import infer
from quicsm.model.replay import _masks, _one_node_per_label, _passes
from quicsm.stats.descriptive import Visits
from quicsm.testing.synthetic import generate_transitions

sequences_st = st.lists(
    st.lists(st.integers(1, 7), min_size=1, max_size=10).map(lambda s: [0, *s]),
    min_size=1,
    max_size=25,
)


def _arrays(visits: Visits) -> tuple[np.ndarray, ...]:
    f = visits.frame
    return (
        f.get_column("tid").to_numpy().astype(np.int64),
        f.get_column("code").to_numpy().astype(np.int64) + 1,
        f.get_column("first").to_numpy(),
        f.get_column("last").to_numpy(),
    )


@settings(max_examples=60, deadline=None)
@given(sequences=sequences_st, model_seed=st.integers(0, 3), drop=st.booleans())
def test_one_node_per_label_is_what_the_passes_give(
    sequences: list[list[int]], model_seed: int, drop: bool
) -> None:
    # the model of other traces (some steps of these may not be edges of it) or of these
    df = generate_transitions(40, seed=model_seed)
    model = infer(df, algorithm="observed")
    lengths = np.array([len(s) for s in sequences], dtype=np.int64)
    codes = np.array([c for s in sequences for c in s], dtype=np.uint8)
    visits = Visits.of_sequences(codes, lengths)
    # with one edge fewer, a trace that took it has no accepting path
    edges = model.edges.slice(1) if drop else model.edges
    masks = _masks(model.nodes, edges)
    assert masks is not None
    succ, label_mask = masks
    tid, label, first, last = _arrays(visits)
    direct = _one_node_per_label(succ, label_mask, label, first, last)
    passes = _passes(succ, label_mask, tid, label, first, last)
    if direct is not None:
        assert passes is not None
        assert direct.tolist() == passes.tolist()
    else:  # some step is not an edge: no accepting path
        assert passes is None


def test_the_observed_model_of_its_own_traces_takes_the_direct_way() -> None:
    df = generate_transitions(200, seed=5)
    model = infer(df, algorithm="observed")
    visits = Visits(df)
    masks = _masks(model.nodes, model.edges)
    assert masks is not None
    tid, label, first, last = _arrays(visits)
    direct = _one_node_per_label(*masks, label, first, last)
    assert direct is not None
    passes = _passes(*masks, tid, label, first, last)
    assert passes is not None and direct.tolist() == passes.tolist()
