"""``benchmarks/public_qlog.py``: every file of a directory read the way a new user would.

Run here on a tiny directory written by this file (the shapes found in public files: a
pcap2qlog draft-01 capture, a qvis ``.qlog.js`` wrapper, a trace whose time goes backwards, a
file that is not qlog), and on the committed real fixtures, where no file may end in a
traceback. The table in docs/formats.md comes from running it on the public files.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "public_qlog", ROOT / "benchmarks" / "public_qlog.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _capture() -> dict[str, Any]:
    """A draft-01 capture export: a server sends 40 packets, the client acknowledges each
    tenth; one event leaves out the optional trigger."""
    rows: list[Any] = [["0", "transport", "ALPN_update", {"old": "", "new": "h3"}]]
    for n in range(40):
        t = str(n)
        rows.append(
            [
                t,
                "transport",
                "packet_sent",
                "line",
                {
                    "packet_type": "1RTT",
                    "header": {"packet_number": str(n), "packet_size": 1200},
                    "frames": [{"frame_type": "stream"}],
                },
            ]
        )
        if n % 10 == 9:
            rows.append(
                [
                    str(n + 30),
                    "transport",
                    "packet_received",
                    "line",
                    {
                        "packet_type": "1RTT",
                        "header": {"packet_number": str(n), "packet_size": 40},
                        "frames": [{"frame_type": "ack", "acked_ranges": [["0", str(n)]]}],
                    },
                ]
            )
    rows.sort(key=lambda r: int(r[0]))
    trace = {
        "vantage_point": {"type": "server"},
        "title": "Connection 1",
        "event_fields": ["relative_time", "category", "event", "trigger", "data"],
        "events": rows,
    }
    return {"qlog_version": "draft-01", "traces": [trace]}


def _backwards() -> dict[str, Any]:
    events = [
        [10, "recovery", "metrics_updated", {"cwnd": 12000, "bytes_in_flight": 1200}],
        [5, "recovery", "metrics_updated", {"cwnd": 13000, "bytes_in_flight": 0}],
        [20, "recovery", "metrics_updated", {"cwnd": 14000, "bytes_in_flight": 1200}],
    ]
    trace = {
        "vantage_point": {"type": "server"},
        "title": "other",
        "event_fields": ["relative_time", "category", "event", "data"],
        "events": events,
    }
    return {"qlog_version": "draft-01", "traces": [trace]}


def _directory(root: Path) -> None:
    (root / "pcap2qlog").mkdir()
    (root / "pcap2qlog" / "capture.qlog").write_bytes(orjson.dumps(_capture()))
    (root / "qvis").mkdir()
    wrapped = b"var capture = " + orjson.dumps(_capture()) + b";\n"
    (root / "qvis" / "capture.qlog.js").write_bytes(wrapped)
    (root / "other").mkdir()
    (root / "other" / "backwards.qlog").write_bytes(orjson.dumps(_backwards()))
    (root / "other" / "notes.txt").write_text("not a trace\n")


def test_the_table_classifies_every_file(bench: ModuleType, tmp_path: Path) -> None:
    _directory(tmp_path)
    results = {r.file: r for r in (bench.examine(p, tmp_path) for p in bench.files_under(tmp_path))}
    capture = results["pcap2qlog/capture.qlog"]
    assert (capture.result, capture.format, capture.traces, capture.init_only) == (
        "read",
        "JSON draft-01",
        1,
        0,
    )
    assert "SlowStart" in capture.states
    wrapped = results["qvis/capture.qlog.js"]
    assert wrapped.result == "error" and "JavaScript" in (wrapped.error or "")
    assert wrapped.error is not None and str(tmp_path) not in wrapped.error
    backwards = results["other/backwards.qlog"]
    assert backwards.result == "lenient" and "times may not go backwards" in (backwards.error or "")
    assert results["other/notes.txt"].result == "error"
    rows = bench.summary_rows(list(results.values()))
    assert rows[-1] == {
        "source": "all",
        "qlog": "",
        "files": 4,
        "read by default": 1,
        "lenient only": 1,
        "clean errors": 2,
        "tracebacks": 0,
        "traces": 2,
        "Init-only traces": 1,
    }
    assert [(r["source"], r["qlog"]) for r in rows[:-1]] == [
        ("other", "-"),
        ("other", "draft-01"),
        ("pcap2qlog", "draft-01"),
        ("qvis", "-"),
    ]


def test_a_traceback_is_reported_and_fails_the_run(
    bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    (tmp_path / "x.qlog").write_bytes(orjson.dumps(_capture()))

    def broken(path: Path) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(bench, "inspect_file", broken)
    assert bench.main([str(tmp_path), "--summary-only"]) == 1
    out = capsys.readouterr().out
    assert "| all |  | 1 | 0 | 0 | 0 | 1 |" in out


def test_no_committed_real_fixture_ends_in_a_traceback(bench: ModuleType) -> None:
    root = ROOT / "tests" / "fixtures"
    results = [bench.examine(p, root) for p in bench.files_under(root / "qlog")]
    assert results and all(r.result != "traceback" for r in results), [
        (r.file, r.error) for r in results if r.result == "traceback"
    ]
    assert sum(r.result == "read" for r in results) >= len(results) // 2
