"""Many short traces cost what their bytes cost: the readers' per-trace work is batched across
traces (no polars frame built per trace), counted here as frames built and collected (work, not
time), and the batched rows are those of the trace-by-trace path."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_outcome import native
from polars.lazyframe.frame import LazyFrame
from test_native_metrics import _TRIGGER_RECORDS

from quicsm.extract import metric_columns
from quicsm.extract.loading import TIME_DECIMALS
from quicsm.extract.read import read_metrics, read_traces, read_transitions
from quicsm.extract.times import DECIMALS

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

_HEADER = (
    '{"qlog_format": "JSON-SEQ", "qlog_version": "0.3", "trace": {"vantage_point": {"type": "%s"}}}'
)
_METRICS = '{"time": %d, "name": "recovery:metrics_updated", "data": {"congestion_window": 12000}}'
_STATE = '{"time": 1, "name": "recovery:congestion_state_updated", "data": {"new": "recovery"}}'


def tiny_traces(directory: Path, n: int, kind: str) -> Path:
    """``n`` one-event traces (the campaign's family): JSON-SEQ, or one contained JSON
    document whose traces alternate a metrics event and an explicit state."""
    if kind == "seq":
        path = directory / f"tiny{n}.sqlog"
        one = f"\x1e{_HEADER % 'client'}\n\x1e{_METRICS % 0}\n"
        path.write_text(one * n)
        return path
    traces = [
        {"vantage_point": {"type": "server"}, "events": [json.loads(_METRICS % 0)]}
        if i % 2 == 0
        else {"vantage_point": {"type": "client"}, "events": [json.loads(_STATE)]}
        for i in range(n)
    ]
    path = directory / f"tiny{n}.qlog"
    path.write_text(json.dumps({"qlog_version": "0.3", "traces": traces}))
    return path


@contextmanager
def polars_work() -> Iterator[list[int]]:
    """Counts the frames built (``pl.DataFrame(...)``) and the lazy queries collected while
    the block runs."""
    counted = [0]
    init, collect = pl.DataFrame.__init__, LazyFrame.collect

    def counting_init(self: pl.DataFrame, *args: Any, **kwargs: Any) -> None:
        counted[0] += 1
        init(self, *args, **kwargs)

    def counting_collect(self: LazyFrame, *args: Any, **kwargs: Any) -> Any:
        counted[0] += 1
        return collect(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(pl.DataFrame, "__init__", counting_init)
        m.setattr(LazyFrame, "collect", counting_collect)
        yield counted


READERS: list[Callable[..., pl.DataFrame]] = [read_metrics, read_transitions, read_traces]


@pytest.mark.parametrize("kind", ["seq", "contained"])
@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.__name__)
@pytest.mark.parametrize("on", [True, False], ids=["native", "python"])
def test_polars_work_does_not_grow_with_the_number_of_traces(
    tmp_path: Path, kind: str, reader: Callable[..., pl.DataFrame], on: bool
) -> None:
    """Every reader builds and collects as many polars frames for 2,000 one-event traces as for
    20 (the campaign found ~12 per trace in read_metrics)."""
    counts = []
    for n in (20, 2000):
        path = tiny_traces(tmp_path, n, kind)
        with native(on), polars_work() as counted:
            frame = reader([path])
        assert frame.height >= n // 2
        counts.append(counted[0])
    assert counts[1] <= counts[0] + 2, counts


def test_times_round_as_the_frames_do() -> None:
    assert DECIMALS == TIME_DECIMALS


@st.composite
def _many_traces(draw: st.DrawFn) -> bytes:
    """JSON-SEQ with several traces of 0-12 events each: metrics with and without each value,
    losses with triggers, times that may go backwards."""
    out = []
    for _ in range(draw(st.integers(1, 8))):
        out.append(b"\x1e" + (_HEADER % draw(st.sampled_from(["client", "server"]))).encode())
        time = draw(st.sampled_from([0.0, 1.7e12]))
        for _ in range(draw(st.integers(0, 12))):
            time += draw(st.sampled_from([0.0, 0.1234, 5.0, 0.0005, -1.0]))
            template = draw(st.sampled_from(_TRIGGER_RECORDS))
            out.append(
                b"\x1e"
                + template.replace(b"%T", b"%.4f" % time)
                .replace(b"%C", b"%d" % draw(st.sampled_from([2400, 30000])))
                .replace(b"%F", b"%d" % draw(st.sampled_from([0, 1200])))
                .replace(b"%R", draw(st.sampled_from([b"0", b"35.25"])))
                .replace(b"%P", draw(st.sampled_from([b"0", b"2"])))
            )
    return b"".join(r + b"\n" for r in out)


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=_many_traces(), short=st.sampled_from([2, 5, 1 << 16]), on=st.booleans())
def test_batched_rows_are_the_trace_by_trace_rows(
    tmp_path: Path, data: bytes, short: int, on: bool
) -> None:
    """Short traces built together give the rows of each trace built on its own (carried values
    stop at each trace's start, triggers keep their names, traces whose times go backwards are
    sorted), whatever traces count as short and however small a block is."""
    path = tmp_path / "many.sqlog"
    path.write_bytes(data)
    with native(on), pytest.MonkeyPatch.context() as m:
        m.setattr(metric_columns, "METRIC_BLOCK", 4)
        m.setattr(metric_columns, "SHORT_TRACE_ROWS", short)
        batched = read_metrics([path], on_error="skip")
        m.setattr(metric_columns, "SHORT_TRACE_ROWS", 0)  # every trace on its own
        alone = read_metrics([path], on_error="skip")
    assert batched.equals(alone)
