"""The reading contract, item by item: real-world variants accepted, hostile input our error,
blocks that cannot alias, outputs moved into place, and a CLI that reports once and safely."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import orjson
import polars as pl
import pytest
import zstandard
from click.testing import CliRunner
from polars.testing import assert_frame_equal

from quicsm.cli import main
from quicsm.cli.report_warnings import terminal_safe
from quicsm.core.diagnostics import Diagnostics
from quicsm.core.errors import QlogError
from quicsm.extract.read import read_metrics, read_traces, read_transitions, scan_transitions
from quicsm.qlog.blocks import DecompressedFile
from quicsm.qlog.inspect import inspect_file
from quicsm.qlog.source import read_qlog

FIX = Path(__file__).parent / "fixtures" / "qlog"
REAL = Path(__file__).parent / "fixtures" / "real"


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


# -- blocks ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["quicgo_0.3.sqlog", "packed.sqlog.gz", "packed.sqlog.zst"])
def test_blocks_are_immutable_and_join_to_the_content(name: str, tmp_path: Path) -> None:
    path = FIX / name
    whole = b"".join(DecompressedFile(path, block_size=1 << 20).blocks())
    small = list(DecompressedFile(path, block_size=7).blocks())
    assert all(type(b) is bytes and 0 < len(b) <= 7 for b in small)
    assert b"".join(small) == whole  # kept blocks are not overwritten by later ones


# -- real-world variants -------------------------------------------------------------------------


def test_bom_skippable_frame_and_trailing_empty_event_read_like_the_original(
    tmp_path: Path,
) -> None:
    original = (FIX / "aioquic_0.3.qlog").read_bytes()
    expected = read_transitions(FIX / "aioquic_0.3.qlog").drop("file", "trace")
    variants = {
        "bom.qlog": b"\xef\xbb\xbf" + original,
        "skippable.qlog.zst": b"\x50\x2a\x4d\x18\x03\x00\x00\x00abc"
        + zstandard.ZstdCompressor().compress(original),
        "empty_event.qlog": original.replace(b'}], "vantage_point"', b'}, []], "vantage_point"'),
    }
    assert variants["empty_event.qlog"] != original
    for name, data in variants.items():
        path = tmp_path / name
        path.write_bytes(data)
        diag = Diagnostics()
        got = read_transitions(path, diagnostics=diag).drop("file", "trace")
        assert_frame_equal(got, expected)
        assert not diag, name
    bom_seq = tmp_path / "bom.sqlog"
    bom_seq.write_bytes(b"\xef\xbb\xbf" + (FIX / "quicgo_0.3.sqlog").read_bytes())
    assert_frame_equal(
        read_transitions(bom_seq).drop("file", "trace"),
        read_transitions(FIX / "quicgo_0.3.sqlog").drop("file", "trace"),
    )


def test_qlog_01_is_read_as_one_trace(tmp_path: Path) -> None:
    """qlog 0.1 (2018, pcap2qlog's shape, written here by hand): the file is the trace, its
    top-level "fields" name the positions of its array events, "type" is the event."""
    path = tmp_path / "old.qlog"
    path.write_bytes(
        orjson.dumps(
            {
                "qlog_version": "0.1",
                "vantagepoint": "SERVER",
                "fields": ["time", "category", "type", "trigger", "data"],
                "events": [
                    [0, "TRANSPORT", "PACKET_SENT", "LINE", {}],
                    [5, "TRANSPORT", "PACKET_RECEIVED", "LINE", {}],
                    [],
                ],
            }
        )
    )
    traces = read_traces(path)
    assert traces.height == 1
    row = traces.row(0, named=True)
    assert row["format"] == "JSON 0.1" and row["vantage"] == "server"
    assert row["n_events"] == 2 and row["duration_ms"] == 5.0
    counts = inspect_file(path).event_counts
    assert counts == {"TRANSPORT:PACKET_SENT": 1, "TRANSPORT:PACKET_RECEIVED": 1}


def test_qlog_01_without_events_names_the_header_line(tmp_path: Path) -> None:
    path = tmp_path / "old.qlog"
    path.write_bytes(b'{\n "title": "x",\n "qlog_version": "0.1",\n "fields": ["time"]\n\n}\n')
    with pytest.raises(QlogError) as info:
        read_transitions(path)
    assert str(info.value).startswith(f'{path}: line 3: expected an "events" array')
    assert 'qlog_version "0.1"' in str(info.value)


def test_a_cut_contained_json_keeps_its_vantage_and_modes_agree(tmp_path: Path) -> None:
    doc = orjson.loads((FIX / "aioquic_0.3.qlog").read_bytes())
    trace = doc["traces"][0]
    vantage = trace.pop("vantage_point", {"type": "server"})
    trace["vantage_point"] = vantage  # after the events, as some converters write it
    data = json.dumps(doc).encode()
    path = tmp_path / "cut.qlog"
    path.write_bytes(data[: data.rindex(b"}")])  # the closing brace of the document is missing
    strict, lenient = Diagnostics(), Diagnostics()
    a = read_transitions(path, diagnostics=strict)
    b = read_transitions(path, on_error="skip", diagnostics=lenient)
    assert_frame_equal(a, b)
    assert a["vantage"].unique().to_list() == [vantage["type"]]
    assert strict.truncated == lenient.truncated and len(strict.truncated) == 1
    # cut inside the first event: no complete event, the same answer in both modes
    first = data.index(b'"events": [') + len(b'"events": [') + 5
    path.write_bytes(data[:first])
    a = read_transitions(path, diagnostics=Diagnostics())
    b = read_transitions(path, on_error="skip", diagnostics=Diagnostics())
    assert_frame_equal(a, b)
    assert a["state"].to_list() == ["Init"]


def test_the_eager_reader_is_the_lazy_one_collected() -> None:
    paths = [str(FIX / "quicgo_0.3.sqlog"), str(FIX / "transitions.csv")]
    lazy = scan_transitions(paths)
    assert isinstance(lazy, pl.LazyFrame)
    assert_frame_equal(lazy.collect(), read_transitions(paths))


# -- third-party failures ----------------------------------------------------------------------


def test_mangled_parquet_is_our_error(tmp_path: Path) -> None:
    frame = read_transitions(FIX / "transitions.csv").with_columns(pl.col(pl.Enum).cast(pl.String))
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    data = bytearray(buffer.getvalue())
    path = tmp_path / "t.parquet"
    outcomes = set()
    for i in range(8, len(data) - 8, max(1, len(data) // 60)):
        mangled = bytearray(data)
        mangled[i] ^= 0xFF
        path.write_bytes(bytes(mangled))
        try:
            read_transitions(path)
            outcomes.add("read")
        except QlogError as exc:
            assert str(exc).startswith(f"{path}: ")
            outcomes.add("error")
    assert "error" in outcomes


def test_labels_beyond_64_bit_integers_are_read(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlog"
    lines = (FIX / "quicgo_0.3.sqlog").read_bytes().split(b"\n", 1)
    header = orjson.loads(lines[0].lstrip(b"\x1e"))
    header["trace"]["quicsm_labels"] = {"run": 10**30}
    path.write_bytes(b"\x1e" + json.dumps(header).encode() + b"\n" + lines[1])
    labels = orjson.loads(read_traces(path)["labels"][0])
    assert labels["run"] == 1e30  # JSON numbers beyond 64 bits are read as floats


# -- outputs -----------------------------------------------------------------------------------


def _infer(*args: str) -> tuple[int, str, str]:
    return _cli("infer", str(FIX / "transitions.csv"), "--algorithm", "observed", *args)


def test_outputs_replace_an_earlier_run_and_say_so(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, _, err = _infer("-o", str(out), "--format", "png", "-q")
    assert code == 0 and "replaced" not in err
    assert (out / "model.png").exists()
    code, _, err = _infer("-o", str(out), "--format", "svg", "-q")
    assert code == 0 and "note:" not in err  # -q: no notes (warnings still)
    assert "warning: state names not in the alias table" in err
    code, _, err = _infer("-o", str(out), "--format", "png")
    assert code == 0
    assert f"note: replaced the outputs of an earlier run in {out} (model.dot" in err
    assert "model.svg" in err
    names = sorted(p.name for p in out.iterdir())
    assert names == ["model.dot", "model.json", "model.png", "stats.csv", "transitions.csv"]


def test_a_directory_with_other_files_is_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    code, _, err = _infer("-o", str(out))
    assert code == 1 and "holds files quicsm did not write (thesis.tex)" in err
    assert sorted(p.name for p in out.iterdir()) == ["thesis.tex"]


@pytest.mark.parametrize("where", ["under_a_file", "proc"])
def test_unwritable_output_paths_are_clean_errors(tmp_path: Path, where: str) -> None:
    if where == "under_a_file":
        (tmp_path / "f").write_text("x")
        out = tmp_path / "f" / "out"
    else:
        out = Path("/proc/quicsm-out")
    code, _, err = _infer("-o", str(out))
    last = err.splitlines()[-1]
    assert code == 1 and last.startswith(f"Error: {out}: ") and "Traceback" not in err
    if where == "under_a_file":
        assert last.endswith(f"cannot create the output directory: {tmp_path / 'f'} is a file")


def test_a_failed_render_leaves_no_temporary_or_stale_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    assert _infer("-o", str(out), "-q")[0] == 0
    monkeypatch.setenv("PATH", "")  # Graphviz cannot run: the image is not rendered
    code, _, err = _infer("-o", str(out), "-q")
    assert code == 1 and "Graphviz" in err
    names = sorted(p.name for p in out.iterdir())
    assert names == ["model.dot", "model.json", "stats.csv", "transitions.csv"]  # no stale svg
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".quicsm-")]


# -- the CLI -----------------------------------------------------------------------------------


def test_inspect_exit_codes() -> None:
    assert _cli("inspect", str(FIX / "quicgo_0.3.sqlog"))[0] == 0
    code, out, _ = _cli("inspect", str(FIX / "quicgo_truncated.sqlog"))
    assert code == 0 and "truncated:" in out  # a cut file is not a problem
    code, _, err = _cli("inspect", str(FIX / "nope.sqlog"))
    assert code == 1 and err.startswith("Error: ")


def test_inspect_exits_2_on_problems(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlog"
    path.write_bytes(
        b'\x1e{"qlog_format": "JSON-SEQ", "trace": {}}\n'
        b'\x1e{"time": 10, "name": "transport:packet_sent"}\n'
        b'\x1e{"time": 5, "name": "transport:packet_sent"}\n'
    )
    code, out, _ = _cli("inspect", str(path))
    assert code == 2
    assert "record 3 (line 3): expected a time no earlier than 10 ms" in out


def test_warnings_are_printed_once_in_one_spelling_without_python_details() -> None:
    code, _, err = _cli(
        "diff", str(FIX / "quicgo_truncated.sqlog"), "--vs", str(FIX / "quicgo_0.3.sqlog")
    )
    assert code == 0
    # the comparison's own caution (these traces carry no run labels) is not a read warning
    lines = [line for line in err.splitlines() if not line.startswith("caution: ")]
    assert lines == [
        f"warning: {FIX / 'quicgo_truncated.sqlog'}: record 9 (line 9) is incomplete: the file "
        "was cut mid-write; every complete record before it was kept"
    ]
    assert "QuicsmWarning" not in err and ".py:" not in err


def test_trace_text_is_made_safe_for_a_terminal(tmp_path: Path) -> None:
    assert terminal_safe("a\x1b[2Jb\u202ec\n") == "a\\x1b[2Jb\\u202ec\n"
    path = tmp_path / "evil.sqlog"
    lines = (FIX / "quicgo_0.3.sqlog").read_bytes().split(b"\n", 1)
    header = orjson.loads(lines[0].lstrip(b"\x1e"))
    header["trace"]["title"] = "\x1b]0;owned\x07\x1b[31mred"
    path.write_bytes(b"\x1e" + orjson.dumps(header) + b"\n" + lines[1])
    code, out, _ = _cli("inspect", str(path))
    assert code == 0 and "\x1b" not in out and "\x07" not in out
    code, out, err = _cli("states", "--format", "table", str(path))
    assert "\x1b" not in out + err


def test_gzip_copy_of_every_fixture_reads_the_same(tmp_path: Path) -> None:
    for path in sorted(FIX.glob("*.*log")) + sorted(FIX.glob("*.ndjson")):
        copy = tmp_path / (path.name + ".gz")
        copy.write_bytes(gzip.compress(path.read_bytes()))
        a = read_qlog(path, lenient=True)
        b = read_qlog(copy, lenient=True)
        assert [t.states for t in a.traces] == [t.states for t in b.traces], path.name
        assert a.skipped == b.skipped


@pytest.mark.parametrize("form", ["seq", "contained"])
def test_lenient_counts_every_skipped_record_beyond_those_kept(tmp_path: Path, form: str) -> None:
    n = 300
    if form == "seq":
        path = tmp_path / "many.sqlog"
        path.write_bytes(
            b'\x1e{"qlog_format": "JSON-SEQ", "trace": {}}\n'
            + b'\x1e{"time": 1, "name": "recovery:congestion_state_updated", "data": {}}\n' * n
        )
    else:
        path = tmp_path / "many.qlog"
        bad = {"time": 1, "name": "recovery:congestion_state_updated", "data": {}}
        path.write_bytes(orjson.dumps({"traces": [{"events": [bad] * n}]}))
    diag = Diagnostics()
    with pytest.warns(UserWarning, match=f"skipped {n} records"):
        read_transitions(path, on_error="skip", diagnostics=diag)
    assert diag.skipped_records == n and len(diag.reasons) == 5


def test_a_csv_header_without_an_end_is_our_error_at_once(tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    path.write_bytes(b"trace,time_ms,state" + b",vantage" * 20000)
    expected = r"wide\.csv: line 1: expected a CSV header line of at most 64 KiB"
    with pytest.raises(QlogError, match=expected):
        read_transitions(path)


def _picoquic_doc(title: str) -> bytes:
    """A picoquic-shaped draft-00 trace (written here by hand) whose third and fifth events
    log time 0 after later times, as picoquic does for some events."""
    events = [
        [0, 0, "transport", "packet_sent", {"packet_type": "initial"}],
        [284, 0, "recovery", "metrics_updated", {"bytes_in_flight": 1252, "cwnd": 15360}],
        [0, 0, "transport", "parameters_set", {"owner": "local"}],
        [900, 0, "recovery", "metrics_updated", {"bytes_in_flight": 2504}],
        [0, 0, "recovery", "metrics_updated", {"bytes_in_flight": 3756}],
        [45228, 0, "recovery", "metrics_updated", {"bytes_in_flight": 0, "latest_rtt": 44000}],
    ]
    trace = {
        "vantage_point": {"type": "server"},
        "title": title,
        "event_fields": ["relative_time", "path_id", "category", "event", "data"],
        "configuration": {"time_units": "us"},
        "events": events,
    }
    return orjson.dumps({"qlog_version": "draft-00", "title": title, "traces": [trace]})


def test_picoquic_backward_times_are_repaired_and_named(tmp_path: Path) -> None:
    path = tmp_path / "pico.qlog"
    path.write_bytes(_picoquic_doc("picoquic"))
    diag = Diagnostics()
    frame = read_transitions(path, diagnostics=diag)
    (note,) = [n for n in diag.notes if "earlier time" in n]
    assert note.startswith(f"{path}#0000: 2 events logged an earlier time")
    assert "traces[0].events[2] at 0 ms after 0.284 ms" in note
    assert "traces[0].events[4] at 0 ms after 0.9 ms" in note
    # nothing dropped: the repaired metrics update is fed too (the window's first ACK is
    # application-limited only if the in-flight rise at 0.9 ms was seen)
    assert frame["state"].to_list()[-1] == "ApplicationLimited"
    (summary,) = inspect_file(path).traces
    assert summary.n_events == 6 and summary.repaired == note.split(": ", 1)[1]
    metrics = read_metrics(path)
    assert metrics["time_ms"].to_list() == sorted(metrics["time_ms"].to_list())
    assert metrics.height == 4


def test_backward_times_of_other_producers_are_errors_naming_the_record(tmp_path: Path) -> None:
    path = tmp_path / "other.qlog"
    path.write_bytes(_picoquic_doc("someone"))
    with pytest.raises(QlogError) as info:
        read_transitions(path)
    assert str(info.value).startswith(f"{path}: traces[0].events[2]: expected a time no earlier")
