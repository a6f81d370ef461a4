"""The sans-I/O JSON-SEQ / NDJSON scanner: chunking never matters, bad input never escapes."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quicsm.core.diagnostics import RecordProblem, locate
from quicsm.qlog.seq import LF, RS, SeqScanner
from quicsm.qlog.trace import TraceData

STATES = ["slow_start", "congestion_avoidance", "recovery", "application_limited", "Mystery"]


def header(i: int, *, delta: bool = False) -> dict[str, Any]:
    common: dict[str, Any] = {"time_format": "delta" if delta else "relative"}
    return {
        "qlog_version": "0.3",
        "qlog_format": "JSON-SEQ",
        "trace": {
            "vantage_point": {"type": "client"},
            "common_fields": common,
            "quicsm_labels": {"run": i},
        },
    }


@st.composite
def streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 3))):
        records.append(header(i, delta=draw(st.booleans())))
        t = 0.0
        for _ in range(draw(st.integers(0, 12))):
            t += draw(st.floats(0, 50, allow_nan=False))
            kind = draw(
                st.sampled_from(["sent", "state", "metrics", "lost", "timer", "trace-word"])
            )
            if kind == "state":
                records.append(
                    {
                        "time": t,
                        "name": "recovery:congestion_state_updated",
                        "data": {"new": draw(st.sampled_from(STATES))},
                    }
                )
            elif kind == "metrics":
                records.append(
                    {
                        "time": t,
                        "name": "recovery:metrics_updated",
                        "data": {
                            "congestion_window": draw(st.integers(1000, 90000)),
                            "ssthresh": 40000,
                        },
                    }
                )
            elif kind == "lost":
                records.append(
                    {
                        "time": t,
                        "name": "recovery:packet_lost",
                        "data": {"trigger": "time_threshold"},
                    }
                )
            elif kind == "timer":
                records.append(
                    {
                        "time": t,
                        "name": "recovery:loss_timer_updated",
                        "data": {"timer_type": "pto", "event_type": "expired"},
                    }
                )
            elif kind == "trace-word":  # an event that mentions "trace" is not a header
                records.append(
                    {
                        "time": t,
                        "name": "transport:packet_sent",
                        "data": {"note": '"trace"', "trace": 1},
                    }
                )
            else:
                records.append({"time": t, "name": "transport:packet_sent", "data": {"pn": 1}})
    return records


def encode(records: list[dict[str, Any]], sep: bytes) -> bytes:
    if sep == RS:
        return b"".join(RS + json.dumps(r).encode() + b"\n" for r in records)
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def run(data: bytes, chunks: list[int] | None = None, **kw: Any) -> list[TraceData]:
    scanner = SeqScanner(**kw)
    if chunks is None:
        scanner.feed(data)
    else:
        pos = 0
        for size in chunks:
            scanner.feed(data[pos : pos + size])
            pos += size
        scanner.feed(data[pos:])
    return scanner.close()


def as_dicts(traces: list[TraceData]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(t) for t in traces]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.sampled_from([RS, LF]), st.booleans(), st.booleans())
def test_whole_equals_byte_by_byte(
    records: list[dict[str, Any]], sep: bytes, metrics: bool, count: bool
) -> None:
    data = encode(records, sep)
    whole = run(data, sep=sep, want_metrics=metrics, count=count)
    bytewise = run(data, [1] * len(data), sep=sep, want_metrics=metrics, count=count)
    assert as_dicts(whole) == as_dicts(bytewise)
    assert len(whole) == sum(1 for r in records if "trace" in r and "name" not in r)


@settings(max_examples=60, deadline=None)
@given(streams(), st.lists(st.integers(0, 97), max_size=30), st.sampled_from([RS, LF]))
def test_any_chunking_gives_the_same_traces(
    records: list[dict[str, Any]], chunks: list[int], sep: bytes
) -> None:
    data = encode(records, sep)
    assert as_dicts(run(data, chunks, sep=sep)) == as_dicts(run(data, sep=sep))


@settings(max_examples=40, deadline=None)
@given(streams())
def test_fast_path_agrees_with_full_decoding(records: list[dict[str, Any]]) -> None:
    data = encode(records, RS)
    fast = run(data, want_metrics=True, count=True)
    full = run(data, want_metrics=True, full=True)
    for a, b in zip(fast, full, strict=True):
        assert a.states == b.states
        assert a.metrics == b.metrics
        assert (a.first_time, a.last_time, a.n_events) == (b.first_time, b.last_time, b.n_events)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([RS, LF]), st.booleans())
def test_arbitrary_bytes_give_traces_or_our_problem(data: bytes, sep: bytes, lenient: bool) -> None:
    for chunks in (None, [1] * len(data)):
        try:
            traces = run(data, chunks, sep=sep, lenient=lenient, count=True)
        except RecordProblem:
            assert not lenient
            continue
        assert isinstance(traces, list)


@settings(max_examples=200, deadline=None)
@given(streams(), st.binary(max_size=40), st.integers(0, 10_000))
def test_corrupted_streams_never_escape(
    records: list[dict[str, Any]], junk: bytes, where: int
) -> None:
    data = encode(records, RS)
    where = where % (len(data) + 1)
    corrupted = data[:where] + junk + data[where:]
    for lenient in (False, True):
        try:
            whole = run(corrupted, sep=RS, lenient=lenient)
        except RecordProblem as problem:
            assert problem.offset is not None and 0 <= problem.offset <= len(corrupted)
            with pytest.raises(RecordProblem):
                run(corrupted, [1] * len(corrupted), sep=RS, lenient=lenient)
            continue
        assert as_dicts(whole) == as_dicts(
            run(corrupted, [1] * len(corrupted), sep=RS, lenient=lenient)
        )


def test_truncated_last_record_is_reported_and_the_rest_kept() -> None:
    records = [
        header(0),
        {"time": 1, "name": "recovery:congestion_state_updated", "data": {"new": "slow_start"}},
    ]
    data = encode(records, RS) + RS + b'{"time": 2, "name": "recovery:congestion_st'
    scanner = SeqScanner()
    scanner.feed(data)
    traces = scanner.close()
    assert scanner.truncated_at == len(encode(records, RS)) + 1
    assert [s.new for s in traces[0].states] == ["slow_start"]
    assert locate(data, scanner.truncated_at, sep=RS) == (3, 3)


def test_bad_record_in_the_middle_is_an_error_with_its_offset() -> None:
    good = encode([header(0), {"time": 1, "name": "transport:packet_sent", "data": {}}], RS)
    data = (
        good + RS + b'["time", "congestion_state_updated"]\n' + RS + b'{"time": 3, "name": "x"}\n'
    )
    with pytest.raises(RecordProblem) as info:
        run(data)
    assert info.value.offset == len(good) + 1
    assert info.value.expected == 'an object with "time" and "name"'
    assert info.value.got == "an array"
    lenient = SeqScanner(lenient=True)
    lenient.feed(data)
    lenient.close()
    assert len(lenient.problems) == 1


def test_irrelevant_bad_records_are_only_framed() -> None:
    """The documented trade-off: the fast path does not decode records it does not need."""
    data = encode([header(0), {"time": 1, "name": "transport:packet_sent", "data": {}}], RS)
    data += RS + b"{not json at all}\n" + RS + b'{"time": 3, "name": "transport:packet_sent"}\n'
    assert len(run(data)) == 1
    with pytest.raises(RecordProblem):
        run(data, full=True)


def test_preamble_before_the_first_separator_is_an_error() -> None:
    with pytest.raises(RecordProblem) as info:
        run(b"garbage" + encode([header(0)], RS))
    assert info.value.offset == 0
    assert run(b" \n" + encode([header(0)], RS))[0].n_events == 0


def test_stream_must_start_with_a_header() -> None:
    data = encode([{"time": 1, "name": "transport:packet_sent", "data": {}}], RS)
    with pytest.raises(RecordProblem, match="header"):
        run(data)
    assert len(run(data, lenient=True)) == 1


def test_delta_times_are_summed() -> None:
    records = [header(0, delta=True)] + [
        {"time": 10, "name": "recovery:congestion_state_updated", "data": {"new": s}}
        for s in ("slow_start", "recovery", "congestion_avoidance")
    ]
    (trace,) = run(encode(records, RS))
    assert [s.time for s in trace.states] == [10, 20, 30]
    assert (trace.first_time, trace.last_time) == (10, 30)


# -- header search: the vectorised strategy for large regions equals the find-based one ------

_RECORDS = st.sampled_from(
    [
        b'{"qlog_version":"0.3","qlog_format":"JSON-SEQ","trace":{}}',
        b'{"file_schema":"x","serialization_format":"application/qlog+json-seq","trace":{}}',
        b' {"qlog_format":"NDJSON","trace":{}}',  # whitespace before the object
        b'{"time":1,"name":"recovery:metrics_updated","data":{"x_format":1}}',
        b'{"data":{"qlog_format":"x"},"name":"n","time":2}',
        b'{"name":"a_format","time":3}',
        b'{"time":4,"name":"transport:packet_sent","data":{}}',
        b'{"oops_format": [1, 2',  # not JSON, does not begin like an event
        b"_format",
        b"",
        b"{",
    ]
)


@given(st.lists(_RECORDS, max_size=40), st.sampled_from([RS, LF]), st.integers(0, 3))
def test_header_candidates_do_not_depend_on_the_strategy(
    records: list[bytes], sep: bytes, pad: int
) -> None:
    from quicsm.qlog import seq

    buf = b"x" * pad + sep + sep.join(records) + sep
    a, b = pad, len(buf) - 1
    by_native = [tuple(c) for c in seq._header_candidates(buf, a, b, sep)]
    old = seq._VECTOR_MIN_BYTES, os.environ.get("QUICSM_NATIVE")
    os.environ["QUICSM_NATIVE"] = "0"
    try:
        by_find = list(seq._header_candidates(buf, a, b, sep))
        seq._VECTOR_MIN_BYTES = 0
        by_vector = list(seq._header_candidates(bytearray(buf), a, b, sep))
    finally:
        seq._VECTOR_MIN_BYTES = old[0]
        if old[1] is None:
            del os.environ["QUICSM_NATIVE"]
        else:
            os.environ["QUICSM_NATIVE"] = old[1]
    assert by_vector == by_find == by_native
    # every candidate contains the needle and none begins like an event
    for rs, re_ in by_find:
        assert b"_format" in buf[rs + 1 : re_]
        assert not buf[rs + 1 :].startswith(seq._EVENT_PREFIXES)


def test_large_multi_trace_streams_read_the_same_whole_and_in_small_blocks() -> None:
    """A stream well over the vectorisation threshold: several traces, every header found."""
    records: list[dict[str, Any]] = []
    for i in range(3):
        records.append(header(i))
        for k in range(6000):
            name = "recovery:congestion_state_updated" if k % 1000 == 0 else "transport:packet_sent"
            data = {"new": STATES[k % 4]} if k % 1000 == 0 else {"raw": {"length": 1252}}
            records.append({"time": float(k), "name": name, "data": data})
    blob = b"".join(RS + json.dumps(r).encode() + LF for r in records)
    assert len(blob) > 1 << 20
    whole = SeqScanner()
    whole.feed(blob)
    pieces = SeqScanner()
    for i in range(0, len(blob), 4093):
        pieces.feed(blob[i : i + 4093])
    traces_whole, traces_pieces = whole.close(), pieces.close()
    assert len(traces_whole) == 3
    assert [dataclasses.asdict(t) for t in traces_whole] == [
        dataclasses.asdict(t) for t in traces_pieces
    ]


# -- record counting: the native count equals the Python expression it replaces -------------


@given(
    st.lists(st.sampled_from([b"\x1e", b"\n", b"x", b" ", b'{"time":1}']), max_size=60),
    st.sampled_from([RS, LF]),
    st.integers(0, 3),
    st.data(),
)
def test_records_are_counted_alike_natively_and_in_python(
    pieces: list[bytes], sep: bytes, pad: int, data: st.DataObject
) -> None:
    from quicsm.core import native
    from quicsm.qlog import seq

    ext = native.module()
    if ext is None:
        pytest.skip("the native core is not built")
    buf = b"x" * pad + sep + b"".join(pieces) + sep
    at = [i for i in range(len(buf)) if buf[i] == sep[0]]
    s = data.draw(st.sampled_from(at))
    e = data.draw(st.sampled_from([i for i in at if i >= s]))
    by_python = buf.count(sep, s, e) - buf.count(sep + sep, s, e + 1)
    assert ext.count_records(buf, s, e, sep[0]) == by_python
    assert ext.count_records(bytearray(buf), s, e, sep[0]) == by_python
    assert seq._count_records(buf, s, e, sep) == by_python
    # the records of a stream without empty ones are its separators
    if sep + sep not in buf[s : e + 1]:
        assert by_python == buf.count(sep, s, e)


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.sampled_from([RS, LF]), st.lists(st.integers(1, 64), max_size=8))
def test_event_counts_do_not_depend_on_the_native_core(
    records: list[dict[str, Any]], sep: bytes, chunks: list[int]
) -> None:
    blob = encode(records, sep).replace(sep, sep + sep, 3)  # some empty records too
    native_counts = [t.n_events for t in run(blob, chunks, sep=sep, count=True)]
    old = os.environ.get("QUICSM_NATIVE")
    os.environ["QUICSM_NATIVE"] = "0"
    try:
        python_counts = [t.n_events for t in run(blob, chunks, sep=sep, count=True)]
    finally:
        if old is None:
            del os.environ["QUICSM_NATIVE"]
        else:
            os.environ["QUICSM_NATIVE"] = old
    assert native_counts == python_counts
