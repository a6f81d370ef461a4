"""`quicsm states` and `quicsm inspect`: thin layers over the readers, exact texts."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from click.testing import CliRunner

from quicsm.cli import main
from quicsm.extract.read import read_transitions

FIX = Path(__file__).parent / "fixtures" / "qlog"


def run(*args: str, columns: int = 300) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env={"COLUMNS": str(columns)})
    return result.exit_code, result.stdout, result.stderr


def test_states_csv_is_the_library_frame() -> None:
    code, out, err = run("states", "--format", "csv", str(FIX / "quicgo_0.3.sqlog"))
    assert code == 0 and err == ""
    expected = read_transitions(FIX / "quicgo_0.3.sqlog").with_columns(
        pl.col(pl.Enum).cast(pl.String)
    )
    assert out == expected.write_csv()


def test_states_jsonl_and_table() -> None:
    code, out, _ = run("states", "--format", "jsonl", str(FIX / "draft02.ndjson"))
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["state"] for r in rows] == ["Init", "SlowStart", "CongestionAvoidance"]
    code, out, _ = run("states", str(FIX / "draft02.ndjson"))
    lines = out.splitlines()
    assert lines[0].split() == [
        "file",
        "trace",
        "vantage",
        "time_ms",
        "state",
        "raw_state",
        "trigger",
        "source",
        "end_ms",
    ]
    assert lines[2].split()[3:5] == ["3.000", "SlowStart"]


def test_states_table_fits_the_terminal() -> None:
    """Columns are left out (the file first: the trace id names it) and trace ids cut in the
    middle until every line fits; stderr says what was left out; csv keeps everything."""
    path = str(FIX / "draft02.ndjson")
    _, wide, _ = run("states", path)
    for columns in (120, 80, 60):
        code, out, err = run("states", path, columns=columns)
        assert code == 0
        lines = out.splitlines()
        assert all(len(line) <= columns for line in lines), (columns, lines)
        assert len(lines) == len(wide.splitlines())  # every row is still there
        assert "state" in lines[0].split() and "time_ms" in lines[0].split()
        assert "left out to fit" in err and "file" in err
        assert "SlowStart" in out and "draft02.ndjson#0" in out  # the trace id keeps its tail
    code, out, _ = run("states", "--format", "csv", path, columns=60)
    assert out.splitlines()[0].startswith("file,trace,vantage")


def test_missing_file_is_a_clean_error() -> None:
    code, out, err = run("states", "nope.sqlog")
    assert code == 1 and out == ""
    assert err == "Error: no such file or directory: 'nope.sqlog'\n"


def test_bad_record_exact_text(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlog"
    path.write_text(
        '\x1e{"qlog_version": "0.3", "qlog_format": "JSON-SEQ", "trace": {}}\n'
        '\x1e["recovery:congestion_state_updated"]\n'
    )
    code, _, err = run("states", str(path))
    assert code == 1
    assert err == (
        f"Error: {path}: record 2 (line 2): "
        'expected an object with "time" and "name", got an array\n'
    )
    assert "Traceback" not in err
    code, out, err = run("states", "--lenient", str(path))
    assert code == 0
    assert err == (
        "warning: skipped 1 record; first 1 reason:\n"
        f'  {path}: record 2 (line 2): expected an object with "time" and "name", got an array '
        f"(trace {path}#0000)\n"
        "warning: no state can be derived: the trace logs no recovery metrics, losses or "
        f"timers ({path}#0000)\n"
    )
    assert "Init" in out


def test_warnings_go_to_stderr() -> None:
    code, out, err = run("states", str(FIX / "quicgo_truncated.sqlog"))
    assert code == 0
    assert err.startswith(
        f"warning: {FIX / 'quicgo_truncated.sqlog'}: record 9 (line 9) is incomplete"
    )
    assert "SlowStart" in out


def test_inspect_summarises_and_validates_everything(tmp_path: Path) -> None:
    code, out, err = run("inspect", str(FIX / "packed.sqlog.zst"))
    assert code == 0 and err == ""
    assert out.splitlines()[:3] == [
        f"file: {FIX / 'packed.sqlog.zst'}",
        "format: JSON-SEQ (zstd-compressed)",
        "traces: 3",
    ]
    assert "  recovery:congestion_state_updated  10" in out
    assert "\nproblems: none\n" in out
    # the labels --where and --by select on: shared ones once, then each trace's own
    labels, capabilities = out.split("problems: none\n")[1].split("capabilities by trace")
    assert labels.splitlines() == [
        "labels of every trace (3):",
        "  code_version=v0.50.0",
        "  device=desktop",
        "  format=JSON-SEQ 0.3",
        "  scenario=loss-1pct",
        "  vantage=server",
        "labels by trace:",
        "  #0: run=1, stack=quic-go, title=quic-go qlog",
        "  #1: run=2, stack=quic-go, title=quic-go qlog",
        "  #2: run=3, stack=ours, title=ours qlog",
    ]
    # what each trace logs, and what that allows (quicsm.extract.capabilities)
    assert "\n  #0 [quic-go]: packets\n    - nothing can be derived" in capabilities
    assert "\n  #2 [generic]: packets\n" in capabilities
    # a broken record the fast path never decodes is still found by inspect
    path = tmp_path / "x.sqlog"
    path.write_text(
        '\x1e{"qlog_version": "0.3", "qlog_format": "JSON-SEQ", "trace": {}}\n'
        '\x1e{"time": 1, "name": "transport:packet_sent", "data": {}}\n'
        "\x1e{oops}\n"
    )
    code, out, _ = run("inspect", str(path))
    assert code == 2  # problems found: usable as a validator
    assert (
        f"problems: 1 (first 1 listed)\n"
        f"  {path}: record 3 (line 3): expected a JSON text, got '{{oops}}'" in out
    )
    code, _, err = run("inspect", str(FIX))
    assert code == 1 and "inspect takes one file" in err


def test_states_option_chooses_where_states_come_from() -> None:
    path = str(FIX / "quicgo_0.3.sqlog")
    for mode in ("explicit", "derived", "hybrid"):
        code, out, _ = run("states", "--states", mode, "--format", "csv", path)
        expected = read_transitions(path, states=mode).with_columns(pl.col(pl.Enum).cast(pl.String))
        assert code == 0 and out == expected.write_csv()
    code, out, _ = run("states", "--states", "derived", "--format", "jsonl", path)
    assert {json.loads(line)["source"] for line in out.splitlines()} == {"derived"}
    code, _, err = run("states", "--states", "guessed", path)
    assert code == 2 and "'guessed' is not one of 'hybrid', 'explicit', 'derived'" in err


def test_states_says_what_a_trace_cannot_show() -> None:
    code, _, err = run("states", str(FIX / "neqo_0.4.sqlog"))
    assert code == 0
    assert err == (
        "warning: CongestionAvoidanceMaxed, ApplicationLimited, RetransmissionTimeout and "
        "TailLossProbe cannot be derived: the trace logs no recovery metrics, losses or timers "
        f"({FIX / 'neqo_0.4.sqlog'}#0000)\n"
    )
