"""The tabular reader's finish step: one ``end_ms`` per trace, rows kept in order."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.qlog.tabular import _finish

rows_st = st.lists(
    st.tuples(
        st.sampled_from("abcde"),
        st.floats(0, 1e6, allow_nan=False),
        st.none() | st.floats(0, 1e6, allow_nan=False),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(rows_st, st.integers(0, 40), st.booleans(), st.booleans())
def test_end_is_the_largest_given_end_and_the_last_time_when_one_is_missing(
    rows: list[tuple[str, float, float | None]], cut: int, grouped: bool, no_end: bool
) -> None:
    if grouped:  # each trace's rows one after another (runs), in any order of the traces
        rows = sorted(rows, key=lambda r: "cabed".index(r[0]))
    if no_end:  # no end_ms given (the usual table)
        rows = [(t, time, None) for t, time, _ in rows]
    frame = pl.DataFrame(
        rows, schema={"trace": pl.String, "time_ms": pl.Float64, "end_ms": pl.Float64}, orient="row"
    ).with_columns(pl.lit("unknown").alias("vantage"))
    parts = [frame[:cut], frame[cut:]] if 0 < cut < len(rows) else [frame]
    summary: list[pl.DataFrame] = []
    out = _finish(parts, summary)
    # the summary read off the finished rows is the group-by of them
    expected = (
        out.group_by("trace", maintain_order=True)
        .agg(pl.col("vantage").first(), pl.len().alias("n"), pl.col("end_ms").max())
        .select("trace", "vantage", "n", "end_ms")
    )
    assert summary[0].equals(expected)
    assert out.columns == frame.columns
    assert out.select("trace", "time_ms").equals(frame.select("trace", "time_ms"))
    for trace in {t for t, _, _ in rows}:
        mine = [(t, e) for tr, t, e in rows if tr == trace]
        ends = [e for _, e in mine if e is not None]
        last = max(t for t, _ in mine)
        expected = max(ends) if len(ends) == len(mine) else max([*ends, last])
        got = out.filter(pl.col("trace") == trace).get_column("end_ms").to_list()
        assert got == [expected] * len(mine)
