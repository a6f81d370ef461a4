"""The frame of derived-only traces, built once for many traces (``DerivedBatch``), against the
plain construction: one row per state change and an ``Init`` row per trace, value by value."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from quicsm.core.frames import TRANSITIONS_SCHEMA
from quicsm.extract.derived_batch import DerivedBatch
from quicsm.extract.deriver import STATE_CODES, CompactRows, DerivedState
from quicsm.extract.loading import TIME_DECIMALS

TRIGGERS = ("ack:slow_start", "cutback", "pto:first_pto", "ack", "undo:ä")

rows_of_a_trace = st.lists(
    st.tuples(
        st.floats(0, 1e4, allow_nan=False),
        st.sampled_from(STATE_CODES[1:]),
        st.sampled_from(TRIGGERS),
    ),
    max_size=12,
)
a_trace = st.tuples(
    st.sampled_from(("a.sqlog", "dir/b.qlog")),
    st.sampled_from(("client", "server", "unknown")),
    st.floats(-1e3, 1.7e12, allow_nan=False),
    st.floats(0, 1e5, allow_nan=False),
    rows_of_a_trace,
)


def compact(rows: list[tuple[float, str, str]], start: float) -> CompactRows:
    out = CompactRows()
    for t, state, trigger in sorted(rows):
        out.append(DerivedState(start + t, state, trigger))
    return out


def plain(traces: list[tuple[str, str, str, float, float, CompactRows]]) -> pl.DataFrame:
    columns: dict[str, list[object]] = {name: [] for name in TRANSITIONS_SCHEMA}
    for file, tid, vantage, start, end, rows in traces:
        timeline = [(start, "Init", None), *((r.time, r.state, r.trigger) for r in rows)]
        for t, state, trigger in timeline:
            columns["file"].append(file)
            columns["trace"].append(tid)
            columns["vantage"].append(vantage)
            time = np.round(np.float64(t) - np.float64(start), TIME_DECIMALS)
            columns["time_ms"].append(float(time))
            columns["state"].append(state)
            columns["raw_state"].append(None)
            columns["trigger"].append(trigger)
            columns["source"].append("derived")
            columns["end_ms"].append(end)
    return pl.DataFrame(
        {k: pl.Series(k, v, dtype=TRANSITIONS_SCHEMA[k]) for k, v in columns.items()}
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(a_trace, min_size=1, max_size=6))
def test_one_frame_for_many_traces_equals_the_plain_rows(
    drawn: list[tuple[str, str, float, float, list[tuple[float, str, str]]]],
) -> None:
    traces = [
        (file, f"{file}#{i:04d}", vantage, start, end, compact(rows, start))
        for i, (file, vantage, start, end, rows) in enumerate(drawn)
    ]
    batch = DerivedBatch()
    for trace in traces:
        batch.add(*trace)
    assert len(batch) == len(traces)
    built = batch.frame()
    assert built.schema == pl.Schema(TRANSITIONS_SCHEMA)
    assert_frame_equal(built, plain(traces))
