"""Large inputs made from the real fixtures at run time (nothing large is committed)."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson

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
