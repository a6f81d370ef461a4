"""Packing run directories into one multi-trace zstd JSON-SEQ file."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.core.errors import InputError, QlogError
from quicsm.lab.pack import RS, pack_runs, read_qlog_traces

SEQ_HEADER = {
    "qlog_version": "0.3",
    "qlog_format": "JSON-SEQ",
    "title": "t",
    "trace": {"vantage_point": {"type": "server"}, "common_fields": {"reference_time": 1.0}},
}


def _event(i: int, state: str = "SlowStart") -> dict[str, object]:
    return {"time": float(i), "name": "recovery:congestion_state_updated", "data": {"new": state}}


def _seq_file(path: Path, n_events: int) -> None:
    records = [SEQ_HEADER, *(_event(i) for i in range(n_events))]
    path.write_bytes(b"".join(RS + orjson.dumps(r) + b"\n" for r in records))


def _json_file(path: Path, n_events: int) -> None:
    doc = {
        "qlog_format": "JSON",
        "qlog_version": "0.3",
        "traces": [
            {
                "vantage_point": {"type": "client"},
                "common_fields": {"ODCID": "ab"},
                "events": [_event(i, "CongestionAvoidance") for i in range(n_events)],
            }
        ],
    }
    path.write_text(json.dumps(doc))


def _run(
    root: Path, stack: str, scenario: str, n: int, *, events: int = 3, status: str = "ok"
) -> Path:
    d = root / stack / "v1" / scenario / f"run-{n}"
    d.mkdir(parents=True)
    labels = {
        "stack": stack,
        "version": "v1",
        "scenario": scenario,
        "run": n,
        "status": status,
        "reason": None if status == "ok" else "boom",
        "network.down.loss": 0.01,
        "files.server": "",
        "files.client": "",
    }
    if status == "ok":
        _seq_file(d / "server.sqlog", events)
        _json_file(d / "client.qlog", events + 1)
        labels["files.server"], labels["files.client"] = "server.sqlog", "client.qlog"
    (d / "run.json").write_text(json.dumps(labels))
    return d


def _records(path: Path) -> list[dict[str, object]]:
    data = zstandard.ZstdDecompressor().stream_reader(path.open("rb")).read()
    return [orjson.loads(chunk) for chunk in data.split(RS) if chunk.strip()]


def test_pack_writes_one_header_per_trace_with_run_labels(tmp_path: Path) -> None:
    _run(tmp_path / "runs", "quic-go", "loss1", 1)
    _run(tmp_path / "runs", "quic-go", "loss1", 2)
    _run(tmp_path / "runs", "quic-go", "baseline", 1, status="failed")
    out = tmp_path / "corpus.qlog"
    report = pack_runs([tmp_path / "runs"], output=out)
    assert (report.runs, report.traces, report.events) == (2, 4, 2 * (3 + 4))
    assert len(report.skipped) == 1 and "status failed: boom" in report.skipped[0]
    records = _records(out)
    headers = [r for r in records if "trace" in r]
    assert len(headers) == 4 and len(records) == 4 + 14
    labels = [h["trace"]["quicsm_labels"] for h in headers]  # type: ignore[index]
    assert [(lb["run"], lb["role"]) for lb in labels] == [
        (1, "server"),
        (1, "client"),
        (2, "server"),
        (2, "client"),
    ]
    assert labels[0]["scenario"] == "loss1" and labels[0]["network.down.loss"] == 0.01
    assert labels[0]["run_dir"] == "quic-go/v1/loss1/run-1"
    # JSON traces become JSON-SEQ: header keeps the trace's fields, events follow one by one
    client_header = headers[1]
    assert client_header["qlog_format"] == "JSON-SEQ"
    assert client_header["trace"]["vantage_point"] == {"type": "client"}  # type: ignore[index]
    assert records[5 + 1]["data"] == {"new": "CongestionAvoidance"}  # type: ignore[index]


def test_pack_is_deterministic_and_reads_back(tmp_path: Path) -> None:
    for n in (2, 1):
        _run(tmp_path / "runs", "aioquic", "jitter", n, events=5)
    a, b = tmp_path / "a.qlog", tmp_path / "b.qlog"
    pack_runs([tmp_path / "runs"], output=a)
    pack_runs([tmp_path / "runs" / "aioquic"], output=b)
    assert a.read_bytes() == b.read_bytes()
    # a packed file is itself readable as qlog: several headers, each starting a trace
    traces = read_qlog_traces(a)
    assert [len(events) for _, events in traces] == [5, 6, 5, 6]


@settings(max_examples=20, deadline=None)
@given(sizes=st.lists(st.integers(0, 30), min_size=1, max_size=6))
def test_multi_header_json_seq_splits_into_its_traces(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int]
) -> None:
    path = tmp_path_factory.mktemp("seq") / "x.sqlog"
    chunks = []
    for k, n in enumerate(sizes):
        header = {**SEQ_HEADER, "title": f"trace {k}"}
        chunks += [RS + orjson.dumps(header) + b"\n"]
        chunks += [RS + orjson.dumps(_event(i)) + b"\n" for i in range(n)]
    path.write_bytes(b"".join(chunks))
    traces = read_qlog_traces(path)
    assert [h["title"] for h, _ in traces] == [f"trace {k}" for k in range(len(sizes))]
    assert [len(e) for _, e in traces] == sizes


def test_truncated_record_is_an_error_naming_file_and_record(tmp_path: Path) -> None:
    d = _run(tmp_path / "runs", "quic-go", "loss1", 1)
    with (d / "server.sqlog").open("ab") as fh:
        fh.write(RS + b'{"time": 9, "name": "transport:pack')
    with pytest.raises(QlogError) as info:
        pack_runs([tmp_path / "runs"], output=tmp_path / "x.qlog")
    assert "server.sqlog: record 5 (line 5): expected a JSON record" in str(info.value)
    assert not (tmp_path / "x.qlog").exists()


def test_lenient_packing_leaves_out_a_last_record_cut_mid_write(tmp_path: Path) -> None:
    d = _run(tmp_path / "runs", "quic-go", "loss1", 1)
    whole = read_qlog_traces(d / "server.sqlog")
    with (d / "server.sqlog").open("ab") as fh:
        fh.write(RS + b'{"time": 9, "name": "transport:pack')
    report = pack_runs([tmp_path / "runs"], output=tmp_path / "x.qlog", lenient=True)
    assert len(report.cut) == 1
    assert (
        "server.sqlog: record 5 (line 5) is incomplete: the file was cut mid-write"
        in (report.cut[0])
    )
    packed = read_qlog_traces(tmp_path / "x.qlog")
    assert packed[0][1] == whole[0][1]  # every complete record, nothing else
    # a malformed record that is not the last stays an error
    with (d / "server.sqlog").open("ab") as fh:
        fh.write(b"\n" + RS + b'{"time": 10}\n')
    with pytest.raises(QlogError, match="record 5"):
        pack_runs([tmp_path / "runs"], output=tmp_path / "y.qlog", lenient=True)


def test_missing_run_dir_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such run directory"):
        pack_runs([tmp_path / "nope"], output=tmp_path / "x.qlog")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no run.json under"):
        pack_runs([tmp_path / "empty"], output=tmp_path / "x.qlog")
