"""``file`` and ``trace`` are categorical in every frame quicsm returns, so that the frames join
with one another on them (and a metrics frame of millions of rows keeps four bytes a row for
each, not sixteen)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import quicsm
from quicsm.core.frames import KEY_DTYPE, METRICS_SCHEMA, TRANSITIONS_SCHEMA

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "traces" / "quic-go-v0.65.0.qlog"


@pytest.fixture(scope="module")
def frames() -> dict[str, pl.DataFrame]:
    transitions = quicsm.read_transitions(TRACE)
    return {
        "transitions": transitions,
        "traces": quicsm.read_traces(TRACE),
        "metrics": quicsm.read_metrics(TRACE),
        "time_in_state": quicsm.time_in_state(transitions),
        "transition_counts": quicsm.transition_counts(transitions),
        "dwell_times": quicsm.dwell_times(transitions),
        "identify": quicsm.identify(TRACE),
    }


def test_every_frame_has_categorical_keys(frames: dict[str, pl.DataFrame]) -> None:
    assert TRANSITIONS_SCHEMA["trace"] == METRICS_SCHEMA["file"] == KEY_DTYPE
    for name, frame in frames.items():
        assert frame.height > 0, name
        for key in ("file", "trace"):
            if key in frame.columns:
                assert frame.schema[key] == KEY_DTYPE, (name, key, frame.schema[key])


def test_the_frames_join_on_their_keys(frames: dict[str, pl.DataFrame]) -> None:
    traces = frames["traces"].select("file", "trace")
    for name in ("transitions", "metrics"):
        frame = frames[name]
        joined = frame.join(traces, on=["file", "trace"], how="inner")
        assert joined.height == frame.height, name  # every row's trace is listed
    by_trace = frames["time_in_state"].join(traces, on="trace", how="semi")
    assert by_trace.height == frames["time_in_state"].height
    tid = traces.get_column("trace")[0]
    one = frames["metrics"].filter(pl.col("trace") == tid)  # compared with a string as a string
    assert one.height > 0
    assert set(one.get_column("trace").cast(pl.String).unique()) == {tid}


def test_a_users_string_keys_join_after_a_cast(frames: dict[str, pl.DataFrame]) -> None:
    traces = frames["traces"]
    mine = pl.DataFrame(
        {"trace": traces.get_column("trace").cast(pl.String), "run": range(traces.height)}
    )
    with pytest.raises(pl.exceptions.SchemaError):
        traces.join(mine, on="trace")
    joined = traces.join(mine.with_columns(pl.col("trace").cast(KEY_DTYPE)), on="trace")
    assert joined.get_column("run").to_list() == list(range(traces.height))


def test_keys_sort_by_their_text() -> None:
    names = ["b.qlog#0001", "a.qlog#0002", "b.qlog#0000", "a.qlog#0010"]
    frame = pl.DataFrame({"trace": pl.Series(names[::-1], dtype=KEY_DTYPE)})
    assert frame.sort("trace").get_column("trace").to_list() == sorted(names)
