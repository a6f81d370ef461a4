"""Contained JSON: a document cut anywhere keeps exactly a prefix of its complete events."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.core.diagnostics import RecordProblem
from quicsm.qlog import contained
from quicsm.qlog.contained import ContainedParser
from quicsm.qlog.trace import TraceData
from quicsm.testing.mutate import mutate, seed_files

STATES = ["slow_start", "recovery", "congestion_avoidance"]


@st.composite
def documents(draw: st.DrawFn) -> tuple[bytes, list[list[str]]]:
    arrays = draw(st.booleans())
    traces, expected = [], []
    for _ in range(draw(st.integers(1, 3))):
        names = draw(st.lists(st.sampled_from(STATES), max_size=8))
        if arrays:
            events = [
                [i, "recovery", "congestion_state_updated", {"new": n, "note": 'a,]}"x'}]
                for i, n in enumerate(names)
            ]
            trace = {
                "event_fields": ["relative_time", "category", "event", "data"],
                "events": events,
            }
        else:
            events = [
                {
                    "time": i,
                    "name": "recovery:congestion_state_updated",
                    "data": {"new": n, "note": "[{,"},
                }
                for i, n in enumerate(names)
            ]
            trace = {"vantage_point": {"type": "client"}, "events": events}
        traces.append(trace)
        expected.append(names)
    doc = {"qlog_version": "draft-01" if arrays else "0.3", "traces": traces}
    return json.dumps(doc, indent=draw(st.sampled_from([None, 1]))).encode(), expected


@settings(max_examples=200, deadline=None)
@given(documents(), st.integers(0, 10**6))
def test_any_cut_keeps_a_prefix_of_complete_events(
    doc: tuple[bytes, list[list[str]]], cut: int
) -> None:
    data, expected = doc
    cut = cut % (len(data) + 1)
    parser = ContainedParser()
    try:
        traces = parser.parse(data[:cut])
    except RecordProblem:
        return
    got = [[s.new for s in t.states] for t in traces]
    flat_got = [n for t in got for n in t]
    flat_expected = [n for t in expected for n in t]
    assert flat_got == flat_expected[: len(flat_got)]
    for g, e in zip(got, expected, strict=False):
        assert g == e[: len(g)]
    if cut == len(data):
        assert got == expected and parser.truncated_at is None
    elif traces:
        assert parser.truncated_at is not None


def test_mismatched_brackets_are_an_error_not_a_truncation() -> None:
    with pytest.raises(RecordProblem, match="']'"):
        ContainedParser().parse(b'{"traces": [{"events": [{"time": 1, "name": "a:b"}}')


def _summary(traces: list[TraceData]) -> list[tuple[object, ...]]:
    return [
        (t.index, t.vantage, t.n_events, t.first_time, t.last_time, [s.new for s in t.states])
        for t in traces
    ]


@settings(max_examples=200, deadline=None)
@given(documents(), st.lists(st.integers(1, 64), min_size=1, max_size=40), st.booleans())
def test_any_chunking_reads_the_same(
    doc: tuple[bytes, list[list[str]]], sizes: list[int], escapes: bool
) -> None:
    """The streaming parser's result does not depend on where blocks begin and end (strings
    with escaped quotes and backslashes crossing block boundaries included)."""
    data, _ = doc
    if escapes:
        data = data.replace(b'"note": "', b'"note": "\\\\\\"\\\\')
    whole = ContainedParser()
    expected = _summary(whole.parse(data))
    parser = ContainedParser()
    pos = i = 0
    while pos < len(data):
        size = sizes[i % len(sizes)]
        parser.feed(data[pos : pos + size])
        pos += size
        i += 1
    assert _summary(parser.close()) == expected
    assert parser.truncated_at is None


def test_members_after_the_events_are_read() -> None:
    """vantage_point and time units named after the events (the document is read twice when
    the time conventions come late)."""
    doc = (
        b'{"traces": [{"events": [[1000, "recovery", "congestion_state_updated", '
        b'{"new": "slow_start"}], [3000, "recovery", "congestion_state_updated", '
        b'{"new": "recovery"}]], "event_fields": ["relative_time", "category", "event", "data"],'
        b' "configuration": {"time_units": "us"}, "vantage_point": {"type": "server"}}],'
        b' "qlog_version": "draft-01"}'
    )
    parser = ContainedParser()
    parser.parse(doc)
    assert list(parser.reread) == [0]
    again = ContainedParser(headers=parser.reread)
    (trace,) = again.parse(doc)
    assert not again.reread
    assert trace.vantage == "server" and trace.format == "JSON draft-01"
    assert [s.time for s in trace.states] == [1.0, 3.0]


def test_a_cut_keeps_a_complete_member_after_the_events() -> None:
    doc = (
        b'{"traces": [{"events": [{"time": 1, "name": "recovery:congestion_state_updated", '
        b'"data": {"new": "slow_start"}}], "vantage_point": {"type": "client"}'
    )
    parser = ContainedParser()
    (trace,) = parser.parse(doc)
    assert trace.vantage == "client" and parser.truncated_at is not None


def test_trailing_empty_event_and_qlog_01() -> None:
    doc = b'{"qlog_version": "draft-01", "traces": [{"events": [{"time": 1, "name": "a:b"}, []]}]}'
    parser = ContainedParser()
    (trace,) = parser.parse(doc)
    assert trace.n_events == 1 and not parser.problems
    old = b'{"qlog_version": "0.1", "fields": ["time", "type"], "events": [[0, "A"], [2, "B"], []]}'
    (trace,) = ContainedParser().parse(old)
    assert trace.n_events == 2 and trace.format == "JSON 0.1" and trace.last_time == 2
    cut = ContainedParser()
    (trace,) = cut.parse(old[:-12])  # cut inside the second event: the first is kept
    assert trace.n_events == 1 and cut.truncated_at is not None
    with pytest.raises(RecordProblem) as info:
        ContainedParser().parse(b'{"qlog_version": "0.1",\n "fields": ["time"]}')
    assert info.value.line == 1 and "events" in info.value.expected


def test_whole_document_errors() -> None:
    with pytest.raises(RecordProblem) as info:
        ContainedParser().parse(b"[1, 2]")
    assert info.value.expected == 'a qlog object with "traces"' and info.value.got == "an array"
    with pytest.raises(RecordProblem, match="the end of the document"):
        ContainedParser().parse(b'{"traces": [] } trailing')


# --- whole events at once (contained.FAST_EVENTS) against one structural character at a time --

_CONTAINED_SEEDS = [data for _, data in seed_files(1 << 20) if data.lstrip().startswith(b"{")]


def _parse(data: bytes, *, fast: bool, lenient: bool, chunk: int) -> object:
    old = contained.FAST_EVENTS
    contained.FAST_EVENTS = fast
    try:
        parser = ContainedParser(want_metrics=True, lenient=lenient)
        for i in range(0, len(data), chunk):
            parser.feed(data[i : i + chunk])
        traces = parser.close()
    except RecordProblem as problem:
        return ("error", str(problem))
    finally:
        contained.FAST_EVENTS = old
    return (traces, [str(p) for p in parser.problems], parser.skipped, parser.truncated_at)


def test_the_contained_seeds_are_several() -> None:
    assert len(_CONTAINED_SEEDS) >= 4


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 1000),
    rng_seed=st.integers(0, 2**32 - 1),
    kinds=st.lists(
        st.sampled_from(["flip", "truncate", "swap", "huge", "nest", "backwards", "variant"]),
        max_size=2,
        unique=True,
    ),
    chunk=st.sampled_from([997, 65536, 1 << 20]),
    lenient=st.booleans(),
)
def test_whole_events_at_once_read_the_same(
    seed: int, rng_seed: int, kinds: list[str], chunk: int, lenient: bool
) -> None:
    data = _CONTAINED_SEEDS[seed % len(_CONTAINED_SEEDS)]
    if kinds:
        data = mutate(data, random.Random(rng_seed), kinds=kinds)
    fast = _parse(data, fast=True, lenient=lenient, chunk=chunk)
    assert fast == _parse(data, fast=False, lenient=lenient, chunk=chunk)
