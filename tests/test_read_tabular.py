"""Transition tables (CSV/Parquet) read into the same frame as qlog."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest

from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.core.errors import QlogError
from quicsm.core.frames import TRANSITIONS_SCHEMA
from quicsm.extract.read import read_traces, read_transitions

FIX = Path(__file__).parent / "fixtures" / "qlog"


def test_csv_fixture() -> None:
    with pytest.warns(QuicsmWarning, match="'Mystery'"):
        df = read_transitions(FIX / "transitions.csv")
    assert dict(df.schema) == TRANSITIONS_SCHEMA
    a = df.filter(pl.col("trace") == "run-a")
    assert a["state"].cast(pl.String).to_list() == [
        "Init",
        "SlowStart",
        "Recovery",
        "CongestionAvoidance",
    ]
    assert a["raw_state"].to_list() == [None, "SlowStart", "recovery", "CongestionAvoidance"]
    assert a["trigger"].to_list()[2] == "packet_lost"
    assert a["end_ms"].unique().to_list() == [30.0]
    b = df.filter(pl.col("trace") == "run-b")
    assert b["state"].cast(pl.String).to_list() == ["Init", "SlowStart", "Unknown"]
    assert b["raw_state"].to_list()[-1] == "Mystery"


def test_parquet_and_gzip_csv_give_the_same_frame(tmp_path: Path) -> None:
    with pytest.warns(QuicsmWarning):
        base = read_transitions(FIX / "transitions.csv")
    pl.read_csv(FIX / "transitions.csv").write_parquet(tmp_path / "t.parquet")
    (tmp_path / "t.csv.gz").write_bytes(gzip.compress((FIX / "transitions.csv").read_bytes()))
    for name in ("t.parquet", "t.csv.gz"):
        with pytest.warns(QuicsmWarning):
            df = read_transitions(tmp_path / name)
        assert df.drop("file").equals(base.drop("file")), name
    with pytest.warns(QuicsmWarning):
        traces = read_traces(tmp_path / "t.parquet")
    assert traces["n_events"].to_list() == [3, 2]


def test_minimal_table_gets_defaults(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text("state,time_ms,trace\nslow_start,5,t1\ncongestion_avoidance,9.5,t1\n")
    df = read_transitions(path)
    row = df.row(1, named=True)
    assert row["state"] == "SlowStart" and row["raw_state"] == "slow_start"
    assert row["vantage"] == "unknown" and row["source"] == "explicit" and row["file"] == str(path)
    assert df["time_ms"].to_list() == [5.0, 5.0, 9.5]  # Init at the first row


def test_bad_rows_name_their_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("trace,time_ms,state\nt,1,SlowStart\nt,soon,Recovery\nt,3,\n")
    with pytest.raises(QlogError) as info:
        read_transitions(path)
    assert str(info.value) == f"{path}: line 3: expected a number in time_ms, got 'soon'"
    diag = Diagnostics()
    with pytest.warns(QuicsmWarning, match="skipped 2 records"):
        df = read_transitions(path, on_error="skip", diagnostics=diag)
    assert diag.reasons[1] == f"{path}: line 4: expected a state name, got None"
    assert df.height == 2


def test_missing_columns(tmp_path: Path) -> None:
    path = tmp_path / "cols.csv"
    path.write_text("trace,time_ms,state_name\nt,1,x\n")
    with pytest.raises(QlogError) as info:
        read_transitions(path)
    assert str(info.value) == (
        f"{path}: line 1: expected columns trace, time_ms and state, "
        "got columns trace, time_ms, state_name"
    )
    pl.DataFrame({"trace": ["t"], "time": [1.0]}).write_parquet(tmp_path / "p.parquet")
    with pytest.raises(
        QlogError,
        match=r"p.parquet: expected columns trace, time_ms and state, got columns trace, time",
    ):
        read_transitions(tmp_path / "p.parquet")
