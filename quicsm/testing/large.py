"""Large inputs made from the real fixtures at run time (nothing large is committed)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any

import orjson
import zstandard

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
AIOQUIC = FIXTURES / "real" / "aioquic-1.7.2" / "client.qlog.gz"


def big_contained(path: Path, min_bytes: int) -> int:
    """The real aioquic client trace (contained JSON), its events repeated (each copy later
    than the one before) until the document has at least ``min_bytes``; returns its number of
    events."""
    doc = orjson.loads(gzip.decompress(AIOQUIC.read_bytes()))
    trace = doc["traces"][0]
    events = trace["events"]
    span = events[-1]["time"] - events[0]["time"] + 1.0
    copies = min_bytes // len(orjson.dumps(events)) + 1
    trace["events"] = [{**e, "time": e["time"] + k * span} for k in range(copies) for e in events]
    path.write_bytes(orjson.dumps(doc))
    assert path.stat().st_size >= min_bytes
    return len(trace["events"])


AIOQUIC_SERVER = FIXTURES / "real" / "aioquic-1.7.2" / "server.qlog.zst"
#: the name of explicit state events (left out of a metrics-only document)
STATE_EVENT = "recovery:congestion_state_updated"


def _fixture(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    elif path.suffix == ".zst":
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)) as reader:
            raw = reader.read()
    doc: dict[str, Any] = orjson.loads(raw)
    return doc


def repeated_contained(
    path: Path, min_bytes: int, *, source: Path = AIOQUIC_SERVER, states: bool = True
) -> int:
    """A real contained-JSON trace (by default aioquic's server side of the real fixture), its
    events repeated (each copy later than the one before) until the document has at least
    ``min_bytes``, written as the producer writes it (one line); ``states=False`` leaves out
    its explicit states (a metrics-only trace, whose states are derived). Written a copy at a
    time: memory does not grow with the document. Returns its number of events."""
    doc = _fixture(source)
    trace = doc["traces"][0]
    events = [e for e in trace["events"] if states or e.get("name") != STATE_EVENT]
    span = events[-1]["time"] - events[0]["time"] + 1.0
    marker = "quicsm-events-go-here"
    head, tail = orjson.dumps({**doc, "traces": [{**trace, "events": [marker]}]}).split(
        orjson.dumps(marker)
    )
    written, copies = 0, 0
    with path.open("wb") as out:
        out.write(head)
        while written < min_bytes:
            shifted = [{**e, "time": e["time"] + copies * span} for e in events]
            text = orjson.dumps(shifted)[1:-1]
            out.write(text if copies == 0 else b"," + text)
            written += len(text) + 1
            copies += 1
        out.write(tail)
    return copies * len(events)
