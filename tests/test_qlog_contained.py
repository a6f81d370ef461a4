"""Contained JSON: a document cut anywhere keeps exactly a prefix of its complete events."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.core.diagnostics import RecordProblem
from quicsm.qlog.contained import ContainedParser, repair_truncated

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


def test_repair_refuses_mismatched_brackets() -> None:
    assert repair_truncated(b'{"traces": [{"events": [1, 2}') is None
    assert repair_truncated(b'{"traces": [{"events": [[1], [2') == (
        b'{"traces": [{"events": [[1]]}]}',
        27,
    )


def test_whole_document_errors() -> None:
    with pytest.raises(RecordProblem) as info:
        ContainedParser().parse(b"[1, 2]")
    assert info.value.expected == 'a qlog object with "traces"' and info.value.got == "an array"
    with pytest.raises(RecordProblem, match="JSON document"):
        ContainedParser().parse(b'{"traces": [] } trailing')
