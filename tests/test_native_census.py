"""``quicsm inspect`` of JSON-SEQ and NDJSON read by the native core (``native/src/census.rs``):
the same summary, event counts, states, problems and capabilities as the Python full read, on
the committed traces and fixtures and on generated streams mixing records it reads with records
it hands back (headers, bad JSON, times going backwards, escaped or non-ASCII names and frame
types, duplicate keys, odd values); and inspect reads the file once."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quicsm.core import native
from quicsm.extract.capabilities import capability_lines, inspect_capabilities

pytestmark = [
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.skipif(not native.installed(), reason="the native core is built with the package"),
]

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TRACES = Path(__file__).resolve().parents[1] / "traces"
#: the committed JSON-SEQ and NDJSON traces (and any other fixture: other formats must simply
#: agree too)
FILES = sorted(
    {
        *TRACES.glob("*.qlog"),
        *(p for p in (FIXTURES / "qlog").glob("*") if p.is_file()),
        *FIXTURES.glob("stock/*.qlog"),
        *FIXTURES.glob("identify/*.qlog"),
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


def _inspected(path: Path, *, on: bool) -> dict[str, Any]:
    """Everything inspect prints and keeps of ``path``, read natively or in Python."""
    with _implementation(on):
        report, found = inspect_capabilities(path)
    return {
        "lines": report.lines() + capability_lines(found),
        "traces": [
            (
                t.index,
                t.first_time,
                t.last_time,
                t.n_events,
                dict(t.event_counts or {}),
                [(s.time, s.new, s.old, s.trigger) for s in t.states],
                t.last_derive_time,
            )
            for t in report.read
        ],
        "problems": (report.n_problems, report.problems, report.truncated),
    }


def _same(path: Path) -> None:
    ours, reference = _inspected(path, on=True), _inspected(path, on=False)
    assert ours == reference, path


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_committed_files_inspect_alike(path: Path) -> None:
    _same(path)


# -- generated streams -------------------------------------------------------------------------

_NAMES = st.sampled_from(
    [
        "recovery:metrics_updated",
        "quic:recovery_metrics_updated",
        "RECOVERY:METRICS_UPDATED",
        "recovery:packet_lost",
        "recovery:loss_timer_updated",
        "quic:timer_updated",
        "recovery:congestion_state_updated",
        "transport:packet_sent",
        "transport:packet_received",
        "PACKET_RX",
        "quic:packet_sent",
        "transport:parameters_set",
        "mvfst:congestion_metric_update",
        "recovery:spurious_loss",
        "transport:datagrams_received",
        "caf\u00e9:packet_sent",
        "x",
    ]
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**65), 2**65),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
_FRAME_TYPES = st.sampled_from(
    ["ack", "ACK", "ack_ecn", "Ack_Ecn", "stream", "padding", "ac\u212a", 5, None, True, ["ack"]]
)
_FRAMES = st.lists(
    st.one_of(
        st.fixed_dictionaries({"frame_type": _FRAME_TYPES}),
        st.fixed_dictionaries({"type": _FRAME_TYPES}),
        st.fixed_dictionaries({"frame_type": _FRAME_TYPES, "type": _FRAME_TYPES}),
        _SCALARS,
    ),
    max_size=3,
)
_METRIC_KEYS = st.sampled_from(
    [
        "cwnd",
        "congestion_window",
        "bytes_in_flight",
        "ssthresh",
        "latest_rtt",
        "smoothed_rtt",
        "rtt_variance",
        "pto_count",
        "app_limited",
        "cf_app_limited",
        "trigger",
        "timer_type",
        "event_type",
        "new",
        "old",
        "frames",
        "header",
    ]
)
_DATA = st.one_of(
    st.dictionaries(
        _METRIC_KEYS,
        st.one_of(_SCALARS, _FRAMES, st.sampled_from(["pto", "expired", "Recovery", 2**62])),
        max_size=5,
    ),
    _SCALARS,
)

_NUMBER = st.one_of(st.integers(0, 2**64), st.floats(0, 1e9), st.sampled_from([2**62, 2**64 - 1]))
_WELL_FORMED = st.one_of(
    st.tuples(
        st.sampled_from(["recovery:metrics_updated", "quic:recovery_metrics_updated"]),
        st.dictionaries(
            st.sampled_from(
                [
                    "cwnd",
                    "congestion_window",
                    "bytes_in_flight",
                    "ssthresh",
                    "latest_rtt",
                    "smoothed_rtt",
                    "pto_count",
                    "app_limited",
                ]
            ),
            _NUMBER,
            max_size=4,
        ),
    ),
    st.tuples(
        st.sampled_from(["transport:packet_sent", "transport:packet_received", "PACKET_TX"]),
        st.fixed_dictionaries({"frames": _FRAMES}),
    ),
    st.tuples(
        st.just("recovery:congestion_state_updated"),
        st.fixed_dictionaries(
            {"new": st.sampled_from(["Recovery", "slow_start", "x"])},
            optional={"old": st.sampled_from(["Recovery", None]), "trigger": st.just("loss")},
        ),
    ),
    st.tuples(
        st.sampled_from(["recovery:loss_timer_updated", "quic:timer_updated"]),
        st.fixed_dictionaries(
            {
                "timer_type": st.sampled_from(["pto", "ack"]),
                "event_type": st.sampled_from(["expired", "set"]),
            }
        ),
    ),
    st.tuples(st.just("recovery:packet_lost"), st.fixed_dictionaries({"trigger": st.text()})),
)


@st.composite
def _record(draw: st.DrawFn, clock: list[float]) -> bytes:
    """One record's text: mostly a well-formed event, sometimes anything else."""
    kind = draw(st.integers(0, 19))
    if kind == 0:  # text that may not be JSON at all
        return draw(st.sampled_from([b"{", b"[1,2]", b"  ", b"{}", b'{"time":1}', b"nul"]))
    if kind == 1:  # a header in the middle of the stream
        return json.dumps({"qlog_format": "JSON-SEQ", "trace": {"title": "again"}}).encode()
    step = draw(st.sampled_from([0.0, 0.5, 1.0, 3.25, 1.0, 2.0, -1.0]))
    clock[0] += step
    time: Any = clock[0]
    if kind == 2:
        time = draw(st.sampled_from([str(clock[0]), True, None, 1e19, 2**64, int(clock[0])]))
    if kind >= 9:  # well formed: what real producers write
        name, data = draw(_WELL_FORMED)
        event: dict[str, Any] = {"time": time, "name": name, "data": data}
    else:
        event = {"time": time, "name": draw(_NAMES)}
        if draw(st.booleans()):
            event["data"] = draw(_DATA)
    text = json.dumps(event, ensure_ascii=draw(st.booleans()))
    if kind == 3:  # a duplicate key
        text = text[:-1] + ', "name": "transport:packet_sent"}'
    if kind == 4:  # an escaped key or name
        text = text.replace('"frame_type"', '"fr\\u0061me_type"').replace(
            '"recovery:', '"recovery\\u003a'
        )
    if kind == 5:  # white space around it, or something after it
        text = draw(st.sampled_from([" \n", "\t", "\x0b", " 1"])).join(["", text, ""])
    if kind == 6:  # a line feed between its tokens (which ends an NDJSON record there)
        text = text.replace(", ", ",\n", 1)
    return text.encode()


@st.composite
def _stream(draw: st.DrawFn) -> bytes:
    sep = draw(st.sampled_from([b"\x1e", b"\n"]))
    common: dict[str, Any] = {}
    if draw(st.booleans()):
        common["time_format"] = draw(st.sampled_from(["delta", "relative", "absolute"]))
    configuration = {"time_units": "us"} if draw(st.booleans()) else {}
    title = draw(st.sampled_from(["aioquic", "quic-go", "picoquic", "quiche", "x"]))
    header = {
        "qlog_format": "JSON-SEQ" if sep == b"\x1e" else "NDJSON",
        "qlog_version": "0.3",
        "title": title,
        "trace": {
            "vantage_point": {"type": "server"},
            "common_fields": common,
            "configuration": configuration,
        },
    }
    clock = [0.0]
    records = [json.dumps(header).encode()]
    records += draw(st.lists(_record(clock), max_size=30))
    if sep == b"\n":
        if draw(st.booleans()):  # else a line feed within a record splits it in two
            records = [r.replace(b"\n", b" ") for r in records]
        return b"".join(r + b"\n" for r in records)
    return b"".join(b"\x1e" + r + b"\n" for r in records)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(content=_stream())
def test_generated_streams_inspect_alike(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "generated.sqlog"
    path.write_bytes(content)
    _same(path)


@pytest.mark.parametrize("on", [True, False], ids=["native", "python"])
def test_the_native_read_is_the_one_used(tmp_path: Path, on: bool) -> None:
    """A long metrics-only trace is read natively: Python decodes its header alone (and every
    record when the native core is switched off)."""
    from quicsm.qlog.seq import SeqScanner

    records = [json.dumps({"qlog_format": "JSON-SEQ", "trace": {"title": "aioquic"}})]
    for i in range(5000):
        data = {"cwnd": 12000 + i, "bytes_in_flight": i}
        records.append(json.dumps({"time": i, "name": "recovery:metrics_updated", "data": data}))
    path = tmp_path / "long.sqlog"
    path.write_bytes(b"".join(b"\x1e" + r.encode() + b"\n" for r in records))
    decoded = []
    original = SeqScanner._decode

    def counted(self: SeqScanner, *args: Any) -> Any:
        decoded.append(1)
        return original(self, *args)

    SeqScanner._decode = counted  # type: ignore[method-assign,assignment]
    try:
        with _implementation(on):
            report, found = inspect_capabilities(path)
    finally:
        SeqScanner._decode = original  # type: ignore[method-assign]
    assert report.read[0].n_events == 5000
    assert len(decoded) == (1 if on else 5001)
    assert "metrics, cwnd, bytes_in_flight" in capability_lines(found)[1]


def _hostile(directory: Path) -> dict[str, Path]:
    """The hostile campaigns' JSON-SEQ and NDJSON families (:mod:`quicsm.testing.hostile`),
    small."""
    from quicsm.testing import hostile

    d = directory
    return {
        "handed back": hostile.handed_back_metrics(d / "back.sqlog", 300),
        "handed back, not JSON": hostile.handed_back_metrics(d / "bad.sqlog", 300, invalid=True),
        "empty records": hostile.empty_records(d / "empty.sqlog", 5000),
        "empty lines": hostile.empty_records(d / "empty.ndjson", 5000, sep=b"\n"),
        "wide record": hostile.wide_record(d / "wide.sqlog", 20000),
        "metrics only": hostile.metrics_only(d / "metrics.sqlog", 1 << 20),
        "many tiny traces": hostile.many_tiny_traces(d / "tiny.sqlog", 300),
        "tiny traces with packets": hostile.many_tiny_traces(d / "p.sqlog", 300, packets=True),
        "packet -2": hostile.out_of_range_packets(d / "neg.sqlog", 20, number=-2, where="ack"),
        "packet 2^62": hostile.out_of_range_packets(d / "big.sqlog", 20, number=1 << 62),
    }


def test_hostile_families_inspect_alike(tmp_path: Path) -> None:
    for name, path in _hostile(tmp_path).items():
        ours, reference = _inspected(path, on=True), _inspected(path, on=False)
        assert ours == reference, name


def test_inspect_starts_without_polars_numpy_or_rich(tmp_path: Path) -> None:
    """``quicsm inspect`` of JSON-SEQ needs none of them (piped: no spinner)."""
    import subprocess
    import sys

    path = hostile_metrics(tmp_path)
    code = (
        "import sys\nfrom quicsm.cli import main\n"
        f"sys.argv = ['quicsm', 'inspect', {str(path)!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('numpy', 'polars', 'rich', 'scipy') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "events by name:" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "HEAVY []"


def hostile_metrics(directory: Path) -> Path:
    from quicsm.testing import hostile

    return hostile.metrics_only(directory / "metrics.sqlog", 1 << 16)
