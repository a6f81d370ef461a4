"""``read_metrics`` holds a long trace as compact frame parts of ``METRIC_BLOCK`` events: the
rows do not depend on where the parts end, and they are what the events say (in time order,
every metric carried forward across parts). The readers refuse (or repair) times that go
backwards within a trace; the parts are sorted all the same if such events reach them."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from quicsm.core.frames import METRICS_SCHEMA
from quicsm.extract import metric_columns
from quicsm.extract.read import read_metrics
from quicsm.qlog.events import MetricEvent

HEADER = {
    "qlog_format": "JSON-SEQ",
    "qlog_version": "0.3",
    "trace": {"vantage_point": {"type": "server"}, "common_fields": {"time_format": "absolute"}},
}
#: (qlog data key, read_metrics column) of the metrics a metrics_updated event may carry
KEYS = (
    ("congestion_window", "cwnd_bytes"),
    ("bytes_in_flight", "bytes_in_flight"),
    ("smoothed_rtt", "smoothed_rtt_ms"),
    ("pto_count", "pto_count"),
)
#: the columns carried forward within a trace
CARRIED = (
    "cwnd_bytes",
    "bytes_in_flight",
    "ssthresh_bytes",
    "smoothed_rtt_ms",
    "min_rtt_ms",
    "pto_count",
    "pacing_rate_bps",
)

metrics_event = st.fixed_dictionaries(
    {"name": st.just("recovery:metrics_updated"), "time": st.integers(0, 40)},
    optional={
        "congestion_window": st.integers(1200, 10**6),
        "bytes_in_flight": st.integers(0, 10**6),
        "smoothed_rtt": st.floats(0.5, 500, allow_nan=False).map(lambda x: round(x, 3)),
        "latest_rtt": st.floats(0.5, 500, allow_nan=False).map(lambda x: round(x, 3)),
        "pto_count": st.integers(0, 9),
    },
)
lost_event = st.fixed_dictionaries(
    {"name": st.just("recovery:packet_lost"), "time": st.integers(0, 40)},
    optional={"trigger": st.sampled_from(["reordering_threshold", "time_threshold"])},
)


def _write(path: Path, events: list[dict[str, object]]) -> None:
    records = [orjson.dumps(HEADER)]
    for e in events:
        data = {k: v for k, v in e.items() if k not in ("name", "time")}
        records.append(orjson.dumps({"time": e["time"], "name": e["name"], "data": data}))
    path.write_bytes(b"".join(b"\x1e" + r + b"\n" for r in records))


def _expected(path: Path, events: list[dict[str, object]]) -> pl.DataFrame:
    """The rows, worked out from the events with nothing of the reader's."""
    start = float(events[0]["time"])  # type: ignore[arg-type]
    rows = []
    for e in events:
        metrics = e["name"] == "recovery:metrics_updated"
        row: dict[str, object] = {
            "t": float(e["time"]),  # type: ignore[arg-type]
            "event": "metrics" if metrics else "packet_lost",
            "latest_rtt_ms": e.get("latest_rtt") if metrics else None,
            "trigger": e.get("trigger"),
        }
        for key, column in KEYS:
            row[column] = e.get(key) if metrics else None
        rows.append(row)
    frame = pl.DataFrame(
        rows,
        schema={
            "t": pl.Float64,
            "event": METRICS_SCHEMA["event"],
            "latest_rtt_ms": pl.Float64,
            "trigger": pl.String,
            **{c: METRICS_SCHEMA[c] for _, c in KEYS},
        },
    ).sort("t", maintain_order=True)
    n = frame.height
    return frame.select(
        pl.lit(str(path)).cast(METRICS_SCHEMA["file"]).alias("file"),
        pl.lit(f"{path}#0000").cast(METRICS_SCHEMA["trace"]).alias("trace"),
        pl.lit("server").cast(METRICS_SCHEMA["vantage"]).alias("vantage"),
        (pl.col("t") - start).round(3).alias("time_ms"),
        "event",
        *[
            (pl.col(c).forward_fill() if c in frame.columns else pl.repeat(None, n))
            .cast(METRICS_SCHEMA[c])
            .alias(c)
            for c in CARRIED
        ],
        "latest_rtt_ms",
        "trigger",
    ).select(list(METRICS_SCHEMA))


@settings(max_examples=60, deadline=None)
@given(events=st.lists(st.one_of(metrics_event, lost_event), min_size=1, max_size=40))
def test_rows_do_not_depend_on_where_the_parts_end(
    tmp_path_factory: pytest.TempPathFactory, events: list[dict[str, object]]
) -> None:
    times = sorted(int(e["time"]) for e in events)  # type: ignore[call-overload]
    events = [{**e, "time": t} for e, t in zip(events, times, strict=True)]
    path = tmp_path_factory.mktemp("m") / "t.sqlog"
    _write(path, events)
    whole = read_metrics(path)
    assert whole.schema == pl.Schema(METRICS_SCHEMA)
    assert_frame_equal(whole, _expected(path, events))
    default = metric_columns.METRIC_BLOCK
    try:
        for block in (1, 3, 7):
            metric_columns.METRIC_BLOCK = block
            assert_frame_equal(read_metrics(path), whole)
    finally:
        metric_columns.METRIC_BLOCK = default


def test_parts_of_a_long_trace_carry_every_metric_forward(tmp_path: Path) -> None:
    """Values logged once, in the first part, reach the last one; a metric first logged in a
    later part is null before it."""
    events: list[dict[str, object]] = [
        {"name": "recovery:metrics_updated", "time": 1, "congestion_window": 5000}
    ]
    events += [{"name": "recovery:metrics_updated", "time": 2 + i} for i in range(20)]
    events += [{"name": "recovery:packet_lost", "time": 22, "trigger": "time_threshold"}]
    events += [{"name": "recovery:metrics_updated", "time": 30, "pto_count": 2}]
    path = tmp_path / "long.sqlog"
    _write(path, events)
    default = metric_columns.METRIC_BLOCK
    try:
        metric_columns.METRIC_BLOCK = 4
        frame = read_metrics(path)
    finally:
        metric_columns.METRIC_BLOCK = default
    assert_frame_equal(frame, _expected(path, events))
    assert frame["cwnd_bytes"].to_list() == [5000] * len(events)
    assert frame["pto_count"].to_list() == [None] * (len(events) - 1) + [2]
    assert frame["trigger"].to_list() == [None] * 21 + ["time_threshold", None]


def test_events_out_of_time_order_are_sorted_stably_across_parts() -> None:
    """The columns themselves (fed events directly: no reader lets such times through)."""
    default = metric_columns.METRIC_BLOCK
    try:
        metric_columns.METRIC_BLOCK = 3
        columns = metric_columns.MetricColumns()
        times = [5.0, 1.0, 5.0, 0.0, 2.0, 1.0, 9.0]
        for i, t in enumerate(times):
            columns(MetricEvent(t, "metrics", {"cwnd_bytes": float(i)}))
        parts = columns.frames("f", "f#0000", "client", 0.0)
    finally:
        metric_columns.METRIC_BLOCK = default
    frame = pl.concat(parts)
    assert frame["time_ms"].to_list() == sorted(times)
    # stable: equal times keep the order they came in
    assert frame["cwnd_bytes"].to_list() == [3.0, 1.0, 5.0, 4.0, 0.0, 2.0, 6.0]
    assert frame.schema == pl.Schema(METRICS_SCHEMA)
