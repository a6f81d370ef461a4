"""The native deriver (``native/``, module ``quicsm._native``) against the Python reference.

The Python deriver and reader stay the definition of derived states; the native ones must
give the same rows, the same diagnostics and the same errors. Checked on every committed
trace, on generated event sequences fed to both derivers, on generated JSON-SEQ/NDJSON files
with the odd records a native decoder could get wrong, and on mutations of the real fixtures.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_outcome import differences, native

from quicsm.core import native as core_native
from quicsm.extract.deriver import Deriver
from quicsm.extract.native import NativeDeriver
from quicsm.extract.profiles import PROFILES
from quicsm.qlog.events import MetricEvent
from quicsm.testing.mutate import MUTATIONS, mutate, seed_files

ROOT = Path(__file__).resolve().parents[1]


def test_the_native_deriver_is_built_and_used() -> None:
    # built with the package: a missing build fails here, not skips
    from quicsm import _native as quicsm_native

    assert quicsm_native.Deriver is not None
    with native(True):
        assert core_native.module() is quicsm_native
    with native(False):
        assert core_native.module() is None
    assert core_native.installed()


def test_reads_go_through_the_native_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    scan = NativeDeriver.scan_records

    def counting(self: NativeDeriver, *args: object) -> object:
        result = scan(self, *args)  # type: ignore[arg-type]
        calls.append(result[5])
        return result

    monkeypatch.setattr(NativeDeriver, "scan_records", counting)
    from quicsm.extract.read import read_transitions

    with native(True):
        frame = read_transitions(ROOT / "traces" / "aioquic-1.7.2.qlog", states="derived")
    assert frame.height > 100
    assert calls and sum(calls) > 1000  # records visited natively


def _committed() -> list[Path]:
    files = [
        *sorted((ROOT / "traces").rglob("*.qlog")),
        *sorted((ROOT / "benchmarks" / "corpora").glob("*.qlog")),
        *sorted(p for p in (ROOT / "tests" / "fixtures").rglob("*") if p.is_file()),
    ]
    return [p for p in files if p.name != "run.json"]


COMMITTED = _committed()


@pytest.mark.slow
@pytest.mark.parametrize("path", COMMITTED, ids=[str(p.relative_to(ROOT)) for p in COMMITTED])
def test_committed_traces_derive_the_same(path: Path) -> None:
    assert differences(path, states="derived", lenient=False) is None
    if path.stat().st_size < 5 << 20:
        assert differences(path, states="hybrid", lenient=True) is None


def test_the_committed_traces_are_many() -> None:
    assert len(COMMITTED) >= 30


# --- event sequences fed to both derivers ------------------------------------------------

_METRIC_VALUES = {
    "cwnd_bytes": [None, 2400.0, 2504.0, 12000.0, 13200.0, 14400.0, 14452.0, 30000.0, 1.2e7],
    "bytes_in_flight": [None, 0.0, 1200.0, 2400.0, 9600.0, 12000.0, 13200.0, 30000.0],
    "ssthresh_bytes": [None, 6000.0, 13200.0, 2.0**64],
    "latest_rtt_ms": [None, 0.0, 20.0, 35.5, 40.0, 80.0],
    "smoothed_rtt_ms": [None, 20.0, 40.0, -60.0],
    "rtt_variance_ms": [None, 0.1, 5.0],
    "pto_count": [None, 0.0, 1.0, 2.0, 3.0, 2000.0],
}


@st.composite
def _event(draw: st.DrawFn, time: float) -> MetricEvent:
    kind = draw(st.sampled_from(["metrics"] * 6 + ["packet_lost", "pto", "spurious_loss"]))
    if kind != "metrics":
        return MetricEvent(time, kind)
    values = {}
    for name, choices in _METRIC_VALUES.items():
        value = draw(st.sampled_from(choices))
        if value is not None:
            values[name] = value
    flag = draw(st.sampled_from([None, None, None, True, False]))
    return MetricEvent(time, "metrics", values, flag)


@st.composite
def _events(draw: st.DrawFn) -> list[MetricEvent]:
    out = []
    time = draw(st.floats(-10, 10))
    for _ in range(draw(st.integers(0, 120))):
        time += draw(st.sampled_from([0.0, 0.0, 0.5, 3.0, 40.0, 500.0, -1.0]))
        out.append(draw(_event(time)))
    return out


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(PROFILES)), _events())
def test_both_derivers_give_the_same_rows(profile: str, events: list[MetricEvent]) -> None:
    reference = Deriver(PROFILES[profile])
    ours = NativeDeriver(PROFILES[profile])
    for event in events:
        reference.feed(event)
        ours.feed(event)
        assert ours.state == reference.ctx.state
    assert list(ours.rows) == list(reference.rows)
    assert ours.notices() == reference.notices()


# --- generated files with odd records ----------------------------------------------------

_ODD_RECORDS = [
    # metrics as the stacks write them, and the variants the native decoder hands back
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cwnd":%C,"bytes_in_flight":%F,'
    b'"latest_rtt":%R,"smoothed_rtt":40.5,"rtt_variance":2.25}}',
    b'{"time":%T,"name":"quic:recovery_metrics_updated","data":{"congestion_window":%C,'
    b'"bytes_in_flight":%F,"ssthresh":18446744073709551615,"pto_count":%P}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cwnd":%C,"congestion_window":1}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cwnd":%C,"cwnd":2400}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cwnd":"%C"}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cwnd":true}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"pto_count":1.5}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"pto_count":-1}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cwnd":1e400}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cwnd":123456789012345678901234}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"c\\u0077nd":%C}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cwnd":%C,"app_limited":1}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cf_app_limited":"x",'
    b'"application_limited":false,"bytes_in_flight":%F}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cwnd":%C,"x":[1,{"y":[]},-0.5e-3]}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cwnd":%C,"x":"\\ud800"}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cwnd":%C,"x":"a\x01"}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cwnd":%C,}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cwnd":01}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":null}',
    b'{"time":%T,"name":"recovery:metrics_updated"}',
    b'{"time":%T,"name":"RECOVERY:METRICS_UPDATED","data":{"cwnd":%C}}',
    b'{"time":%T,"name":"recovery:metrics_updat\xc3\xa9d","data":{"cwnd":%C}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cwnd":%C}} x',
    b'{"time":%T,"name":"recovery:metrics_updated","time":1,"data":{"cwnd":%C}}',
    b'{"time":"%T","name":"recovery:metrics_updated","data":{"cwnd":%C}}',
    b'{"time":1e19,"name":"recovery:metrics_updated","data":{"cwnd":%C}}',
    b'{"name":"recovery:metrics_updated","data":{"cwnd":%C}}',
    b'{"time":%T,"name":5,"data":{"metric":1}}',
    b'{"time":%T,"category":"recovery","event":"metrics_updated","data":{"cwnd":%C}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"header":{"packet_number":7}}}',
    b'{"time":%T,"name":"recovery:spurious_loss","data":{}}',
    b'{"time":%T,"name":"quic:timer_updated","data":{"timer_type":"pto","event_type":"expired"}}',
    b'{"time":%T,"name":"quic:timer_updated","data":{"timer_type":"pto","event_type":"set"}}',
    b'{"time":%T,"name":"recovery:loss_timer_updated","data":{"event_type":"expired"}}',
    b'{"time":%T,"name":"recovery:congestion_state_updated","data":{"new":"recovery"}}',
    b'{"time":%T,"name":"transport:packet_sent","data":{"metric":"no"}}',
    b'{"time":%T,"name":"congestion_metric_update","data":{"current_cwnd":%C,"state":"Steady"}}',
    b'[%T,"recovery","metrics_updated",{"cwnd":%C}]',
    b'{"time":-%T,"name":"recovery:metrics_updated","data":{"cwnd":%C}}',
]


@st.composite
def _odd_file(draw: st.DrawFn) -> bytes:
    sep = draw(st.sampled_from([b"\x1e", b"\n"]))
    header = {
        "qlog_format": "JSON-SEQ" if sep == b"\x1e" else "NDJSON",
        "qlog_version": "0.3",
        "title": draw(st.sampled_from(["aioquic", "quic-go", "quinn", "x"])),
        "trace": {"vantage_point": {"type": "server"}, "common_fields": {}},
    }
    if draw(st.booleans()):
        header["trace"]["common_fields"]["time_format"] = draw(
            st.sampled_from(["relative", "delta"])
        )
    if draw(st.booleans()):  # draft-01 microseconds: times and RTTs scaled by 1/1000
        header["trace"]["configuration"] = {"time_units": "us"}
    records = [json.dumps(header).encode()]
    time = 0.0
    for _ in range(draw(st.integers(0, 30))):
        template = draw(st.sampled_from(_ODD_RECORDS))
        time += draw(st.sampled_from([0.0, 0.25, 7.0, -3.0]))
        record = (
            template.replace(b"%T", b"%.3f" % time)
            .replace(b"%C", b"%d" % draw(st.sampled_from([2400, 12000, 13200, 30000])))
            .replace(b"%F", b"%d" % draw(st.sampled_from([0, 1200, 12000])))
            .replace(b"%R", draw(st.sampled_from([b"0", b"35.25", b"40", b"1.5e1"])))
            .replace(b"%P", draw(st.sampled_from([b"0", b"1", b"2"])))
        )
        records.append(record)
    if sep == b"\x1e":
        return b"".join(b"\x1e" + r + b"\n" for r in records)
    return b"".join(r + b"\n" for r in records)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=_odd_file(), states=st.sampled_from(["derived", "hybrid"]))
def test_odd_records_read_the_same(tmp_path: Path, data: bytes, states: str) -> None:
    path = tmp_path / "odd.sqlog"
    path.write_bytes(data)
    for lenient in (False, True):
        assert differences(path, states=states, lenient=lenient) is None


# --- mutations of the real fixtures --------------------------------------------------------

SEEDS = seed_files()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.sampled_from(range(len(SEEDS))),
    rng_seed=st.integers(0, 2**32 - 1),
    kinds=st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=3, unique=True),
)
def test_mutated_real_files_read_the_same(
    tmp_path: Path, seed: int, rng_seed: int, kinds: list[str]
) -> None:
    _, data = SEEDS[seed]
    path = tmp_path / f"m{rng_seed}"
    path.write_bytes(mutate(data, random.Random(rng_seed), kinds=kinds))
    for lenient in (False, True):
        assert differences(path, states="derived", lenient=lenient) is None


# --- block boundaries ----------------------------------------------------------------------


def _derive_in_blocks(data: bytes, sizes: list[int]) -> list[list[Any]]:
    """Per trace: the number of events its deriver was fed, then its rows."""
    from quicsm.extract.streaming import StreamedStates
    from quicsm.qlog.seq import SeqScanner

    streamed = StreamedStates(sidecar={}, profile=None, hybrid=False)
    scanner = SeqScanner(want_metrics=True, metric_sink=streamed)
    pos, k = 0, 0
    while pos < len(data):
        size = sizes[k % len(sizes)]
        scanner.feed(bytearray(data[pos : pos + size]))  # the I/O side passes a bytearray
        pos, k = pos + size, k + 1
    traces = scanner.close()
    out = []
    for trace in traces:
        derivation = streamed.derivation(trace.index)
        assert derivation is not None
        deriver = streamed._traces[trace.index][0]
        fed = deriver._native.status()[0] if isinstance(deriver, NativeDeriver) else deriver._events
        out.append([fed, *derivation.states])
    return out


def _aioquic_head() -> bytes:
    """The first 250 kB of each of the first four traces of the shipped aioquic corpus."""
    from quicsm.qlog.blocks import DecompressedFile

    data = b"".join(DecompressedFile(ROOT / "traces" / "aioquic-1.7.2.qlog").blocks())
    starts = [data.rfind(b"\x1e", 0, data.find(b"_format", 0))]
    while len(starts) < 5:
        starts.append(data.rfind(b"\x1e", 0, data.find(b"_format", starts[-1] + 10)))
    parts = []
    for a, b in zip(starts, starts[1:], strict=False):
        parts.append(data[a : data.find(b"\x1e", min(a + 250_000, b - 1))])
    return b"".join(parts)


AIOQUIC_HEAD = _aioquic_head()


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(7, 1 << 18), min_size=1, max_size=5))
def test_native_rows_do_not_depend_on_block_boundaries(sizes: list[int]) -> None:
    with native(True):
        whole = _derive_in_blocks(AIOQUIC_HEAD, [len(AIOQUIC_HEAD)])
        assert len(whole) == 4 and sum(rows[0] for rows in whole) > 500  # events fed
        assert _derive_in_blocks(AIOQUIC_HEAD, sizes) == whole
    with native(False):
        assert _derive_in_blocks(AIOQUIC_HEAD, sizes) == whole


# --- numbers at the edges of the float range and of 64-bit integers ----------------------------

_EDGE_NUMBERS = [
    b"1e-400",
    b"1E+2",
    b"0e0",
    b"-0e-0",
    b"-0",
    b"-0.0",
    b"1.7976931348623157e308",
    b"1.7976931348623158e308",
    b"1.7976931348623159e308",
    b"4.9e-324",
    b"2.4e-324",
    b"2.5e-324",
    b"9007199254740993",
    b"9007199254740993.0",
    b"0.1",
    b"0.30000000000000004",
    b"123456789012345678901",
    b"1" + b"0" * 308,
    b"1" + b"0" * 309,
    b"1" + b"0" * 300 + b".5",
    b"18446744073709551615",
    b"18446744073709551616",
    b"-9223372036854775808",
    b"-9223372036854775809",
    b"1.5e1",
    b"100000000000000000000000.0",
    b"1234567890.123456789",
]
_EDGE_RECORDS = [
    b'{"time":1.0,"name":"recovery:metrics_updated","data":{"cwnd":%s,"bytes_in_flight":1200}}',
    b'{"time":1.0,"name":"recovery:metrics_updated","data":{"x":[%s],"cwnd":2400}}',
    b'{"time":%s,"name":"recovery:metrics_updated","data":{"cwnd":2400}}',
    b'{"time":1.0,"name":"recovery:metrics_updated","data":{"pto_count":%s,"latest_rtt":%s}}',
]


@pytest.mark.parametrize("number", _EDGE_NUMBERS)
def test_edge_numbers_read_the_same(tmp_path: Path, number: bytes) -> None:
    header = (
        b'\x1e{"qlog_format":"JSON-SEQ","qlog_version":"0.3","title":"aioquic",'
        b'"trace":{"vantage_point":{"type":"server"}}}\n'
    )
    first = b'\x1e{"time":0.5,"name":"recovery:metrics_updated","data":{"cwnd":12000}}\n'
    last = b'\x1e{"time":2.0,"name":"recovery:metrics_updated","data":{"cwnd":1200}}\n'
    path = tmp_path / "edge.sqlog"
    for template in _EDGE_RECORDS:
        record = template.replace(b"%s", number)
        path.write_bytes(header + first + b"\x1e" + record + b"\n" + last)
        for lenient in (False, True):
            assert differences(path, states="derived", lenient=lenient) is None
