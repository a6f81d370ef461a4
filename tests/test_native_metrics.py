"""``read_metrics`` through the native core (a recorder: the native decoder's events kept as
columns) against the Python reader: the same frame, the same diagnostics, the same errors, on
the committed traces, on odd records (triggers of every kind among them) and on mutations of
the real fixtures."""

from __future__ import annotations

import random
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_outcome import native
from test_native import _ODD_RECORDS, COMMITTED, ROOT

from quicsm.core.diagnostics import Diagnostics
from quicsm.core.errors import QuicsmError
from quicsm.extract.metric_columns import MetricColumns as _MetricColumns
from quicsm.extract.read import read_metrics
from quicsm.testing.mutate import MUTATIONS, mutate, seed_files

#: metric and loss records with triggers of every kind the decoders must agree on
_TRIGGER_RECORDS = [
    b'{"time":%T,"name":"recovery:packet_lost","data":{"trigger":"time_threshold"}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"trigger":"reordering_threshold",'
    b'"header":{"packet_number":3}}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"trigger":5}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"trigger":null}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"trigger":"a\\"b"}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"trigger":"x","trigger":"y"}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"trigger":"\xc3\xa9t\xc3\xa9"}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"trigger":["x"]}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cwnd":%C,"trigger":"ack"}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"cwnd":%C,"trigger":{"a":1}}}',
    b'{"time":%T,"name":"recovery:spurious_loss","data":{"trigger":"x"}}',
    b'{"time":%T,"name":"quic:timer_updated","data":{"timer_type":"pto","event_type":"expired",'
    b'"trigger":"x"}}',
    b'{"time":%T,"name":"recovery:metrics_updated","data":{"bytes_in_flight":%F,"pto_count":%P,'
    b'"latest_rtt":%R,"min_rtt":%R,"smoothed_rtt":%R,"pacing_rate":1e6,"ssthresh":%C}}',
]


def _outcome(path: Path, *, on: bool, lenient: bool) -> tuple[Any, ...]:
    diag = Diagnostics()
    with native(on), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            frame = read_metrics(path, on_error="skip" if lenient else "raise", diagnostics=diag)
        except QuicsmError as error:
            return ("error", type(error).__name__, str(error))
    return ("rows", frame, diag)


def _same(path: Path, *, lenient: bool) -> None:
    ours = _outcome(path, on=True, lenient=lenient)
    reference = _outcome(path, on=False, lenient=lenient)
    assert ours[0] == reference[0], (ours, reference)
    if ours[0] == "error":
        assert ours == reference
        return
    assert ours[1].equals(reference[1]), (ours[1], reference[1])
    assert ours[2] == reference[2]


def test_read_metrics_records_natively(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the native core the events reach the recorder, not the Python columns."""
    python_events: list[object] = []
    call = _MetricColumns.__call__

    def counting(self: _MetricColumns, event: Any) -> None:
        python_events.append(event)
        call(self, event)

    monkeypatch.setattr(_MetricColumns, "__call__", counting)
    with native(True):
        frame = read_metrics(ROOT / "traces" / "quic-go-v0.65.0.qlog")
    assert frame.height > 80_000
    assert len(python_events) < frame.height / 100  # only records handed back to Python


SMALL = [p for p in COMMITTED if p.stat().st_size < (6 << 20)]


@pytest.mark.slow
@pytest.mark.parametrize("path", SMALL, ids=[str(p.relative_to(ROOT)) for p in SMALL])
def test_committed_traces_give_the_same_metrics(path: Path) -> None:
    _same(path, lenient=False)


def test_shipped_traces_give_the_same_metrics() -> None:
    """The fast tier's share of the check above: a JSON-SEQ corpus and the contained fixtures."""
    for path in [
        ROOT / "traces" / "quic-go-v0.48.2.qlog",
        *(ROOT / "tests/fixtures/qlog").glob("*"),
    ]:
        if path.is_file():
            _same(path, lenient=False)
            _same(path, lenient=True)


@st.composite
def _odd_file(draw: st.DrawFn) -> bytes:
    sep = draw(st.sampled_from([b"\x1e", b"\n"]))
    records = [
        b'{"qlog_format":"%s","qlog_version":"0.3","title":"x","trace":{"vantage_point":'
        b'{"type":"server"},"common_fields":{%s}}}'
        % (
            b"JSON-SEQ" if sep == b"\x1e" else b"NDJSON",
            draw(st.sampled_from([b"", b'"time_format":"delta"'])),
        )
    ]
    time = 0.0
    for _ in range(draw(st.integers(0, 40))):
        template = draw(st.sampled_from(_TRIGGER_RECORDS + _ODD_RECORDS))
        time += draw(st.sampled_from([0.0, 0.25, 7.0, -3.0]))
        records.append(
            template.replace(b"%T", b"%.3f" % time)
            .replace(b"%C", b"%d" % draw(st.sampled_from([2400, 12000, 30000])))
            .replace(b"%F", b"%d" % draw(st.sampled_from([0, 1200])))
            .replace(b"%R", draw(st.sampled_from([b"0", b"35.25", b"1.5e1"])))
            .replace(b"%P", draw(st.sampled_from([b"0", b"2"])))
        )
    if sep == b"\x1e":
        return b"".join(b"\x1e" + r + b"\n" for r in records)
    return b"".join(r + b"\n" for r in records)


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=_odd_file())
def test_odd_records_give_the_same_metrics(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "odd.sqlog"
    path.write_bytes(data)
    for lenient in (False, True):
        _same(path, lenient=lenient)


SEEDS = seed_files()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.sampled_from(range(len(SEEDS))),
    rng_seed=st.integers(0, 2**32 - 1),
    kinds=st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=3, unique=True),
)
def test_mutated_real_files_give_the_same_metrics(
    tmp_path: Path, seed: int, rng_seed: int, kinds: list[str]
) -> None:
    _, data = SEEDS[seed]
    path = tmp_path / f"m{rng_seed}"
    path.write_bytes(mutate(data, random.Random(rng_seed), kinds=kinds))
    for lenient in (False, True):
        _same(path, lenient=lenient)


def test_the_recorder_holds_at_most_a_block() -> None:
    """A long trace's events leave the recorder every block of events (the frame parts hold
    them compactly): the recorder never holds more than a block of events plus those of one
    region of the file (at most one event per 64 bytes of a block read)."""
    from quicsm.extract import metric_columns as read_module
    from quicsm.qlog.blocks import BLOCK_SIZE

    held: list[int] = []
    flush = _MetricColumns._flush

    def watching(self: _MetricColumns) -> None:
        if self.native_deriver is not None:
            held.append(self.native_deriver.recorded())
        flush(self)

    block = 4096
    with pytest.MonkeyPatch.context() as m, native(True):
        m.setattr(_MetricColumns, "_flush", watching)
        m.setattr(read_module, "METRIC_BLOCK", block)
        frame = read_metrics(ROOT / "traces" / "aioquic-1.7.2.qlog")
        m.undo()
        assert frame.equals(read_metrics(ROOT / "traces" / "aioquic-1.7.2.qlog"))
    assert max(held) < block + BLOCK_SIZE // 64
    assert len(held) > frame.height / (block + BLOCK_SIZE // 64)
