"""The conformance view: a group against itself is at zero; known answers; clear errors."""

from __future__ import annotations

import functools
from pathlib import Path

import orjson
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.compare.conformance import CONFORMANCE_SCHEMA, conformance, conformance_table
from quicsm.compare.load import read_labelled
from quicsm.core.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "benchmarks" / "corpora" / "linux-tcp.qlog"
QUIC = ROOT / "benchmarks" / "corpora" / "conformance-quic-go.qlog"


Frames = tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]


@functools.cache
def kernel_frames() -> Frames:
    transitions, traces, metrics = read_labelled([str(KERNEL)], on_error="raise", metrics=True)
    assert metrics is not None
    return transitions, traces, metrics.filter(pl.col("event") == "metrics")


def _copy(frames: Frames, *, scale: float = 1.0) -> Frames:
    """The same traces again as stack=copy (trace names suffixed), windows times ``scale``."""
    transitions, traces, metrics = frames

    def renamed(df: pl.DataFrame) -> pl.DataFrame:
        return df.with_columns((pl.col("trace").cast(pl.Utf8) + "-copy").alias("trace"))

    labels = [orjson.dumps({**orjson.loads(s), "stack": "copy"}).decode() for s in traces["labels"]]
    both_t = pl.concat(
        [transitions.with_columns(pl.col("trace").cast(pl.Utf8)), renamed(transitions)],
        how="vertical_relaxed",
    )
    both_tr = pl.concat(
        [
            traces.with_columns(pl.col("trace").cast(pl.Utf8)),
            renamed(traces).with_columns(pl.Series("labels", labels)),
        ],
        how="vertical_relaxed",
    )
    both_m = pl.concat(
        [
            metrics.with_columns(pl.col("trace").cast(pl.Utf8)),
            renamed(metrics).with_columns(pl.col("cwnd_bytes") * scale),
        ],
        how="vertical_relaxed",
    )
    return both_t, both_tr, both_m


def test_a_group_against_itself_is_at_zero() -> None:
    t, tr, m = _copy(kernel_frames())
    table = conformance_table(t, tr, m, by="stack", reference="linux-tcp", resamples=200)
    assert table.schema == pl.Schema(CONFORMANCE_SCHEMA)
    assert set(table["candidate"]) == {"copy"}
    assert set(table["measure"]) == {
        "time_in_state",
        "transition",
        "cwnd_distance",
        "throughput_ratio",
    }
    differences = table.filter(pl.col("measure").is_in(["time_in_state", "transition"]))
    assert differences["estimate"].drop_nans().abs().max() < 1e-12
    assert table.filter(pl.col("measure") == "cwnd_distance")["estimate"].abs().max() < 1e-12
    ratios = table.filter(pl.col("measure") == "throughput_ratio")["estimate"]
    assert (ratios - 1).abs().max() < 1e-12
    finite = table.filter(pl.col("low").is_not_nan())
    assert (finite["low"] <= finite["high"]).all()


def test_twice_the_window_is_distance_one() -> None:
    t, tr, m = _copy(kernel_frames(), scale=2.0)
    table = conformance_table(t, tr, m, by="stack", reference="linux-tcp", resamples=50)
    dist = table.filter(pl.col("measure") == "cwnd_distance")["estimate"]
    assert dist.len() > 0 and ((dist - 1.0).abs() < 1e-9).all()


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(st.floats(0.1, 10.0))
def test_distance_is_the_relative_change_of_the_window(scale: float) -> None:
    t, tr, m = _copy(kernel_frames(), scale=scale)
    table = conformance_table(t, tr, m, by="stack", reference="linux-tcp", resamples=20)
    dist = table.filter(pl.col("measure") == "cwnd_distance")["estimate"]
    assert ((dist - abs(scale - 1.0)).abs() < 1e-9).all()


def test_errors_name_what_there_is() -> None:
    with pytest.raises(InputError, match=r"no trace has stack=quiche \(values: linux-tcp\)"):
        conformance([str(KERNEL)], reference="quiche", resamples=10)
    with pytest.raises(InputError, match="nothing to compare"):
        conformance([str(KERNEL)], reference="linux-tcp", resamples=10)


@pytest.mark.slow
def test_quic_against_the_kernel_on_the_shipped_runs() -> None:
    table = conformance(
        [str(KERNEL), str(QUIC)], where={"cc_algorithm": "cubic"}, resamples=200, seed=1
    )
    assert set(table["candidate"]) == {"quic-go"}
    assert set(table["scenario"]) == {
        "baseline",
        "loss1",
        "jitter",
        "ratecap",
        "outage",
        "slowdevice",
    }
    assert (table["n_reference"] == 5).all() and (table["n_candidate"] == 5).all()
    # the same seed gives the same table
    again = conformance(
        [str(KERNEL), str(QUIC)], where={"cc_algorithm": "cubic"}, resamples=200, seed=1
    )
    assert table.equals(again, null_equal=True)


def test_report_section_shows_every_scenario_with_intervals() -> None:
    from quicsm.report.conformance import ConformanceView, to_html, to_markdown

    table = conformance(
        [str(KERNEL), str(QUIC)], where={"cc_algorithm": "cubic"}, resamples=100, seed=1
    )
    view = ConformanceView(reference="linux-tcp", by="stack", table=table)
    md = to_markdown(view)
    assert md.startswith("## Conformance: against stack = linux-tcp")
    for scenario in set(table["scenario"]):
        assert f"| {scenario} | quic-go | 5 / 5 | " in md
    html = to_html(view)
    assert html.count("<tr>") == md.count("\n| ")  # every row and header, both tables
    assert to_markdown(view) == md  # deterministic


def test_diff_by_stack_across_kernel_and_quic_traces() -> None:
    """The existing commands compare the kernel's traces with a QUIC stack's like any groups."""
    from click.testing import CliRunner

    from quicsm.cli import main

    args = ["diff", str(KERNEL), str(QUIC), "--by", "stack", "--where", "cc_algorithm=cubic"]
    result = CliRunner().invoke(main, [*args, "--where", "scenario=jitter", "--format", "json"])
    assert result.exit_code == 0, result.output
    body = result.output[result.output.index("{") :]
    out = orjson.loads(body)
    groups = out["groups"]
    assert (groups["a"]["name"], groups["b"]["name"]) == ("stack=linux-tcp", "stack=quic-go")
    assert groups["a"]["n_traces"] == groups["b"]["n_traces"] == 5
    # reordering: quic-go's time in Recovery and CongestionAvoidance differ from the kernel's
    assert out["any_significant"] is True
