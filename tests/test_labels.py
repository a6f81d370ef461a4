"""Finding labels: `quicsm labels`, --where semantics ("one of" for repeated keys), errors that
list the valid keys, FILE#N selection, and the note on traces without congestion information."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from quicsm.cli import main
from quicsm.compare.grouping import parse_where
from quicsm.compare.labels import compact_keys, label_table, matches
from quicsm.compare.load import traces_where
from quicsm.compare.selection import select_traces, split_trace_spec
from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.extract.read import read_transitions

REAL = Path(__file__).parent / "fixtures" / "real"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


values = st.lists(st.text("abcxyz019.", min_size=1, max_size=5), min_size=1, max_size=5)


@given(values)
def test_repeated_where_key_means_one_of(vs: list[str]) -> None:
    repeated = parse_where([f"scenario={v}" for v in vs])
    assert repeated == parse_where(["scenario=" + ",".join(vs)])
    for v in vs:
        assert matches({"scenario": v}, repeated)
    assert not matches({"scenario": "not-listed"}, repeated)
    assert not matches({}, repeated)


def test_label_counts_add_up_to_the_traces() -> None:
    traces = traces_where([str(REAL)], where={}, on_error="raise")
    table = label_table(traces["labels"].to_list())
    per_key = table.group_by("key").agg(pl.col("traces").sum())
    assert per_key["traces"].max() == traces.height == 6
    code, out, err = run("labels", str(REAL), "--format", "csv")
    assert code == 0 and err == ""
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {"key": "vantage", "value": "server", "traces": "3"} in rows
    assert {"key": "stack", "value": "quic-go", "traces": "4"} in rows
    code, out, _ = run("labels", str(REAL))
    assert code == 0
    assert out.splitlines()[0] == "6 traces in 6 files"
    assert any(line.split()[:2] == ["stack", "6"] and "quic-go (4), aioquic (2)" in line
               for line in out.splitlines())  # fmt: skip
    assert all(line == line.rstrip() for line in out.splitlines())


def test_labels_of_one_trace_and_where() -> None:
    server = REAL / "aioquic-1.7.2" / "server.qlog.zst"
    code, out, _ = run("labels", f"{server}#0", "--format", "csv")
    assert code == 0 and "vantage,server,1" in out and "vantage,client" not in out
    code, out, _ = run("labels", str(REAL), "--where", "stack=aioquic", "--format", "csv")
    assert "stack,aioquic,2" in out and "quic-go" not in out.split("stack,")[1]


def test_unknown_keys_list_the_valid_ones() -> None:
    for args in (["states", str(REAL), "--where", "colour=blue"],
                 ["diff", str(REAL), "--by", "colour"],
                 ["labels", str(REAL), "--where", "colour=blue"]):  # fmt: skip
        code, _, err = run(*args)
        assert code == 1, args
        assert "no trace has the label 'colour'" in err
        assert "scenario, stack, title, vantage, version" in err
        assert "Traceback" not in err


def test_where_one_of_on_states() -> None:
    code, out, _ = run("states", str(REAL), "--format", "csv",
                       "--where", "stack=aioquic", "--where", "stack=quic-go",
                       "--where", "vantage=server")  # fmt: skip
    assert code == 0
    traces = {r["trace"] for r in csv.DictReader(io.StringIO(out))}
    assert len(traces) == 3 and all(t.endswith("#0000") and "server" in t for t in traces)


def test_trace_specs() -> None:
    assert split_trace_spec("a.qlog#12") == ("a.qlog", 12)
    assert split_trace_spec("a.qlog") == ("a.qlog", None)
    server = REAL / "quic-go-v0.48.2" / "server.sqlog.zst"
    chosen = select_traces([f"{server}#0000", str(REAL / "aioquic-1.7.2")], where={})
    assert chosen.traces is not None
    assert sorted(chosen.traces["trace"].to_list()) == sorted([
        f"{server}#0000",
        f"{REAL / 'aioquic-1.7.2' / 'client.qlog.gz'}#0000",
        f"{REAL / 'aioquic-1.7.2' / 'server.qlog.zst'}#0000",
    ])  # fmt: skip


def test_compact_keys() -> None:
    keys = ["a", "relay.x", "relay.y", "relay.z", "relay.w", "scenario", "scenario.file"]
    assert compact_keys(keys) == ["a", "relay.* (4 keys)", "scenario", "scenario.file"]


def _pcap_like(path: Path) -> Path:
    """A qlog converted from a packet capture: packets, no congestion events."""
    records = [
        '{"qlog_version": "0.3", "qlog_format": "JSON-SEQ", "trace": '
        '{"vantage_point": {"type": "network"}}}',
        *(
            f'{{"time": {t}, "name": "transport:packet_sent", "data": '
            f'{{"header": {{"packet_type": "1RTT", "packet_number": {t}}}}}}}'
            for t in range(5)
        ),
    ]
    path.write_text("".join(f"\x1e{r}\n" for r in records))
    return path


def test_trace_without_congestion_information_is_named(tmp_path: Path) -> None:
    pcap = _pcap_like(tmp_path / "capture.sqlog")
    diag = Diagnostics()
    with pytest.warns(QuicsmWarning, match="no state can be derived"):
        frame = read_transitions([pcap, REAL / "aioquic-1.7.2"], diagnostics=diag)
    assert any(f"{pcap}#0000" in line for line in diag.messages())
    assert frame.filter(pl.col("file") == str(pcap))["state"].cast(pl.String).to_list() == ["Init"]
    code, _, err = run("infer", str(pcap), "-o", str(tmp_path / "out"), "--format", "json")
    assert code == 0
    assert "no state can be derived" in err and f"{pcap}#0000" in err


def test_many_traces_without_information_are_counted(tmp_path: Path) -> None:
    files = [_pcap_like(tmp_path / f"c{i:02d}.sqlog") for i in range(13)]
    diag = Diagnostics()
    with pytest.warns(QuicsmWarning, match="13 traces"):
        read_transitions(files, diagnostics=diag)


def test_file_n_in_a_transitions_table_is_its_nth_trace() -> None:
    table = Path(__file__).parent / "fixtures" / "qlog" / "transitions.csv"
    ids = read_transitions([table])["trace"].unique(maintain_order=True).to_list()
    for n, expected in enumerate(ids):
        chosen = select_traces([f"{table}#{n}"], where={})
        assert chosen.traces is not None and chosen.traces["trace"].to_list() == [expected]
    code, _, err = run("states", f"{table}#{len(ids)}")
    assert code == 1 and f"holds {len(ids)} traces (#0 to #{len(ids) - 1})" in err


def test_library_warnings_print_as_plain_lines() -> None:
    table = Path(__file__).parent / "fixtures" / "qlog" / "transitions.csv"  # has 'Mystery'
    code, _, err = run("labels", str(table))
    assert code == 0
    assert "warning: state names not in the alias table were kept as Unknown: 'Mystery'" in err
    assert "QuicsmWarning" not in err and ".py:" not in err
