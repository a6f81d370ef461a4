"""The records a plot's marks open (quicsm.extract.raw_events), against the files read here on
their own: a JSON-SEQ record's number and exact text, a contained JSON document's events by
their place in the trace's list, and the record a mark's time and kind name."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import orjson
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.extract.raw_events import trace_records
from quicsm.render.mark_records import NAMES, record

REAL = Path(__file__).parent / "fixtures" / "real"
SEQ = REAL / "quic-go-v0.65.0" / "server.sqlog.zst"
CONTAINED = REAL / "aioquic-1.7.2" / "client.qlog.gz"


def _seq_records() -> list[bytes]:
    with SEQ.open("rb") as f:
        content = zstandard.ZstdDecompressor().stream_reader(f).read()
    return [part.strip() for part in content.split(b"\x1e")]


RECORDS = trace_records(SEQ, 0)


def test_each_record_is_the_files_text_at_its_number() -> None:
    assert RECORDS is not None and RECORDS.unit == "record"
    parts = _seq_records()
    events = [i for i, p in enumerate(parts) if p and "name" in json.loads(p)]
    assert RECORDS.numbers == events and len(events) > 500  # every event of its one trace
    first = json.loads(parts[RECORDS.numbers[0]])["time"]
    for number, name, at in zip(RECORDS.numbers, RECORDS.names, RECORDS.times, strict=True):
        text = parts[number].decode()
        assert RECORDS.text_of(number) == text
        event = json.loads(text)
        assert event["name"].rpartition(":")[2] == name
        assert at == round(event["time"] - first, 3)
    assert RECORDS.heading(RECORDS.numbers[3]).startswith(f"{SEQ}, trace 0, record ")


def test_a_contained_documents_events_count_from_one() -> None:
    records = trace_records(CONTAINED, 0)
    assert records is not None and records.unit == "event"
    events = orjson.loads(gzip.decompress(CONTAINED.read_bytes()))["traces"][0]["events"]
    assert len(records.numbers) == len(events)
    for number in records.numbers:
        assert orjson.loads(records.text_of(number)) == events[number - 1]
    assert trace_records(CONTAINED, 5) is None  # no such trace


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(sorted(NAMES)))
def test_a_mark_opens_an_event_of_its_kind_at_its_time(seed: int, kind: str) -> None:
    """The record named for a mark of a kind at an event's time is at that time, and of the
    kind's events whenever one is there."""
    assert RECORDS is not None
    i = seed % len(RECORDS.numbers)
    t = RECORDS.times[i]
    number = record(RECORDS, kind, t)
    assert number in RECORDS.numbers
    j = RECORDS.numbers.index(number)
    assert abs(RECORDS.times[j] - t) <= 0.0011
    names_here = {RECORDS.names[k] for k in range(len(RECORDS.times))
                  if abs(RECORDS.times[k] - t) <= 0.0011}  # fmt: skip
    if names_here & NAMES[kind]:
        assert RECORDS.names[j] in NAMES[kind]


SHIPPED = Path(__file__).parent.parent / "traces" / "quic-go-v0.65.0.qlog"


def _fields(r: object) -> tuple[object, ...]:
    return tuple(getattr(r, k) for k in ("file", "trace", "unit", "numbers", "names", "times",
                                          "data", "texts"))  # fmt: skip


@settings(max_examples=8)
@given(st.sampled_from([0, 1, 2, 37, 74]), st.sampled_from([4096, 65536, 1 << 20]))
def test_records_are_the_same_whatever_the_blocks(trace: int, block_size: int) -> None:
    """The file is read in blocks as far as the trace's end: small blocks (separators falling
    across them) give the records the default blocks give."""
    assert _fields(trace_records(SHIPPED, trace, block_size=block_size)) == _fields(
        trace_records(SHIPPED, trace)
    )


def test_a_trace_near_the_start_reads_a_part_of_the_file() -> None:
    from quicsm.qlog.blocks import count_bytes

    read: list[int] = []
    with count_bytes(read.append):
        first = trace_records(SHIPPED, 0)
    assert first is not None and first.numbers
    assert sum(read) < SHIPPED.stat().st_size / 4  # of the 75 traces, the first few only
    read.clear()
    with count_bytes(read.append):
        last = trace_records(SHIPPED, 74)
    assert last is not None and last.numbers and sum(read) == SHIPPED.stat().st_size
    # the last trace's records are the file's last records
    with zstandard.open(SHIPPED, "rb") as f:
        records = [part.strip() for part in f.read().split(b"\x1e")]
    assert last.texts[-1].encode() == records[last.numbers[-1]]


def _starts(path: Path) -> dict[int, int]:
    """Each trace's start in the file's decompressed content, from its index."""
    from quicsm.extract.index import read_trace_index

    index = read_trace_index([path])
    return {int(n): int(s) for n, s in index.select("number", "start").iter_rows()}


def test_a_trace_read_from_its_start_in_the_index_is_the_trace_read_from_the_files_start(
    tmp_path: Path,
) -> None:
    """Given where a trace begins (the file's index), the records before it are only counted:
    the same records, numbers and texts as reading from the file's first record, in JSON-SEQ
    and NDJSON, whatever the blocks; a start where no record begins is not trusted."""
    starts = _starts(SHIPPED)
    assert len(starts) == 75
    for trace in (0, 1, 2, 37, 73, 74):
        whole = _fields(trace_records(SHIPPED, trace))
        assert _fields(trace_records(SHIPPED, trace, start=starts[trace])) == whole
        assert _fields(trace_records(SHIPPED, trace, start=starts[trace], block_size=4096)) == whole
        for wrong in (starts[trace] + 1, starts[trace] - 1, 10**12):
            assert _fields(trace_records(SHIPPED, trace, start=wrong)) == whole
    # NDJSON: the same traces as lines (a header, then its events), a blank line among them
    with zstandard.open(SHIPPED, "rb") as f:
        parts = [p.strip() for p in f.read().split(b"\x1e")]
    heads = [i for i, p in enumerate(parts) if p and not p.startswith(b'{"time"')][:4]
    chosen = [q for h in heads for q in parts[h : h + 300]]  # four traces, shortened
    lines = b"\n".join(chosen[:100] + [b""] + chosen[100:]) + b"\n"
    nd = tmp_path / "traces.ndjson"
    nd.write_bytes(lines)
    nd_starts = _starts(nd)
    assert len(nd_starts) == 4
    for trace, start in nd_starts.items():
        whole = _fields(trace_records(nd, trace))
        assert whole[3]  # it has records
        assert _fields(trace_records(nd, trace, start=start, block_size=4096)) == whole
        assert _fields(trace_records(nd, trace, start=start + 3)) == whole


def test_a_late_trace_is_read_past_the_others_without_decoding_them() -> None:
    """From its start, the last trace of the 75 decodes its own records only: the records
    before it are counted, not parsed (the count of JSON decodes says so)."""
    import quicsm.extract.raw_events as raw

    calls = 0
    real = raw.orjson.loads

    def counting(data: bytes) -> object:
        nonlocal calls
        calls += 1
        return real(data)

    start = _starts(SHIPPED)[74]
    whole = trace_records(SHIPPED, 74)
    assert whole is not None
    try:
        raw.orjson.loads = counting  # type: ignore[assignment]
        assert _fields(trace_records(SHIPPED, 74, start=start)) == _fields(whole)
        from_start = calls
        calls = 0
        trace_records(SHIPPED, 74)
    finally:
        raw.orjson.loads = real  # type: ignore[assignment]
    assert from_start <= len(whole.numbers) + 1 < calls
