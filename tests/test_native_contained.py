"""Contained JSON read by the native core (``native/src/contained.rs``): the same traces, rows,
problems and errors as the Python parser, on every contained fixture and on generated documents
mixing events it reads with events it hands back; linear time; errors naming the file and the
event's index."""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quicsm.core import native
from quicsm.core.diagnostics import RecordProblem
from quicsm.core.errors import QlogError
from quicsm.qlog.contained import ContainedParser
from quicsm.qlog.source import read_qlog
from quicsm.qlog.trace import Discard, TraceData
from quicsm.testing.large import AIOQUIC, repeated_contained

sys.path.insert(0, str(Path(__file__).resolve().parent))
from native_outcome import compare  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.skipif(not native.installed(), reason="the native core is built with the package"),
]

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TRACES = Path(__file__).resolve().parents[1] / "traces"
#: every contained-JSON fixture (and the committed traces, which are contained JSON)
CONTAINED = sorted(
    {
        *FIXTURES.glob("real/aioquic-*/*.qlog.*"),
        *FIXTURES.glob("*/*.qlog"),
        *FIXTURES.glob("*/*/*.qlog"),
        *TRACES.glob("*.qlog"),
    }
)


@contextmanager
def _implementation(on: bool) -> Iterator[None]:
    old = os.environ.get(native.NATIVE_ENV)
    os.environ[native.NATIVE_ENV] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ[native.NATIVE_ENV]
        else:
            os.environ[native.NATIVE_ENV] = old


class _Counting:
    """``quicsm._native`` with its calls of ``contained_events`` counted (events read)."""

    def __init__(self, ext: Any) -> None:
        self._ext = ext
        self.calls = 0
        self.events = 0

    def contained_events(self, *args: Any) -> Any:
        out = self._ext.contained_events(*args)
        self.calls += 1
        self.events += out[1]
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ext, name)


def _parse(data: bytes, *, on: bool, lenient: bool, chunk: int | None = None) -> Any:
    """What the parser gives (traces, problems, truncation) or its error, comparable."""
    with _implementation(on):
        parser = ContainedParser(metric_sink=Discard.of, lenient=lenient)
    try:
        step = chunk or len(data) or 1
        for i in range(0, len(data), step):
            parser.feed(data[i : i + step])
        parser.close()
    except RecordProblem as problem:
        return ("error", str(problem))
    return (
        [_trace(t) for t in parser.traces],
        [str(p) for p in parser.problems],
        parser.skipped,
        parser.truncated_at,
        parser.truncated_line,
        sorted(parser.reread),
    )


def _trace(t: TraceData) -> tuple[Any, ...]:
    return (
        t.index,
        t.first_time,
        t.last_time,
        t.n_events,
        t.states,
        dict(t.event_counts or {}),
        [str(p) for p in t.problems],
        t.repaired,
        t.n_repaired,
        t.last_derive_time,
    )


def _decompressed(path: Path) -> bytes:
    from quicsm.qlog.blocks import DecompressedFile

    return b"".join(DecompressedFile(path).blocks())


@pytest.mark.parametrize("path", CONTAINED, ids=lambda p: p.name)
@pytest.mark.parametrize("states", ["explicit", "derived", "hybrid"])
def test_native_reads_every_contained_fixture_as_python_does(path: Path, states: str) -> None:
    for lenient in (False, True):
        found, _ = compare(path, states=states, lenient=lenient)
        assert found is None, found


@pytest.mark.parametrize("path", CONTAINED, ids=lambda p: p.name)
def test_native_traces_equal_python_traces(path: Path) -> None:
    data = _decompressed(path)
    for chunk in (None, 4096, 777):
        assert _parse(data, on=True, lenient=False, chunk=chunk) == _parse(
            data, on=False, lenient=False, chunk=chunk
        )


def test_the_native_reader_reads_aioquic_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a fallback to Python in disguise: the events of the real aioquic traces are read
    by ``contained_events``, all but the last of each events array."""
    counting = _Counting(native.module())
    monkeypatch.setattr(native, "module", lambda: counting)
    read = read_qlog(AIOQUIC, metric_sink=Discard.of)
    total = sum(t.n_events or 0 for t in read.traces)
    assert counting.calls >= 1
    assert counting.events == total - len(read.traces), (counting.events, total)


# -- generated documents: events the native core reads, and every kind it hands back --------

#: (kind, event maker from a time); "good" ones are read natively, the others handed back
_GOOD: list[Callable[[float], Any]] = [
    lambda t: {"time": t, "name": "recovery:metrics_updated", "data": {"cwnd": 12000 + int(t)}},
    lambda t: {
        "data": {"bytes_in_flight": int(t) % 5000, "latest_rtt": 20.5, "smoothed_rtt": 21},
        "name": "recovery:metrics_updated",
        "time": t,
    },
    lambda t: {"time": t, "name": "transport:packet_sent", "data": {"frames": [{"a": [1, 2]}]}},
    lambda t: {
        "time": t,
        "name": "recovery:congestion_state_updated",
        "data": {"old": "slow_start", "new": "recovery", "trigger": None},
    },
    lambda t: {"time": t, "name": "recovery:congestion_state_updated", "data": {"new": "é"}},
    lambda t: {"time": t, "name": "recovery:packet_lost", "data": {"header": {}}},
    lambda t: {
        "time": t,
        "name": "recovery:loss_timer_updated",
        "data": {"timer_type": "pto", "event_type": "expired"},
    },
    lambda t: {"time": t, "name": "transport:packet_received", "data": {"s": 'a,]}"\\'}},
]
_ODD: list[Callable[[float], Any]] = [
    lambda t: {"time": str(t), "name": "recovery:metrics_updated", "data": {"cwnd": 1}},
    lambda t: {"time": t - 50, "name": "transport:packet_sent"},  # backwards
    lambda t: {"time": t, "name": "recovery:metrics_updated", "data": {"cwnd": "big"}},
    lambda t: {"time": t, "name": "recovery:congestion_state_updated", "data": {"new": 3}},
    lambda t: {"time": t, "name": "recovery:congestion_state_updated", "data": {}},
    lambda t: {"time": t, "name": "RECOVERY:Metrics_Updated", "data": {"pto_count": -1}},
    lambda t: {"time": t, "name": "café:x"},
    lambda t: {"time": t, "name": 5},
    lambda t: {"time": t},
    lambda t: [t, "transport", "packet_sent", {}],
    lambda t: [],
    lambda t: "text",
    lambda t: {"time": t, "name": "x", "data": [[[[[]]]]]},
    lambda t: {"time": 1e300, "name": "x"},
]


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    traces = []
    for _ in range(draw(st.integers(1, 3))):
        t = 0.0
        events: list[Any] = []
        for _ in range(draw(st.integers(0, 40))):
            t += draw(st.sampled_from([0.0, 0.5, 3.0]))
            odd = draw(st.integers(0, 9)) == 0
            makers = _ODD if odd else _GOOD
            events.append(makers[draw(st.integers(0, len(makers) - 1))](t))
        trace: dict[str, Any] = {"vantage_point": {"type": "server"}, "events": events}
        header = draw(st.sampled_from(["plain", "delta", "us", "picoquic", "late"]))
        if header == "delta":
            trace["common_fields"] = {"time_format": "relative_to_previous_event"}
        elif header == "us":
            trace["configuration"] = {"time_units": "us"}
        elif header == "picoquic":
            trace["title"] = "picoquic"  # backward times repaired
        elif header == "late":  # named after the events: read again
            trace = {"events": events, "common_fields": {"time_format": "delta"}}
        traces.append(trace)
    doc = {"qlog_version": "0.3", "traces": traces}
    text = json.dumps(doc, indent=draw(st.sampled_from([None, 1])), ensure_ascii=False)
    if draw(st.booleans()):  # cut mid-write
        text = text[: draw(st.integers(0, len(text)))]
    return text.encode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), st.sampled_from([None, 64, 1000]), st.booleans())
def test_generated_documents_read_natively_as_in_python(
    data: bytes, chunk: int | None, lenient: bool
) -> None:
    assert _parse(data, on=True, lenient=lenient, chunk=chunk) == _parse(
        data, on=False, lenient=lenient, chunk=chunk
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_generated_documents_give_the_same_rows(tmp_path_factory: Any, data: bytes) -> None:
    path = tmp_path_factory.mktemp("doc") / "doc.qlog"
    path.write_bytes(data)
    for states in ("explicit", "derived", "hybrid"):
        for lenient in (False, True):
            found, _ = compare(path, states=states, lenient=lenient)
            assert found is None, found


# -- errors, limits and time ------------------------------------------------------------------


def _document(events: list[Any], **trace: Any) -> bytes:
    return json.dumps({"qlog_version": "0.3", "traces": [{**trace, "events": events}]}).encode()


def _good(n: int) -> list[Any]:
    return [_GOOD[i % 3](float(i)) for i in range(n)]


@pytest.mark.parametrize("on", [True, False])
def test_an_error_names_the_file_and_the_event_index(tmp_path: Path, on: bool) -> None:
    events = _good(5000)
    events[4321] = {"time": 4321.0, "name": "recovery:metrics_updated", "data": {"cwnd": "x"}}
    path = tmp_path / "bad.qlog"
    path.write_bytes(_document(events))
    with _implementation(on), pytest.raises(QlogError) as caught:
        read_qlog(path, metric_sink=Discard.of)
    assert str(caught.value).startswith(f"{path}: traces[0].events[4321]: expected a number")


def test_an_event_over_max_record_bytes_is_the_same_error(tmp_path: Path) -> None:
    from quicsm.qlog.blocks import ReadLimits

    events = _good(300)
    events[200] = {"time": 200.0, "name": "x", "data": {"pad": "p" * 5000}}
    path = tmp_path / "large.qlog"
    path.write_bytes(_document(events))
    limits = ReadLimits(max_record_bytes=4096)
    errors = []
    for on in (True, False):
        with _implementation(on), pytest.raises(QlogError) as caught:
            read_qlog(path, metric_sink=Discard.of, limits=limits)
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    assert "max_record_bytes" in errors[0]


def _cpu(read: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(3):
        count, start = 0, time.process_time()
        while True:
            read()
            count += 1
            spent = time.process_time() - start
            if spent >= 0.05:
                break
        best = min(best, spent / count)
    return best


@pytest.mark.parametrize("shape", ["native", "handed back", "alternating"])
def test_the_native_splitter_reads_in_linear_time(tmp_path: Path, shape: str) -> None:
    """CPU time at 16n under 64x the time at n (linear work gives 16x, a quadratic path 256x;
    64x is their geometric midpoint, wide enough for a shared machine's noise): events
    read natively, events all handed back (string times, which Python reads), and the two
    alternating (a hand-back every other event: each one a Python scan window and a native
    call)."""

    def make(n: int) -> Path:
        events = _good(n)
        for i in range(n):
            if shape == "handed back" or (shape == "alternating" and i % 2):
                events[i] = {**events[i], "time": str(events[i]["time"])}
        path = tmp_path / f"{shape}-{n}.qlog"
        path.write_bytes(_document(events))
        return path

    n = 5_000
    small, large = make(n), make(16 * n)
    t1 = _cpu(lambda: read_qlog(small, metric_sink=Discard.of))
    t16 = _cpu(lambda: read_qlog(large, metric_sink=Discard.of))
    assert t16 < 64 * t1, f"n: {t1:.4f} s, 16n: {t16:.4f} s ({t16 / t1:.1f}x)"


def test_a_large_document_keeps_memory_to_a_block(tmp_path: Path) -> None:
    """The native reader's buffer holds a block and the element in progress, not the document
    (the parser's own buffer, checked after every block)."""
    path = tmp_path / "big.qlog"
    repeated_contained(path, 24 << 20)
    with _implementation(True):
        parser = ContainedParser(metric_sink=Discard.of)
    from quicsm.qlog.blocks import DecompressedFile

    largest = 0
    for block in DecompressedFile(path, block_size=1 << 20).blocks():
        parser.feed(block)
        largest = max(largest, len(parser._buf))
    parser.close()
    assert largest <= 4 << 20, largest
    assert parser.traces[0].n_events and parser.traces[0].n_events > 100_000


def test_a_random_mix_of_hand_backs_reads_the_same(tmp_path: Path) -> None:
    """A long document with a hand-back now and then (every kind), in blocks of odd sizes."""
    rng = random.Random(7)
    events: list[Any] = []
    for i in range(20_000):
        makers = _ODD if rng.random() < 0.02 else _GOOD
        events.append(rng.choice(makers)(float(i)))
    data = _document(events)
    for lenient in (True, False):
        assert _parse(data, on=True, lenient=lenient, chunk=65_537) == _parse(
            data, on=False, lenient=lenient, chunk=65_537
        )
