"""Generators of hostile-but-plausible inputs: one family per way the reading contract (rows or
a :class:`~quicsm.core.errors.QuicsmError`, in time linear in the input and bounded memory) was
seen to break. Each takes a size ``n`` so a test can compare the time at ``4n`` with the time at
``n``; each writes ``path`` and returns it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def many_tiny_traces(path: Path, n: int, *, contained: bool = False, packets: bool = False) -> Path:
    """``n`` traces of one event each (a fleet capture of short connections): a metrics
    update, and every other trace a state change instead; JSON-SEQ with a header record per
    trace, or one contained-JSON document (``contained``). With ``packets``, each trace is a
    packets-only one instead: a data packet received and the ACK sent for it (states derived
    from packets)."""
    events: tuple[list[dict[str, Any]], ...] = (
        [{"time": 0, "name": "recovery:metrics_updated", "data": {"congestion_window": 12000}}],
        [{"time": 1, "name": "recovery:congestion_state_updated", "data": {"new": "recovery"}}],
    )
    if packets:
        header = {"packet_type": "1RTT", "packet_number": 0}
        stream = [{"frame_type": "stream", "length": 1200}]
        ack = [{"frame_type": "ack", "acked_ranges": [[0, 0]]}]
        pair = [
            {
                "time": 0,
                "name": "transport:packet_received",
                "data": {"header": header, "frames": stream},
            },
            {"time": 1, "name": "transport:packet_sent", "data": {"header": header, "frames": ack}},
        ]
        events = (pair, pair)
    if contained:
        traces = [
            {"vantage_point": {"type": ("server", "client")[i % 2]}, "events": events[i % 2]}
            for i in range(n)
        ]
        path.write_bytes(orjson.dumps({"qlog_version": "0.3", "traces": traces}))
        return path
    header_record = b"\x1e" + orjson.dumps(
        {**_HEADER, "trace": {"vantage_point": {"type": "client"}}}
    )
    records = [
        header_record + b"\n" + b"".join(b"\x1e" + orjson.dumps(e) + b"\n" for e in kind)
        for kind in events
    ]
    path.write_bytes(b"".join(records[i % 2] for i in range(n)))
    return path


#: packet numbers outside 0..2^62-1 (RFC 9000 section 12.3) as qlog producers might write them
OUT_OF_RANGE_NUMBERS = (-2, -1, 1 << 62, (1 << 64) + 1, -(1 << 63) - 1, 1e30)


def out_of_range_packets(
    path: Path, n: int, *, number: int | float = -2, where: str = "ack"
) -> Path:
    """A packets-only JSON-SEQ trace (a client's log of a download, no recovery metrics): ``n``
    data packets received, each acknowledged, then one packet numbered ``number`` that an ACK
    frame names (``where="ack"``: the campaign's packet -2 acknowledged by ``[[-2,-2]]``), or
    whose number alone is out of range (``where="packet"``), or an ACK naming it while the
    packet was never logged (``where="range"``). Its records 2 .. 2n+1 are valid; record
    2n + 2 (``packet``, ``ack``) or 2n + 3 (``range``) is the first bad one."""
    head = dict(_HEADER)
    head["trace"] = {"vantage_point": {"type": "client"}}

    def packet(t: float, name: str, pn: int | float, acked: int | float | None = None) -> bytes:
        frames: list[dict[str, object]] = [{"frame_type": "stream", "length": 1200}]
        if acked is not None:
            frames = [{"frame_type": "ack", "acked_ranges": [[0, "ACKED"]]}]
            if acked == number:
                frames = [{"frame_type": "ack", "acked_ranges": [["ACKED", "ACKED"]]}]
        data = {"header": {"packet_type": "1RTT", "packet_number": "PN"}, "frames": frames}
        record = orjson.dumps({"time": t, "name": f"transport:{name}", "data": data})
        # numbers past 64 bits written as JSON allows (orjson writes 64-bit integers only)
        record = record.replace(b'"PN"', repr(pn).encode())
        return b"\x1e" + record.replace(b'"ACKED"', repr(acked).encode())

    parts = [b"\x1e" + orjson.dumps(head)]
    for i in range(n):
        parts.append(packet(10.0 * i, "packet_received", i))
        parts.append(packet(10.0 * i + 1, "packet_sent", i, acked=i))
    t = 10.0 * n
    parts.append(packet(t, "packet_received", number if where != "range" else n))
    if where in ("ack", "range"):
        parts.append(packet(t + 1, "packet_sent", n, acked=number))
    path.write_bytes(b"\n".join(parts) + b"\n")
    return path


def typed_tables() -> dict[str, Any]:
    """Columns of every kind a Parquet transitions table may hold by mistake, two rows each:
    name -> a polars Series (``typed_table`` puts one in place of a column)."""
    import datetime as dt

    import polars as pl

    return {
        "float": pl.Series([1.0, 2.0]),
        "bool": pl.Series([True, False]),
        "int": pl.Series([1, 2], dtype=pl.Int64),
        "uint": pl.Series([1, 2], dtype=pl.UInt8),
        "datetime": pl.Series([dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2)]),
        "duration": pl.Series([dt.timedelta(1), dt.timedelta(2)]),
        "list": pl.Series([[1], [2]]),
        "struct": pl.Series([{"a": 1}, {"a": 2}]),
        "binary": pl.Series([b"\xff", b"x"]),
        "null": pl.Series([None, None]),
        "categorical": pl.Series(["a", "b"], dtype=pl.Categorical),
    }


def typed_table(path: Path, column: str, kind: str, *, label: bool = True) -> Path:
    """A two-row Parquet transitions table whose ``column`` (``trace``, ``time_ms``, ``state``,
    an optional column, or a label ``version``) holds :func:`typed_tables` ``kind``; with a
    label column ``version`` beside it (``label``)."""
    import polars as pl

    frame = pl.DataFrame(
        {"trace": ["a", "a"], "time_ms": [0.0, 1.0], "state": ["SlowStart", "Recovery"]}
    )
    if label or column == "version":
        frame = frame.with_columns(version=pl.lit("v1"))
    frame = frame.with_columns(typed_tables()[kind].alias(column))
    frame.write_parquet(path)
    return path


#: seeds of :func:`corrupt_parquet` on which polars' Parquet reader panics (seeds 0..599 tried
#: with polars 2.1: these two panic, the others fail with an error or read)
PARQUET_PANIC_SEEDS = (260, 474)


def corrupt_parquet(path: Path, seed: int) -> Path:
    """A valid three-row Parquet transitions table (uncompressed, no statistics) with one to
    four bytes changed at random (``seed``): footers and pages the Parquet reader may fail on,
    or panic on."""
    import io
    import random

    import polars as pl

    frame = pl.DataFrame(
        {
            "trace": ["a", "a", "b"],
            "time_ms": [0.0, 1.0, 2.0],
            "state": ["SlowStart", "Recovery", "SlowStart"],
        }
    )
    buffer = io.BytesIO()
    frame.write_parquet(buffer, statistics=False, compression="uncompressed")
    data = bytearray(buffer.getvalue())
    rng = random.Random(seed)
    for _ in range(rng.randint(1, 4)):
        data[rng.randrange(4, len(data) - 8)] = rng.randrange(256)
    path.write_bytes(bytes(data))
    return path


def family_seeds(*, tables: bool = True) -> list[tuple[str, bytes]]:
    """Small inputs of the families the hostile campaigns found, as ``(file name, content)``:
    seeds for the fuzzers' corpora (``tables``: the Parquet ones too; the native core's target
    reads records, not tables)."""
    import tempfile

    makers: list[tuple[str, Any]] = [
        ("many-tiny-traces.sqlog", lambda p: many_tiny_traces(p, 40)),
        ("many-tiny-traces.qlog", lambda p: many_tiny_traces(p, 40, contained=True)),
        ("handed-back-metrics.sqlog", lambda p: handed_back_metrics(p, 8)),
        ("empty-json-seq-records.sqlog", lambda p: empty_records(p, 16)),
    ]
    for i, number in enumerate(OUT_OF_RANGE_NUMBERS):
        for where in ("packet", "ack", "range"):
            name = f"packet-number-{i}-{where}.sqlog"
            makers.append(
                (name, lambda p, n=number, w=where: out_of_range_packets(p, 6, number=n, where=w))
            )
    if tables:
        for column in ("trace", "time_ms", "state", "version"):
            for kind in ("float", "bool", "int", "list", "datetime"):
                name = f"typed-{column}-{kind}.parquet"
                makers.append((name, lambda p, c=column, k=kind: typed_table(p, c, k)))
        for seed in (*PARQUET_PANIC_SEEDS, 1, 2, 3):
            makers.append((f"corrupt-{seed}.parquet", lambda p, s=seed: corrupt_parquet(p, s)))
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in makers:
            path = make(Path(tmp) / name)
            out.append((name, path.read_bytes()))
    return out
