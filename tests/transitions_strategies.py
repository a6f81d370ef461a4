"""Hypothesis strategies for transitions frames (shared by the model/stats/infer tests)."""

from __future__ import annotations

import polars as pl
from hypothesis import strategies as st

from quicsm.core.frames import normalize_transitions
from quicsm.core.states import CANONICAL_STATES, PAPER_STATES

#: the states drawn (Init is inserted by normalize_transitions when a trace lacks it).
DRAWN_STATES = [s for s in PAPER_STATES if s != "Init"] + ["Startup", "Unknown"]
assert set(DRAWN_STATES) <= set(CANONICAL_STATES)


@st.composite
def raw_traces(
    draw: st.DrawFn, *, max_traces: int = 6, max_len: int = 8
) -> list[tuple[str, list[float], list[str], float]]:
    """A list of (trace id, times, states, end_ms) with non-decreasing times from 0."""
    n = draw(st.integers(1, max_traces))
    out = []
    for i in range(n):
        length = draw(st.integers(1, max_len))
        states = draw(st.lists(st.sampled_from(DRAWN_STATES), min_size=length, max_size=length))
        gaps = draw(
            st.lists(
                st.one_of(st.just(0.0), st.floats(0.001, 500.0, allow_nan=False)),
                min_size=length,
                max_size=length,
            )
        )
        times = []
        t = 0.0
        for g in gaps:
            times.append(t)
            t += g
        tail = draw(st.one_of(st.just(0.0), st.floats(0.0, 500.0, allow_nan=False)))
        out.append((f"trace-{i:02d}", times, states, times[-1] + tail))
    return out


def frame_of(traces: list[tuple[str, list[float], list[str], float]]) -> pl.DataFrame:
    """A normalised transitions frame of :func:`raw_traces` output, in the given trace order."""
    rows = [
        {"trace": name, "time_ms": t, "state": s, "end_ms": end}
        for name, times, states, end in traces
        for t, s in zip(times, states, strict=True)
    ]
    df = pl.DataFrame(
        rows,
        schema={
            "trace": pl.String,
            "time_ms": pl.Float64,
            "state": pl.String,
            "end_ms": pl.Float64,
        },
    )
    return normalize_transitions(df)


@st.composite
def transitions_frames(draw: st.DrawFn, *, max_traces: int = 6, max_len: int = 8) -> pl.DataFrame:
    return frame_of(draw(raw_traces(max_traces=max_traces, max_len=max_len)))
