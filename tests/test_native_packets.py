"""The native core's packet reader (``native/src/packets.rs``) against the Python reference
(``quicsm.extract.wire.packet_of`` and ``PacketColumns.packet``, run with ``QUICSM_NATIVE=0``):
the same columns, timelines, diagnostics and errors on every shipped trace and on generated
records, hostile ones included."""

from __future__ import annotations

import random
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_outcome import native
from test_native import ROOT

from quicsm.core.diagnostics import Diagnostics
from quicsm.core.errors import QuicsmError
from quicsm.extract.loading import trace_id
from quicsm.extract.packets import PacketColumns, read_packet_timelines
from quicsm.qlog.source import read_qlog
from quicsm.qlog.trace import TraceBuilder
from quicsm.testing.mutate import MUTATIONS, mutate, seed_files

SHIPPED = sorted(p for p in (ROOT / "traces").rglob("*.qlog") if p.is_file())
#: the fixtures: contained JSON of several producers (and versions), NDJSON, JSON-SEQ
FIXTURES = sorted(p for p in (ROOT / "tests" / "fixtures" / "qlog").iterdir() if p.is_file())
#: every trace id a test file may hold
IDS = range(400)


def _columns(path: Path, *, on: bool, lenient: bool) -> tuple[Any, ...]:
    """Every trace's :class:`PacketColumns` as plain values, or the error."""
    kept: dict[int, PacketColumns] = {}

    def sink(builder: TraceBuilder) -> PacketColumns:
        columns = kept[builder.index] = PacketColumns()
        builder.packet_hook = columns.packet
        builder.loss_hook = columns.loss
        builder.parameters_hook = columns.parameters
        builder.packet_columns = columns
        return columns

    with native(on), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            read = read_qlog(path, lenient=lenient, metric_sink=sink)
        except QuicsmError as error:
            return ("error", type(error).__name__, str(error))
    values = {
        i: (
            c.times,
            c.numbers,
            c.flags,
            c.ack_of,
            c.ack_lo,
            c.ack_hi,
            c.bytes,
            c.first_scid,
            c.lost_times,
            c.lost_numbers,
            c.lost_triggers,
            c.trigger_names,
            c.streams.stream_rows,
            c.streams.acks,
            c.streams.limits,
            c.streams.blocked,
            c.streams.losses,
            c.streams.parameters,
        )
        for i, c in kept.items()
    }
    traces = [
        (
            t.index,
            t.n_events,
            t.first_time,
            t.last_time,
            t.last_derive_time,
            t.event_counts,
            t.repaired,
        )
        for t in read.traces
    ]
    return ("columns", values, traces, read.skipped, [str(p) for p in read.problems])


def _timelines(path: Path, *, on: bool, lenient: bool) -> tuple[Any, ...]:
    diag = Diagnostics()
    ids = [trace_id(str(path), i) for i in IDS]
    with native(on), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = read_packet_timelines(
                path, ids, on_error="skip" if lenient else "raise", diagnostics=diag
            )
        except QuicsmError as error:
            return ("error", type(error).__name__, str(error))
    return ("timelines", out, diag.notes)


def _same(path: Path, *, lenient: bool, timelines: bool = True) -> None:
    ours = _columns(path, on=True, lenient=lenient)
    reference = _columns(path, on=False, lenient=lenient)
    assert ours == reference
    if timelines:
        assert _timelines(path, on=True, lenient=lenient) == _timelines(
            path, on=False, lenient=lenient
        )


def test_packets_are_read_natively(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the native core the packet events reach the columns without ``packet_of``, and
    the loss events without ``lost_packet_of``; only the records it hands back (here:
    ``parameters_set``) are decoded in Python."""
    calls: list[object] = []
    losses: list[object] = []
    python, loss = PacketColumns.packet, PacketColumns.absorb_losses

    def counting(self: PacketColumns, *args: Any) -> None:
        calls.append(args)
        python(self, *args)

    def counting_losses(self: PacketColumns, times: bytes, *args: Any) -> None:
        losses.append(len(times) // 8)
        loss(self, times, *args)

    monkeypatch.setattr(PacketColumns, "packet", counting)
    monkeypatch.setattr(PacketColumns, "absorb_losses", counting_losses)
    path = ROOT / "traces" / "quic-go-v0.48.2.qlog"
    traces = [trace_id(str(path), i) for i in range(10)]
    with native(True):
        out = read_packet_timelines(path, traces)
    assert len(out[traces[0]].sent[0]) > 1000
    assert calls == []
    native_lost = [len(t.lost) for t in out.values()]
    assert sum(losses) == sum(native_lost) > 100  # every loss of these traces read natively
    with native(False):
        python_out = read_packet_timelines(path, traces)
    assert len(calls) > 1000
    assert [len(t.lost) for t in python_out.values()] == native_lost


def test_the_chunks_read_natively_are_appended_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """The native core stops at each record it hands back (here every ``packet_lost`` of these
    traces: it is asked not to read them), and the chunks it read in between are held back and
    appended to the columns together: far fewer appends than chunks, never more than
    ``_PENDING_CHUNKS`` held at a time (what they hold is checked against the Python reader by
    the tests around)."""
    from quicsm.core import native as core
    from quicsm.extract import packets

    ext = core.module()
    assert ext is not None
    read_losses = ext.packet_records

    def without_losses(*args: Any) -> Any:
        return read_losses(*args[:6], False, args[7])

    monkeypatch.setattr(ext, "packet_records", without_losses)

    chunks: list[int] = []
    appends: list[int] = []
    absorb, take = PacketColumns.absorb, PacketColumns._take

    def counting_absorb(self: PacketColumns, *args: Any) -> None:
        absorb(self, *args)
        chunks.append(len(self._pending))

    def counting_take(self: PacketColumns, columns: Any) -> None:
        appends.append(1)
        take(self, columns)

    monkeypatch.setattr(PacketColumns, "absorb", counting_absorb)
    monkeypatch.setattr(PacketColumns, "_take", counting_take)
    path = ROOT / "traces" / "quic-go-v0.65.0.qlog"
    with native(True):
        out = read_packet_timelines(path, [trace_id(str(path), i) for i in range(20)])
    assert len(out) == 20
    assert len(chunks) > 200 and 5 * len(appends) < len(chunks), (len(chunks), len(appends))
    assert max(chunks) < packets._PENDING_CHUNKS


@pytest.mark.slow
@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(ROOT)) for p in SHIPPED])
def test_shipped_traces_give_the_same_packets(path: Path) -> None:
    _same(path, lenient=False)


def test_a_shipped_file_gives_the_same_packets() -> None:
    """The fast tier's share of the check above."""
    _same(ROOT / "traces" / "quic-go-v0.48.2.qlog", lenient=True, timelines=False)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_fixtures_give_the_same_packets(path: Path) -> None:
    for lenient in (False, True):
        _same(path, lenient=lenient)


#: packet records as stacks write them, and the variants the native reader hands back (or
#: must read exactly as Python does): %T time, %N packet number, %S a size, %R ACK ranges
_RECORDS = [
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet_type":"1RTT",'
    b'"packet_number":%N,"dcid":"aa"},"raw":{"length":%S},"frames":[{"frame_type":"stream",'
    b'"stream_id":0,"offset":%O,"length":%S,"fin":false}]}}',
    b'{"time":%T,"name":"transport:packet_received","data":{"header":{"packet_type":"1RTT",'
    b'"packet_number":%N,"dcid":"bb","scid":"aa"},"raw":{"length":40},"frames":[{"frame_type":'
    b'"ack","ack_delay":0.5,"acked_ranges":%R}]}}',
    b'{"data":{"frames":[{"ack_delay":2.0,"acked_ranges":%R,"frame_type":"ack"},{"frame_type":'
    b'"max_data","maximum":%O},{"frame_type":"max_stream_data","stream_id":0,"maximum":%O}],'
    b'"header":{"packet_number":%N,"packet_type":"1RTT","scid":"bb","dcid":"aa"},'
    b'"raw":{"length":%S}},"name":"transport:packet_received","time":%T}',
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet_type":"initial",'
    b'"packet_number":%N,"scid":"aa","dcid":"bb"},"frames":[{"frame_type":"crypto","offset":0,'
    b'"length":90},{"frame_type":"padding"}]}}',
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet_type":"handshake",'
    b'"packet_number":%N},"raw":{"length":0},"frames":[{"frame_type":"ACK","acked_ranges":%R}]}}',
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet_type":"1RTT",'
    b'"packet_number":%N},"frames":[{"frame_type":"data_blocked","limit":%O},{"frame_type":'
    b'"stream_data_blocked","stream_id":4,"limit":%O},{"frame_type":"Stream","stream_id":4,'
    b'"raw":{"payload_length":%S}}]}}',
    b'{"time":%T,"name":"packet_sent","data":{"packet_type":"1RTT","packet_number":%N,'
    b'"packet_size":%S,"frames":[]}}',
    b'{"time":%T,"name":"transport:PACKET_SENT","data":{"header":{"packet_number":%N,'
    b'"length":%S,"type":"Handshake"}}}',
    b'{"time":%T,"name":"transport:packet_received","data":{"type":"1RTT","length":%S,'
    b'"header":{"packet_number":%N,"payload_length":%S}}}',
    # hostile or unusual: the native reader hands these back, Python decides
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet_number":-1}}}',
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet_number":'
    b"4611686018427387904}}}",
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet_number":"%N"}}}',
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet_number":%N.0}}}',
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet_number":null}}}',
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet_number":%N,'
    b'"packet_number":%N}}}',
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet\\u005fnumber":%N}}}',
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet_number":%N,'
    b'"dcid":"\\u0061a"},"frames":[{"frame_type":"ack","acked_ranges":[[%N,-1]]}]}}',
    b'{"time":%T,"name":"transport:packet_received","data":{"header":{"packet_number":%N},'
    b'"frames":[{"frame_type":"ack","acked_ranges":[[]]},5,{"frame_type":null}]}}',
    b'{"time":%T,"name":"transport:packet_received","data":{"header":{"packet_number":%N},'
    b'"frames":[{"frame_type":"ack","frame_type.ack.largest_acknowledged":9,'
    b'"frame_type.ack.fab":2}]}}',
    b'{"time":%T,"name":"transport:packet_received","data":{"header":{"packet_number":%N},'
    b'"frames":[{"frame_type":"ack","ranges":[[1,%N]],"ack_ranges":[%N]}]}}',
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet_number":%N,'
    b'"packet_type":"1RTT"},"frames":[{"frame_type":"stream","stream_id":"0","offset":1.0,'
    b'"length":true}]}}',
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet_number":%N},'
    b'"raw":[1],"frames":{"a":1}}}',
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet_number":%N,'
    b'"packet_type":"\xc3\xa9"}}}',
    b'{"time":%T,"name":"transport:packet_sent","data":5}',
    b'{"time":%T,"name":"transport:packet_sent"}',
    b'{"time":"%T","name":"transport:packet_sent","data":{}}',
    b'{"time":%T,"name":"transport:packet_tx","data":{"header":{"packet_number":%N}}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"header":{"packet_type":"1RTT",'
    b'"packet_number":%N},"trigger":"time_threshold"}}',
    # loss events as producers write them (read natively) and as they should not (handed back)
    b'{"time":%T,"name":"recovery:packet_lost","data":{"header":{"packet_type":"1RTT",'
    b'"packet_number":%N},"trigger":"reordering_threshold"}}',
    b'{"name":"recovery:packet_lost","data":{"trigger":"pto_expired","header":{"packet_number":'
    b'%N,"packet_type":"handshake"}},"time":%T}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"header":{"packet_number":%N}}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"type":"1RTT","packet_number":%N,'
    b'"trigger":"time_threshold"}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"packet_type":"initial","type":"1RTT",'
    b'"packet_number":%N}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"packet_number_space":"application_data",'
    b'"packet_number":%N,"trigger":"\xc3\xa9t\xc3\xa9"}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"header":{"packet_type":"INITIAL"},'
    b'"packet_number":%N}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{}}',
    b'{"time":%T,"name":"loss:packet_lost","data":{"header":{"packet_type":"1RTT",'
    b'"packet_number":%N},"trigger":"time_threshold","frames":[{"frame_type":"stream"}]}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"header":{"packet_number":%N},'
    b'"trigger":"time\\u005fthreshold"}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"header":{"packet_number":%N},'
    b'"trigger":null}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"header":{"packet_number":%N},"trigger":7}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"header":{"packet_number":%N},'
    b'"trigger":"a","trigger":"b"}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"header":"1RTT","packet_number":%N}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"header":{"packet_number":'
    b"4611686018427387904}}}",
    b'{"time":%T,"name":"recovery:packet_lost","data":{"header":{"packet_number":%N.5}}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":[%N]}',
    b'{"time":%T,"name":"recovery:Packet_Lost","data":{"header":{"packet_number":%N}}}',
    b'{"time":%T,"name":"recovery:packet_lost","data":{"header":{"packet_number":%N}}} x',
    b'{"time":%T,"name":"transport:parameters_set","data":{"owner":"remote",'
    b'"initial_max_data":%O,"initial_max_stream_data_bidi_remote":%O}}',
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet_number":%N}',
    b'{"time":%T,"name":"transport:packet_sent","data":{"header":{"packet_number":%N}}} x',
    b'{"time":%T,"name":"transport:packet_sent","data":{"frames":['
    + b"[" * 300
    + b"]" * 300
    + b"]}}",
]


@st.composite
def _packet_file(draw: st.DrawFn) -> bytes:
    sep = draw(st.sampled_from([b"\x1e", b"\n"]))
    records = [
        b'{"qlog_format":"%s","qlog_version":"0.3","title":"x","trace":{"vantage_point":'
        b'{"type":"server"},"common_fields":{%s}}}'
        % (
            b"JSON-SEQ" if sep == b"\x1e" else b"NDJSON",
            draw(st.sampled_from([b"", b'"time_format":"delta"', b'"time_units":"us"'])),
        )
    ]
    time = 0.0
    number = 0
    for _ in range(draw(st.integers(0, 40))):
        template = draw(st.sampled_from(_RECORDS))
        time += draw(st.sampled_from([0.0, 0.25, 7.0, -3.0]))
        number += draw(st.sampled_from([0, 1, 3]))
        low = max(0, number - draw(st.integers(0, 5)))
        ranges = draw(
            st.sampled_from(
                [b"[[%d,%d]]" % (low, number), b"[[%d]]" % number, b"[%d,[0,2,%d]]" % (number, low)]
            )
        )
        records.append(
            template.replace(b"%T", b"%.3f" % time)
            .replace(b"%N", b"%d" % number)
            .replace(b"%S", draw(st.sampled_from([b"1252", b"0", b"40"])))
            .replace(b"%O", b"%d" % draw(st.sampled_from([0, 1200, 65536])))
            .replace(b"%R", ranges)
        )
    if draw(st.booleans()):  # a second trace in the file
        records += records[:]
    if draw(st.booleans()):  # contained JSON: the same events in one document
        header, *events = records
        return (
            b'{"qlog_version":"0.3","title":"x","traces":[{"vantage_point":{"type":"server"},'
            b'"common_fields":{%s},"events":[%s]}]}'
            % (
                draw(st.sampled_from([b"", b'"time_units":"us"', b'"time_format":"delta"'])),
                b",\n".join(e for e in events if e != header),
            )
        )
    if sep == b"\x1e":
        return b"".join(b"\x1e" + r + b"\n" for r in records)
    return b"".join(r + b"\n" for r in records)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=_packet_file())
def test_generated_packet_records_give_the_same_packets(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "packets.sqlog"
    path.write_bytes(data)
    for lenient in (False, True):
        _same(path, lenient=lenient)


SEEDS = seed_files()


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.sampled_from(range(len(SEEDS))),
    rng_seed=st.integers(0, 2**32 - 1),
    kinds=st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=3, unique=True),
)
def test_mutated_real_files_give_the_same_packets(
    tmp_path: Path, seed: int, rng_seed: int, kinds: list[str]
) -> None:
    _, data = SEEDS[seed]
    path = tmp_path / f"m{rng_seed}"
    path.write_bytes(mutate(data, random.Random(rng_seed), kinds=kinds))
    for lenient in (False, True):
        _same(path, lenient=lenient, timelines=False)


@pytest.mark.parametrize(
    "path",
    [p for p in FIXTURES if p.name.startswith(("aioquic", "quicgo_0.3", "packed", "quiche_quic"))],
    ids=lambda p: p.name,
)
def test_timelines_without_byte_offsets_are_the_same_less_that_view(path: Path) -> None:
    """Read for the connection account (``byte_offsets=False``: the ACK ranges are not kept as
    rows of the byte-offset view), every trace's timeline is the one read for the plot without
    its byte-offset view; columns kept so refuse to make that view."""
    import dataclasses

    ids = [trace_id(str(path), i) for i in IDS]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = read_packet_timelines(path, ids, on_error="skip")
        lean = read_packet_timelines(path, ids, on_error="skip", byte_offsets=False)
    assert full
    assert lean == {t: dataclasses.replace(tl, streams=None) for t, tl in full.items()}
    columns = PacketColumns(byte_offsets=False)
    with pytest.raises(ValueError, match="without their byte-offset view"):
        columns.timeline(0.0)
