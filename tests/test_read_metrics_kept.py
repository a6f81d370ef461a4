"""A long trace's blocks are kept compact until the trace is finished
(``quicsm.extract.metric_columns._kept``): only the columns that hold a value in the block,
handed over by the native core one by one. The frame does not depend on it: a trace read in
blocks of a few events (kept parts, finished one at a time with what earlier parts carried)
gives the rows of the same trace read whole (the short traces' path, a different
normalisation), with the native core and without it, whatever metrics a block leaves out, with
the stand-ins producers log (u64::MAX, the 333 ms placeholder, RTTs in seconds, zero rates)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_outcome import native
from polars.testing import assert_frame_equal

from quicsm.core.frames import METRICS_SCHEMA
from quicsm.extract import metric_columns
from quicsm.extract.read import read_metrics
from quicsm.extract.sentinels import INITIAL_RTT_MS
from quicsm.qlog.events import MetricEvent

HEADER = {
    "qlog_format": "JSON-SEQ",
    "qlog_version": "0.3",
    "trace": {"vantage_point": {"type": "client"}, "common_fields": {"time_format": "relative"}},
}

_RTT = st.sampled_from([0, INITIAL_RTT_MS, INITIAL_RTT_MS / 1000, 12.5, 0.04, 40])
#: qlog key -> values, stand-ins among them
_METRICS = {
    "congestion_window": st.sampled_from([12000, 14720, 30000]),
    "bytes_in_flight": st.sampled_from([0, 1200, 9600]),
    "ssthresh": st.sampled_from([2**64 - 1, 14720, 2**62]),
    "smoothed_rtt": _RTT,
    "min_rtt": _RTT,
    "latest_rtt": _RTT,
    "rtt_variance": _RTT,
    "pto_count": st.integers(0, 3),
    "pacing_rate": st.sampled_from([0, 1.5e6]),
}
_metrics_event = st.fixed_dictionaries(
    {"name": st.just("recovery:metrics_updated")},
    optional={**_METRICS, "trigger": st.sampled_from(["ack", "loss"])},
)
_lost_event = st.fixed_dictionaries(
    {"name": st.just("recovery:packet_lost")},
    optional={"trigger": st.sampled_from(["reordering_threshold", "time_threshold"])},
)
_pto_event = st.just({"name": "recovery:loss_timer_updated", "timer_type": "pto"}).map(
    lambda e: {**e, "event_type": "expired"}
)
#: a trace: its events and the time steps between them (0: the same time)
_trace = st.lists(
    st.tuples(st.one_of(_metrics_event, _lost_event, _pto_event), st.sampled_from([0, 0.5, 7])),
    min_size=1,
    max_size=30,
)


def _write(path: Path, events: list[tuple[dict[str, object], float]]) -> None:
    records = [orjson.dumps(HEADER)]
    time = 0.0
    for event, step in events:
        time += step
        data = {k: v for k, v in event.items() if k != "name"}
        records.append(orjson.dumps({"time": time, "name": event["name"], "data": data}))
    path.write_bytes(b"".join(b"\x1e" + r + b"\n" for r in records))


@contextmanager
def _block(events: int) -> Iterator[None]:
    """Blocks of ``events`` events (the readers keep a part every block)."""
    default = metric_columns.METRIC_BLOCK
    metric_columns.METRIC_BLOCK = events
    try:
        yield
    finally:
        metric_columns.METRIC_BLOCK = default


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(events=_trace, block=st.sampled_from([1, 2, 5]), on=st.booleans())
def test_kept_parts_give_the_rows_of_the_trace_read_whole(
    tmp_path: Path, events: list[tuple[dict[str, object], float]], block: int, on: bool
) -> None:
    path = tmp_path / "t.sqlog"
    _write(path, events)
    with native(on):
        whole = read_metrics(path)  # one block: the short traces' path
        with _block(block):
            parts = read_metrics(path)
    assert whole.schema == pl.Schema(METRICS_SCHEMA)
    assert whole.height == len(events)
    assert_frame_equal(parts, whole)


@pytest.mark.parametrize("on", [True, False], ids=["native", "python"])
def test_a_kept_part_holds_only_the_columns_with_a_value(on: bool) -> None:
    """The parts a trace keeps: the time and kind always; a metric, the sample and the
    trigger codes only in the blocks where an event carries them."""
    events = [
        MetricEvent(1.0, "metrics", {"cwnd_bytes": 12000.0, "ssthresh_bytes": float(2**64 - 1)}),
        MetricEvent(2.0, "metrics", {"cwnd_bytes": 14000.0}),
        MetricEvent(3.0, "packet_lost", {}, trigger="time_threshold"),
        MetricEvent(4.0, "metrics", {"latest_rtt_ms": 40.0, "rtt_variance_ms": 3.0}),
        MetricEvent(5.0, "pto", {"pto_count": 1.0}),
        MetricEvent(6.0, "metrics", {}),
    ]
    with native(on), _block(2):
        columns = metric_columns.MetricColumns()
        for event in events:
            columns(event)
            columns.wanted()  # where the readers ask: a block is kept
            if not on:
                assert columns.native_deriver is None
        columns._flush()
        kept = [part.columns for part in columns.parts]
        frame = pl.concat(columns.frames("f", "f#0000", "client", 1.0))
    assert kept == [
        ["_t", "kind", "cwnd_bytes", "ssthresh_bytes"],
        ["_t", "kind", "latest_rtt_ms", "trigger"],
        ["_t", "kind", "pto_count"],
    ]
    assert frame.schema == pl.Schema(METRICS_SCHEMA)
    assert frame["cwnd_bytes"].to_list() == [12000.0] + [14000.0] * 5  # carried across parts
    assert frame["ssthresh_bytes"].to_list() == [None] * 6  # u64::MAX: not set
    assert frame["latest_rtt_ms"].to_list() == [None, None, None, 40.0, None, None]
    assert frame["pto_count"].to_list() == [None] * 4 + [1, 1]
    assert frame["trigger"].to_list() == [None, None, "time_threshold", None, None, None]
    assert frame["time_ms"].to_list() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
