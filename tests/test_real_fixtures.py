"""The real qlog fixtures (scripts/make_fixtures) are what the reader tests assume they are."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import zstandard

from quicsm.core import states

REAL = Path(__file__).resolve().parent / "fixtures" / "real"
PAPER_STATES = set(states.PAPER_STATES)
EXPECTED = {
    "quic-go-v0.48.2": ("server.sqlog.zst", "client.sqlog.gz"),
    "quic-go-v0.65.0": ("server.sqlog.zst", "client.sqlog.gz"),
    "aioquic-1.7.2": ("server.qlog.zst", "client.qlog.gz"),
}


def _text(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".zst":
        return zstandard.ZstdDecompressor().decompressobj().decompress(data).decode()
    return gzip.decompress(data).decode()


def _records(text: str) -> list[dict[str, Any]]:
    if text.startswith("\x1e"):  # JSON-SEQ (RFC 7464): header record, then one event per record
        return [json.loads(r) for r in text.split("\x1e") if r.strip()]
    doc = json.loads(text)
    return [{k: v for k, v in doc.items() if k != "traces"}] + doc["traces"][0]["events"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_files_exist_and_are_small(name: str) -> None:
    files = sorted(p.name for p in (REAL / name).iterdir())
    assert files == sorted([*EXPECTED[name], "run.json"])
    assert all((REAL / name / f).stat().st_size < 64_000 for f in files)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_server_fixture_has_every_paper_state(name: str) -> None:
    records = _records(_text(REAL / name / EXPECTED[name][0]))
    header, events = records[0], records[1:]
    if name == "quic-go-v0.65.0":
        assert header["file_schema"] == "urn:ietf:params:qlog:file:sequential"
    else:
        assert header["qlog_version"] == "0.3"
    assert header.get("qlog_format", "JSON-SEQ") == ("JSON" if "aioquic" in name else "JSON-SEQ")
    states = [e["data"]["new"] for e in events if e["name"] == "recovery:congestion_state_updated"]
    assert set(states) == PAPER_STATES
    assert states[0] == "Init"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_run_sidecar_labels(name: str) -> None:
    run = json.loads((REAL / name / "run.json").read_text())
    assert f"{run['stack']}-{run['version']}" == name
    assert run["ok"] is True and run["bytes"] == run["objects"] * run["object_size"]
    assert all(isinstance(v, str | int | float | bool) for v in run.values())
