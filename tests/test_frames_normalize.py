"""normalize_transitions skips the copies it does not need: the result is the same as the
plain algorithm's (sort, insert Init, drop repeats) on any frame, in order or not."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal
from transitions_strategies import DRAWN_STATES

from quicsm.core.frames import STATE_DTYPE, TRANSITIONS_SCHEMA, normalize_transitions


def reference(df: pl.DataFrame) -> pl.DataFrame:
    """The plain algorithm, every step taken: stable sort by trace and time, an Init before each
    trace that does not start with one, consecutive repeats dropped, end_ms at least the last
    time."""
    df = df.select([pl.col(n).cast(t) for n, t in TRANSITIONS_SCHEMA.items()])
    df = df.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("_order"))
    df = df.sort(["trace", "time_ms", "_order"], maintain_order=True)
    inits = (
        df.group_by("trace", maintain_order=True)
        .first()
        .filter(pl.col("state") != "Init")
        .with_columns(
            pl.lit("Init", STATE_DTYPE).alias("state"),
            pl.lit(None, pl.String()).alias("raw_state"),
            pl.lit(None, pl.String()).alias("trigger"),
            pl.lit("derived", TRANSITIONS_SCHEMA["source"]).alias("source"),
            pl.lit(-1, pl.Int64()).alias("_order"),
        )
    )
    df = pl.concat([inits.select(df.columns), df]).sort(
        ["trace", "time_ms", "_order"], maintain_order=True
    )
    previous = pl.col("state").shift(1).over("trace")
    df = df.with_columns(
        pl.max_horizontal("end_ms", pl.col("time_ms").max().over("trace")).alias("end_ms")
    )
    return df.filter((pl.col("state") != previous) | previous.is_null()).drop("_order")


ROW = st.tuples(
    st.sampled_from(["a#0", "b#0", "c#1"]),
    st.sampled_from([0.0, 1.0, 2.5, 2.5, 7.0]),
    st.sampled_from(["Init", *DRAWN_STATES]),
    st.sampled_from([5.0, 5.0, None, 1.0, 9.0]),  # end_ms, not always the same in a trace
)


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(ROW, min_size=0, max_size=30), presort=st.booleans())
def test_same_as_the_plain_algorithm(
    rows: list[tuple[str, float, str, float | None]], presort: bool
) -> None:
    if presort:  # the fast path: already in order (Init first or not, repeats or not)
        rows = sorted(rows, key=lambda r: (r[0], r[1]))
    df = pl.DataFrame(
        {
            "file": ["f"] * len(rows),
            "trace": [r[0] for r in rows],
            "vantage": ["server"] * len(rows),
            "time_ms": [r[1] for r in rows],
            "state": [r[2] for r in rows],
            "raw_state": [None] * len(rows),
            "trigger": [str(i) for i in range(len(rows))],  # tells tied rows apart
            "source": ["explicit"] * len(rows),
            "end_ms": [r[3] for r in rows],
        },
        schema={
            k: (pl.String if k in ("state", "vantage", "source") else v)
            for k, v in TRANSITIONS_SCHEMA.items()
        },  # fmt: skip
    )
    assert_frame_equal(normalize_transitions(df), reference(df))
