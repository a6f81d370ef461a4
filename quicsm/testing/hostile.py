"""Generators of hostile-but-plausible inputs: one family per way the reading contract (rows or
a :class:`~quicsm.core.errors.QuicsmError`, in time linear in the input and bounded memory) was
seen to break. Each takes a size ``n`` so a test can compare the time at ``4n`` with the time at
``n``; each writes ``path`` and returns it.
"""

from __future__ import annotations

from pathlib import Path

import orjson

_HEADER = {
    "qlog_format": "JSON-SEQ",
    "qlog_version": "0.3",
    "trace": {"vantage_point": {"type": "client"}, "common_fields": {"time_format": "absolute"}},
}

#: metrics records the native decoder hands back to the Python reader (each is valid, and
#: decoded exactly only by the reference reader): an escaped key, a duplicate key, an integer
#: past 2^64, a cwnd given as a string
HANDED_BACK = (
    b'{"time":%d,"name":"recovery:metrics_updated","data":{"\\u0063wnd":%d,"bytes_in_flight":10}}',
    b'{"time":%d,"name":"recovery:metrics_updated","data":{"cwnd":%d,"cwnd":12000}}',
    b'{"time":%d,"name":"recovery:metrics_updated","data":{"cwnd":%d,"x":18446744073709551617}}',
    b'{"time":%d,"name":"recovery:metrics_updated","data":{"cwnd":"%d"}}',
)


def handed_back_metrics(path: Path, n: int, *, invalid: bool = False) -> Path:
    """A metrics-only JSON-SEQ trace of ``n`` records every one of which the native decoder
    hands back (``invalid``: lines that are not JSON, for a lenient read)."""
    parts = [b"\x1e" + orjson.dumps(_HEADER) + b"\n"]
    for i in range(n):
        if invalid:
            record = b'{"time":%d,"name":"recovery:metrics_updated","data":{"cwnd":' % i
        else:
            record = HANDED_BACK[i % len(HANDED_BACK)] % (i, 12000 + i % 7 * 1200)
        parts.append(b"\x1e" + record + b"\n")
    path.write_bytes(b"".join(parts))
    return path


def csv_quoted_line_feeds(path: Path, n: int) -> Path:
    """A valid transition table whose one quoted trigger holds ``n`` line feeds."""
    path.write_bytes(
        b"trace,time_ms,state,vantage,raw_state,trigger\n"
        b"a,0,SlowStart,client,x,ack\n"
        b'a,1,Recovery,client,x,"loss' + b"\n" * n + b'"\n'
        b"a,2,CongestionAvoidance,client,x,ack\n"
    )
    return path


def empty_records(path: Path, n: int, *, sep: bytes = b"\x1e") -> Path:
    """A JSON-SEQ (``sep`` RS) or NDJSON (``sep`` LF) trace with a run of ``n`` empty records
    between two events."""
    header = orjson.dumps({**_HEADER, "qlog_format": "JSON-SEQ" if sep == b"\x1e" else "NDJSON"})
    event = b'{"time":%d,"name":"recovery:congestion_state_updated","data":{"new":"%s"}}'
    lead = b"\x1e" if sep == b"\x1e" else b""
    path.write_bytes(
        lead
        + header
        + b"\n"
        + lead
        + event % (1, b"slow_start")
        + b"\n"
        + sep * n
        + lead
        + event % (2, b"recovery")
        + b"\n"
    )
    return path


def wide_record(path: Path, n: int) -> Path:
    """A JSON-SEQ trace whose one event's data holds a list of ``n`` empty objects."""
    data = b"[" + b"{}," * (n - 1) + b"{}]"
    path.write_bytes(
        b"\x1e" + orjson.dumps(_HEADER) + b"\n"
        b'\x1e{"time":1,"name":"recovery:metrics_updated","data":{"cwnd":12000,"x":'
        + data
        + b"}}\n"
    )
    return path


def contained_member(path: Path, n: int) -> Path:
    """A contained-JSON qlog with one trace and a top-level member of ``n`` bytes (a list of
    small objects) before it."""
    filler = b"[" + b'{"a":1},' * (n // 8 - 1) + b'{"a":1}]'
    path.write_bytes(
        b'{"qlog_version":"0.3","description":'
        + filler
        + b',"traces":[{"vantage_point":{"type":"client"},"events":['
        b'{"time":1,"name":"recovery:congestion_state_updated","data":{"new":"slow_start"}},'
        b'{"time":2,"name":"recovery:congestion_state_updated","data":{"new":"recovery"}}]}]}'
    )
    return path


def metrics_only(path: Path, min_bytes: int) -> Path:
    """A valid JSON-SEQ trace of metrics updates only (no state events), at least
    ``min_bytes`` long, written a block at a time (bounded memory)."""
    record = (
        b'\x1e{"time":%d,"name":"recovery:metrics_updated","data":{"cwnd":%d,'
        b'"bytes_in_flight":%d,"smoothed_rtt":25.5,"latest_rtt":24}}\n'
    )
    with path.open("wb") as out:
        out.write(b"\x1e" + orjson.dumps(_HEADER) + b"\n")
        written, t = 0, 0
        while written < min_bytes:
            block = b"".join(
                record % (t + i, 12000 + (t + i) % 50 * 1200, (t + i) % 9000) for i in range(10_000)
            )
            out.write(block)
            written += len(block)
            t += 10_000
    return path
