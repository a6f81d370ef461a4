"""``compute_features`` converts the metrics frame's columns once and hands each trace its rows
(:class:`quicsm.controllers.features.TraceColumns`): the features are the ones each trace's own
frame gives, to the last float, whatever the order of the traces' rows in the frame."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.controllers.batch_features import compute_features
from quicsm.controllers.features import _rows_between, trace_features
from quicsm.extract.read import read_metrics, read_transitions

ROOT = Path(__file__).resolve().parent.parent
STACKS = ROOT / "traces" / "stacks" / "stacks.qlog"


@pytest.fixture(scope="module")
def frames() -> tuple[pl.DataFrame, pl.DataFrame]:
    return read_metrics(STACKS), read_transitions(STACKS)


def _same(a: Any, b: Any) -> bool:
    return a == b or (
        isinstance(a, float)
        and isinstance(b, float)
        and math.isnan(a) == math.isnan(b)
        and math.isnan(a)
    )


def _per_trace(metrics: pl.DataFrame, transitions: pl.DataFrame) -> list[dict[str, Any]]:
    """Each trace's features from its own frames, one trace at a time."""
    rows = []
    for key, frame in transitions.group_by("trace", maintain_order=True):
        own = metrics.filter(pl.col("trace") == key[0])
        rows.append(trace_features(str(key[0]), str(frame["vantage"][0]), own, frame))
    return rows


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_features_of_interleaved_rows_are_each_traces_own(
    frames: tuple[pl.DataFrame, pl.DataFrame], seed: int
) -> None:
    """The traces' rows shuffled among one another (each trace's own rows kept in order): the
    same features as each trace's frame read apart."""
    metrics, transitions = frames
    shuffled = (
        metrics.with_columns(pl.int_range(pl.len()).shuffle(seed).alias("_key"))
        .with_columns(pl.col("_key").sort().over("trace"))
        .sort("_key")
        .drop("_key")
    )
    assert not shuffled["trace"].equals(metrics["trace"])  # the rows did move
    got = compute_features(shuffled, transitions).to_dicts()
    want = _per_trace(metrics, transitions)
    assert len(got) == len(want) == transitions["trace"].n_unique()
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        assert all(_same(g[k], w[k]) for k in g), g["trace"]


def test_a_trace_without_metrics_rows_has_empty_features(
    frames: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    metrics, transitions = frames
    first = transitions["trace"][0]
    row = compute_features(metrics.filter(pl.col("trace") != first), transitions).row(0, named=True)
    assert row["trace"] == str(first) and row["n_metrics"] == 0 and row["beta"] is None


@settings(max_examples=200, deadline=None)
@given(
    times=st.lists(st.floats(0.0, 1000.0), max_size=60),
    windows=st.lists(st.one_of(st.none(), st.floats(1.0, 1e6)), min_size=60, max_size=60),
    start=st.floats(-10.0, 1010.0),
    length=st.floats(0.0, 500.0),
)
def test_rows_between_by_bisection_are_the_rows_compared(
    times: list[float], windows: list[float | None], start: float, length: float
) -> None:
    """Over sorted times the bisection finds the rows that comparing every time finds (ties at
    either end included)."""
    t = np.array(sorted(times), dtype=float)
    w = np.array([np.nan if v is None else v for v in windows[: len(t)]], dtype=float)
    ends = [(x, x + length) for x in t[:3]] + [(x - length, x) for x in t[-3:]]
    for begin, end in [(start, start + length), (start, start), *ends]:
        fast = _rows_between(t, w, begin, end, ordered=True)
        slow = _rows_between(t, w, begin, end, ordered=False)
        assert fast.tolist() == slow.tolist()
