"""Synoptic-style inference: properties every model must have, and worked examples."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from quicsm.core.errors import InputError
from quicsm.model.synoptic import EventLog, infer_graph, mine_invariants
from quicsm.model.synoptic.coarsen import coarsen
from quicsm.model.synoptic.mining import mine
from quicsm.model.synoptic.partitions import initial_graph
from quicsm.model.synoptic.refine import refine
from quicsm.model.synoptic.verify import rejected_traces, violated_invariants
from quicsm.testing.synthetic import generate_transitions

# Synoptic's traces/abstract/shopping-cart-example, one trace per client address.
CART = [
    ["check-out", "get-credit-card"],
    ["check-out", "invalid-coupon", "reduce-price", "check-out", "get-credit-card"],
    ["check-out", "valid-coupon", "reduce-price", "check-out", "get-credit-card"],
]

traces_st = st.lists(
    st.lists(st.sampled_from("abcd"), min_size=1, max_size=7), min_size=1, max_size=9
)
algo_st = st.sampled_from([("synoptic", 1), ("synoptic", 2), ("ktails", 1), ("ktails", 2)])


def _is_function(src: np.ndarray, dst: np.ndarray) -> bool:
    """Every value of ``src`` maps to a single value of ``dst``."""
    pairs = np.unique(np.stack([src, dst], axis=1), axis=0)
    return len(np.unique(pairs[:, 0])) == len(pairs)


@settings(max_examples=120, deadline=None)
@given(traces_st, algo_st)
def test_model_accepts_every_trace_and_probabilities_sum_to_one(
    traces: list[list[str]], algo: tuple[str, int]
) -> None:
    log = EventLog.from_sequences(traces)
    nodes, edges = infer_graph(log, algorithm=algo[0], k=algo[1])
    assert rejected_traces(nodes, edges, log) == []
    sums = edges.group_by("source").agg(pl.col("probability").sum())
    assert set(sums.get_column("source").to_list()) == set(nodes.get_column("id").to_list()) - {1}
    assert np.allclose(sums.get_column("probability").to_numpy(), 1.0)
    assert nodes.get_column("id").to_list() == list(range(nodes.height))
    assert nodes.get_column("state").to_list()[:2] == ["INITIAL", "TERMINAL"]
    # every event sits in exactly one node
    assert int(nodes.get_column("events").sum()) == log.n_events + 2 * log.n_traces


@settings(max_examples=120, deadline=None)
@given(traces_st, st.integers(1, 3))
def test_synoptic_model_satisfies_every_invariant(traces: list[list[str]], k: int) -> None:
    log = EventLog.from_sequences(traces)
    nodes, edges = infer_graph(log, k=k)
    invariants = mine_invariants(log)
    assert violated_invariants(nodes, edges, invariants, log.labels).height == 0


@settings(max_examples=120, deadline=None)
@given(traces_st, st.integers(0, 5))
def test_refinement_only_splits_and_coarsening_only_merges(
    traces: list[list[str]], seed: int
) -> None:
    log = EventLog.from_sequences(traces)
    invariants = mine(log)
    g = initial_graph(log)
    initial, n_initial = g.part.copy(), g.n_partitions
    refine(g, invariants, rng=np.random.default_rng(seed))
    refined, n_refined = g.part.copy(), g.n_partitions
    assert n_refined >= n_initial
    assert _is_function(refined, initial)  # each refined partition lies in one initial one
    coarsen(g, invariants)
    assert g.n_partitions <= n_refined
    assert _is_function(refined, g.part)  # each refined partition lies in one coarse one


@settings(max_examples=60, deadline=None)
@given(traces_st, algo_st, st.integers(0, 3))
def test_trace_order_and_seed_do_not_change_the_result(
    traces: list[list[str]], algo: tuple[str, int], seed: int
) -> None:
    shuffled = list(traces)
    random.Random(seed).shuffle(shuffled)
    a = infer_graph(EventLog.from_sequences(traces), algorithm=algo[0], k=algo[1], seed=seed)
    b = infer_graph(EventLog.from_sequences(shuffled), algorithm=algo[0], k=algo[1], seed=seed)
    assert_frame_equal(a[0], b[0])
    assert_frame_equal(a[1], b[1])


def test_shopping_cart_gives_one_of_synoptics_models() -> None:
    """Synoptic (seed-dependent on this 3-trace log) gives one of two 8-node models; they
    differ in whether ``check-out`` is split by predecessor or by successor."""
    nodes, edges = infer_graph(EventLog.from_sequences(CART), seed=0)
    names = dict(zip(nodes.get_column("id"), nodes.get_column("state"), strict=True))
    got = sorted(
        (names[s], names[t], c) for s, t, c in edges.select("source", "target", "count").rows()
    )
    by_successor = sorted(
        [
            ("INITIAL", "check-out", 1),
            ("INITIAL", "check-out", 2),
            ("check-out", "get-credit-card", 3),
            ("check-out", "invalid-coupon", 1),
            ("check-out", "valid-coupon", 1),
            ("get-credit-card", "TERMINAL", 3),
            ("invalid-coupon", "reduce-price", 1),
            ("reduce-price", "check-out", 2),
            ("valid-coupon", "reduce-price", 1),
        ]
    )
    by_predecessor = sorted(
        [
            ("INITIAL", "check-out", 3),
            ("check-out", "get-credit-card", 1),
            ("check-out", "get-credit-card", 2),
            ("check-out", "invalid-coupon", 1),
            ("check-out", "valid-coupon", 1),
            ("get-credit-card", "TERMINAL", 3),
            ("invalid-coupon", "reduce-price", 1),
            ("reduce-price", "check-out", 2),
            ("valid-coupon", "reduce-price", 1),
        ]
    )
    assert nodes.height == 8
    assert got in (by_successor, by_predecessor)


def test_refinement_recovers_hidden_phases_of_synthetic_logs() -> None:
    """The default synthetic profile has an application-limited tail phase with its own copies
    of TailLossProbe, Recovery and RetransmissionTimeout; the model separates them."""
    log = EventLog.from_transitions(generate_transitions(2000, seed=3))
    nodes, _ = infer_graph(log)
    per_state = dict(nodes.group_by("state").len().iter_rows())
    assert per_state["TailLossProbe"] == 2
    assert per_state["Recovery"] == 2
    assert per_state["RetransmissionTimeout"] == 2
    assert per_state["ApplicationLimited"] == 1
    assert per_state["CongestionAvoidance"] == 1


def test_ktails_separates_by_future() -> None:
    log = EventLog.from_sequences([["a", "b", "c"], ["a", "b", "d"]])
    nodes, edges = infer_graph(log, algorithm="ktails", k=2)
    assert nodes.filter(pl.col("state") == "b").height == 2
    assert nodes.filter(pl.col("state") == "a").height == 1
    nodes1, _ = infer_graph(log, algorithm="ktails", k=1)
    assert nodes1.height == 2 + 4


def test_unknown_algorithm_and_bad_k_are_errors() -> None:
    log = EventLog.from_sequences([["a"]])
    with pytest.raises(InputError, match="unknown algorithm 'bogus'; choose one of synoptic"):
        infer_graph(log, algorithm="bogus")
    with pytest.raises(InputError, match=r"k \(the k-tails depth\) must be a positive integer"):
        infer_graph(log, k=0)
