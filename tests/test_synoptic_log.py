"""EventLog: integer coding, deduplication with weights, canonical order."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.core.errors import InputError
from quicsm.model.synoptic import EventLog

traces_st = st.lists(
    st.lists(st.sampled_from("abcd"), min_size=1, max_size=6), min_size=1, max_size=10
)


def test_dedupes_identical_traces_with_weights() -> None:
    log = EventLog.from_sequences([["a", "b"], ["a"], ["a", "b"], ["b", "a", "c"]])
    assert log.labels == ("a", "b", "c")
    assert log.sequences() == [["a"], ["a", "b"], ["b", "a", "c"]]
    assert log.weights.tolist() == [1, 2, 1]
    assert log.n_traces == 4
    assert log.n_events == 8


def test_canonical_states_keep_their_order() -> None:
    log = EventLog.from_sequences([["SlowStart", "Init", "Recovery"]])
    assert log.labels == ("Init", "SlowStart", "Recovery")


def test_from_transitions_orders_by_time_within_trace() -> None:
    df = pl.DataFrame(
        {
            "trace": ["t2", "t1", "t1", "t1", "t2"],
            "time_ms": [5.0, 3.0, 1.0, 2.0, 1.0],
            "state": ["Recovery", "Recovery", "Init", "SlowStart", "Init"],
        }
    )
    log = EventLog.from_transitions(df)
    assert sorted(log.sequences()) == [["Init", "Recovery"], ["Init", "SlowStart", "Recovery"]]


def test_bad_input_is_named() -> None:
    with pytest.raises(InputError, match="trace 1 is empty"):
        EventLog.from_sequences([["a"], []])
    with pytest.raises(InputError, match="INITIAL"):
        EventLog.from_sequences([["INITIAL"]])
    with pytest.raises(InputError, match="missing"):
        EventLog.from_transitions(pl.DataFrame({"trace": ["x"], "state": ["Init"]}))
    with pytest.raises(InputError, match="nulls"):
        EventLog.from_transitions(
            pl.DataFrame({"trace": ["x", None], "time_ms": [0.0, 1.0], "state": ["Init", "Init"]})
        )


@settings(max_examples=80, deadline=None)
@given(traces_st, st.randoms(use_true_random=False))
def test_order_of_traces_does_not_matter(traces: list[list[str]], rnd: object) -> None:
    shuffled = list(traces)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    a, b = EventLog.from_sequences(traces), EventLog.from_sequences(shuffled)
    assert a.labels == b.labels
    assert np.array_equal(a.codes, b.codes)
    assert np.array_equal(a.weights, b.weights)


@settings(max_examples=80, deadline=None)
@given(traces_st)
def test_dedup_keeps_every_trace(traces: list[list[str]]) -> None:
    log = EventLog.from_sequences(traces)
    expanded = sorted(
        tuple(seq) for seq, w in zip(log.sequences(), log.weights, strict=True) for _ in range(w)
    )
    assert expanded == sorted(tuple(t) for t in traces)
    assert len({tuple(s) for s in log.sequences()}) == log.n_unique
