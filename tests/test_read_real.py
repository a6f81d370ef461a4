"""Real traces from the instrumented stacks (tests/fixtures/real, written by the lab tooling)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import orjson
import polars as pl
import pytest

from quicsm.core.diagnostics import QuicsmWarning
from quicsm.extract.read import read_metrics, read_traces, read_transitions
from quicsm.qlog.inspect import inspect_file

REAL = Path(__file__).parent / "fixtures" / "real"
FILES = (
    sorted(p for p in REAL.rglob("*") if p.is_file() and p.name != "run.json")
    if REAL.is_dir()
    else []
)

pytestmark = pytest.mark.skipif(not FILES, reason="no real traces committed yet")


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REAL)))
def test_real_trace_reads_cleanly(path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", QuicsmWarning)  # no unknown names, no truncation
        df = read_transitions(path)
        traces = read_traces(path)
        metrics = read_metrics(path)
    assert df["state"][0] == "Init" and df["time_ms"][0] == 0.0
    assert set(df["source"].cast(pl.String)[1:]) == {"explicit"}
    assert df["vantage"][0] == ("client" if path.name.startswith("client") else "server")
    assert metrics.height > 0 and metrics["cwnd_bytes"].drop_nulls().min() > 0  # type: ignore[operator]
    run = json.loads((path.parent / "run.json").read_text())
    labels = orjson.loads(traces["labels"][0])
    assert labels["stack"] == run["stack"] and labels["version"] == run["version"]
    if run["stack"] == "quic-go":
        assert traces["code_version"][0] == run["version"]
    report = inspect_file(path)
    assert report.n_problems == 0 and report.truncated is None
    assert report.traces[0].n_events == traces["n_events"][0]
    if run.get("scenario") == "loopback-blackout" and path.name.startswith("server"):
        states = df["state"].cast(pl.String).to_list()
        # a blackout makes the sender probe (TLP), then back off (RTO), then recover
        assert states.index("TailLossProbe") < states.index("RetransmissionTimeout")
        assert "Recovery" in states
