"""The engine's aggregate computes with numpy what a frame-level group-by or a transitions
frame would give (the value counts of dwell times, by one stable sort; the visits of the
distinct sequences that node times are replayed on), and merges parts without changing them."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal, assert_series_equal

from quicsm.core.states import CANONICAL_STATES, STATE_DTYPE
from quicsm.engine.aggregate import (
    DWELL_COUNTS_SCHEMA,
    Aggregate,
    Sequences,
    _chain_sums,
    _sequences,
    _value_counts,
    merge_all,
)
from quicsm.stats.descriptive import Visits
from quicsm.testing.synthetic import generate_transitions

pairs = st.lists(
    st.tuples(
        st.integers(0, len(CANONICAL_STATES) - 1),
        st.sampled_from([0.0, -0.0, 1.5, 2.0, 1e-9, 3.25, 1e12]),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(pairs=pairs)
def test_value_counts_are_the_group_by_of_the_pairs(pairs: list[tuple[int, float]]) -> None:
    code = np.array([c for c, _ in pairs], dtype=np.uint8)
    dwell = np.array([d for _, d in pairs], dtype=np.float64)
    expected = (
        pl.DataFrame({"code": code, "dwell_ms": dwell})
        .group_by("code", "dwell_ms")
        .agg(pl.len().cast(pl.Int64).alias("count"))
        .sort("code", "dwell_ms")
        .cast(DWELL_COUNTS_SCHEMA)  # type: ignore[arg-type]
    )
    got = _value_counts(code, dwell)
    assert_frame_equal(got, expected)
    # the value kept for 0.0 and -0.0 together is the first one's, sign included
    assert (
        np.signbit(got["dwell_ms"].to_numpy()).tolist()
        == np.signbit(expected["dwell_ms"].to_numpy()).tolist()
    )


@settings(max_examples=100, deadline=None)
@given(
    sequences=st.lists(
        st.lists(st.integers(1, len(CANONICAL_STATES) - 1), min_size=1, max_size=8),
        min_size=1,
        max_size=20,
    )
)
def test_visits_of_sequences_are_those_of_their_frame(sequences: list[list[int]]) -> None:
    lengths = np.array([len(s) for s in sequences], dtype=np.int64)
    codes = np.array([c for s in sequences for c in s], dtype=np.uint8)
    trace = np.repeat(np.arange(len(sequences)), lengths)
    position = np.concatenate([np.arange(n) for n in lengths]).astype(np.float64)
    frame = pl.DataFrame(
        {
            "trace": pl.Series(trace).cast(pl.String).str.zfill(12),
            "time_ms": position,
            "state": pl.Series(np.asarray(CANONICAL_STATES)[codes]).cast(STATE_DTYPE),
            "end_ms": np.repeat(lengths - 1, lengths).astype(np.float64),
        }
    )
    expected = Visits(frame)
    got = Visits.of_sequences(codes, lengths)
    assert_frame_equal(got.frame, expected.frame)
    assert_series_equal(got.traces, expected.traces, check_names=False)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), cuts=st.lists(st.integers(1, 59), max_size=5))
def test_merging_leaves_the_parts_as_they_were(seed: int, cuts: list[int]) -> None:
    """The merger shares a part's distinct sequences until a later part adds to them (one
    part is not copied at all); the parts themselves never change."""
    df = generate_transitions(60, seed=seed)
    traces = df.get_column("trace").unique(maintain_order=True).to_list()
    bounds = [0, *sorted(set(cuts)), len(traces)]
    parts = [
        Aggregate.of(df.filter(pl.col("trace").is_in(traces[lo:hi])))
        for lo, hi in zip(bounds, bounds[1:], strict=False)
    ]

    def snapshot(a: Aggregate) -> dict[bytes, tuple[int, list[float]]]:
        return {k: (s.weight, s.dwell_ms.tolist()) for k, s in a.sequences.items()}

    before = [snapshot(p) for p in parts]
    merged = merge_all(parts)
    assert [snapshot(p) for p in parts] == before
    one_by_one = Aggregate()
    for p in parts:
        one_by_one = one_by_one.merge(p)
    assert snapshot(merged) == snapshot(one_by_one)
    assert snapshot(merge_all([merged, Aggregate.of(df.head(0))])) == snapshot(merged)


@settings(max_examples=150, deadline=None)
@given(
    traces=st.lists(
        st.tuples(
            st.sampled_from([[1], [1, 2], [1, 2, 3] * 5, [1, 2, 3] * 6, [2] * 17, [1, 3, 5, 7]]),
            st.integers(0, 3),  # a tail of this many more codes
            st.floats(0, 100, allow_nan=False),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_distinct_sequences_are_those_of_the_traces(
    traces: list[tuple[list[int], int, float]],
) -> None:
    """Short sequences (compared packed into integers) and long ones (compared as lists) alike:
    every distinct sequence once, in the order of its first trace, with its traces' count and
    time per position summed in trace order."""
    codes: list[int] = []
    dwell: list[float] = []
    first: list[bool] = []
    expected: dict[bytes, tuple[int, list[float]]] = {}
    for i, (head, tail, ms) in enumerate(traces):
        seq = [*head, *[(i + j) % 13 for j in range(tail)]]
        times = [ms * (p + 1) for p in range(len(seq))]
        codes += seq
        dwell += times
        first += [True] + [False] * (len(seq) - 1)
        weight, sums = expected.get(bytes(seq), (0, [0.0] * len(seq)))
        expected[bytes(seq)] = (weight + 1, [a + b for a, b in zip(sums, times, strict=True)])
    got = _sequences(
        np.array(codes, dtype=np.uint8),
        np.array(dwell, dtype=np.float64),
        np.array(first, dtype=bool),
    ).as_dict()
    assert list(got) == list(expected)
    for key, (weight, sums) in expected.items():
        assert got[key].weight == weight
        assert got[key].dwell_ms.tolist() == sums


@settings(max_examples=100, deadline=None)
@given(
    sequences=st.lists(
        st.lists(st.integers(0, len(CANONICAL_STATES) - 1), min_size=1, max_size=20),
        min_size=1,
        max_size=20,
        unique_by=tuple,
    )
)
def test_sequences_in_byte_order_are_sorted_as_bytes(sequences: list[list[int]]) -> None:
    """Node times add the sequences' times in the order of their codes as bytes (a prefix
    first): the flat sort gives that order, weights and times moved along."""
    flat = Sequences(
        np.array([c for s in sequences for c in s], dtype=np.uint8),
        np.array([len(s) for s in sequences], dtype=np.int64),
        np.arange(1, len(sequences) + 1, dtype=np.int64),
        np.arange(sum(map(len, sequences)), dtype=np.float64),
    )
    expected = dict(sorted(flat.as_dict().items()))
    got = flat.in_byte_order().as_dict()
    assert list(got) == list(expected)
    assert {k: (v.weight, v.dwell_ms.tolist()) for k, v in got.items()} == {
        k: (v.weight, v.dwell_ms.tolist()) for k, v in expected.items()
    }


@settings(max_examples=60, deadline=None)
@given(
    sequences=st.lists(
        st.lists(st.integers(0, len(CANONICAL_STATES) - 1), min_size=1, max_size=12),
        min_size=1,
        max_size=30,
    )
)
def test_chain_sums_are_those_of_the_chain(sequences: list[list[int]]) -> None:
    """The aggregate's chain sums, grouped by sorting keys, are the per-run chain's."""
    lengths = np.array([len(s) for s in sequences], dtype=np.int64)
    codes = np.array([c for s in sequences for c in s], dtype=np.uint8)
    v = Visits.of_sequences(codes, lengths)
    f = v.frame
    c = v.chain()
    expected = np.bincount(c.state_code, minlength=len(CANONICAL_STATES))
    for keys64 in (False, True):  # the keys of up to 2**24 traces, and of more
        got = _chain_sums(
            f.get_column("tid").to_numpy(),
            f.get_column("code").to_numpy(),
            f.get_column("first").to_numpy(),
            f.get_column("last").to_numpy(),
            v.n_traces,
            keys64=keys64,
        )
        for name in ("count", "traces", "syy", "syn", "n", "snn", "m"):
            assert getattr(got, name).tolist() == getattr(c, name).astype(float).tolist(), name
        assert got.state_traces.tolist() == expected.tolist()


@settings(max_examples=150, deadline=None)
@given(
    sequences=st.lists(
        st.lists(st.integers(0, len(CANONICAL_STATES) - 1), min_size=1, max_size=14),
        min_size=1,
        max_size=25,
    )
)
def test_distinct_sequences_with_the_split_states(sequences: list[list[int]]) -> None:
    """Codes past 15 (ApplicationLimited's causes) pack 5 bits a state (12 a sequence, longer
    ones compared as lists): every distinct sequence once, in first-seen order, with its
    weight, as counting them in Python gives."""
    codes = [c for s in sequences for c in s]
    first = [p == 0 for s in sequences for p in range(len(s))]
    got = _sequences(
        np.array(codes, dtype=np.uint8),
        np.ones(len(codes), dtype=np.float64),
        np.array(first, dtype=bool),
    ).as_dict()
    expected: dict[bytes, int] = {}
    for s in sequences:
        expected[bytes(s)] = expected.get(bytes(s), 0) + 1
    assert list(got) == list(expected)
    assert {k: v.weight for k, v in got.items()} == expected


@settings(max_examples=100, deadline=None)
@given(
    sequences=st.lists(
        st.lists(st.integers(0, len(CANONICAL_STATES) - 1), min_size=1, max_size=12),
        min_size=1,
        max_size=30,
    )
)
def test_transition_counts_with_the_split_states(sequences: list[list[int]]) -> None:
    """Pairs of 5-bit label codes (the split states' codes reach 16): the aggregate's pair
    counts are those counted in Python, INITIAL (0) and TERMINAL (last label) included."""
    from quicsm.stats.descriptive import NODE_LABELS

    lengths = np.array([len(s) for s in sequences], dtype=np.int64)
    codes = np.array([c for s in sequences for c in s], dtype=np.uint8)
    f = Visits.of_sequences(codes, lengths).frame
    got = _chain_sums(
        f.get_column("tid").to_numpy(),
        f.get_column("code").to_numpy(),
        f.get_column("first").to_numpy(),
        f.get_column("last").to_numpy(),
        len(sequences),
    )
    terminal = len(NODE_LABELS) - 1
    expected: dict[int, int] = {}
    for s in sequences:
        labels = [0, *(c + 1 for c in s), terminal]
        for x, y in zip(labels, labels[1:], strict=False):
            expected[x * 32 + y] = expected.get(x * 32 + y, 0) + 1
    present = np.flatnonzero(got.count)
    assert {int(p): int(got.count[p]) for p in present} == expected
