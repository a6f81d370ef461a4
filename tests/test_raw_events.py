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
