"""States from the wire (quicsm.extract.wire), capabilities from content, and the readers'
use of both: packet-only traces (qlog 0.1 captures) and quic-go's 2020 traces that log no probe
timeout.

The traces here are synthetic, written by this file in the shapes of those producers (qlog 0.1
as pcap2qlog wrote it; quic-go's draft-02-wip JSON with ``event_fields``): a sender that slow
starts, loses one packet, recovers, grows in congestion avoidance, becomes application-limited
and finally sends probe pairs without any ACK, backing off exponentially.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.core.diagnostics import Diagnostics, QuicsmWarning, RecordProblem
from quicsm.core.errors import QlogError
from quicsm.extract.capabilities import derivations, from_events, render
from quicsm.extract.read import read_metrics, read_traces, read_transitions
from quicsm.extract.wire import (
    PACKET_NUMBER_EXPECTED,
    Packet,
    packet_of,
    read_packets,
    wire_states,
)

RTT = 40.0
MSS = 1200


def _sender(*, probes: bool = True) -> list[tuple[float, str, dict[str, Any]]]:
    """``(time_ms, "sent"|"received", data)`` of a server's bulk transfer, as described in
    the module docstring (packet 60 is lost)."""
    events: list[tuple[float, str, dict[str, Any]]] = []
    pn = 0
    t = 0.0
    acks: list[tuple[float, int]] = []  # (arrival time, packet acknowledged)

    def send(time: float, size: int = MSS) -> int:
        nonlocal pn
        n = pn
        pn += 1
        events.append(
            (
                time,
                "sent",
                {
                    "header": {"packet_type": "1RTT", "packet_number": n},
                    "raw": {"length": size},
                    "frames": [{"frame_type": "stream", "length": size - 30}],
                },
            )
        )
        if n != 60:
            acks.append((time + RTT, n))
        return n

    # slow start: a window of 10, doubling each round, then congestion avoidance after the
    # loss, one more packet per round
    window = 10
    for round_ in range(12):
        for i in range(window):
            send(t + i * 0.2)
        t += RTT
        window = window * 2 if round_ < 3 else (window // 2 if round_ == 3 else window + 1)
    # application-limited: two packets per round trip, the window nearly empty
    for _ in range(8):
        send(t)
        send(t + 0.1)
        t += RTT * 2
    last_ack_time = max(a for a, _ in acks)
    # the ACKs, one per packet, each carrying every packet acknowledged so far
    acked: list[int] = []
    for ack_pn, (arrival, n) in enumerate(sorted(acks)):
        acked.append(n)
        ranges = _ranges(sorted(acked))
        events.append(
            (
                arrival,
                "received",
                {
                    "header": {"packet_type": "1RTT", "packet_number": ack_pn},
                    "frames": [{"frame_type": "ack", "ack_delay": 0.0, "acked_ranges": ranges}],
                },
            )
        )
    if probes:
        # after the last ACK: unacknowledged probe pairs, backing off (quic-go 2020)
        t = last_ack_time + 1.0
        send(t)  # new data, never acknowledged
        gap = 108.0
        for _ in range(6):
            t += gap
            send(t)
            send(t + 0.05)
            gap *= 2
    events.sort(key=lambda e: e[0])
    return events


def _ranges(numbers: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for n in numbers:
        if out and out[-1][1] == n - 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return out[::-1]


def _qlog01(events: list[tuple[float, str, dict[str, Any]]]) -> bytes:
    """A qlog 0.1 document (pcap2qlog's shape): top-level fields and array events."""
    rows: list[Any] = [
        [t, "TRANSPORT", "PACKET_SENT" if d == "sent" else "PACKET_RECEIVED", "LINE", data]
        for t, d, data in events
    ]
    rows.append([])
    return orjson.dumps(
        {
            "qlog_version": "0.1",
            "vantagepoint": "SERVER",
            "fields": ["time", "category", "type", "trigger", "data"],
            "events": rows,
        }
    )


def _quic_go_2020(events: list[tuple[float, str, dict[str, Any]]]) -> bytes:
    """A quic-go draft-02-wip trace (2020's shape): event_fields, metrics after each ACK,
    no PTO, timer or loss-timer event."""
    rows: list[Any] = []
    in_flight = 0
    outstanding: set[int] = set()
    for t, d, data in events:
        name = "packet_sent" if d == "sent" else "packet_received"
        rows.append([t, "transport", name, data])
        if d == "sent":
            outstanding.add(data["header"]["packet_number"])
            in_flight += MSS
            continue
        ranges = data["frames"][0]["acked_ranges"]
        before = len(outstanding)
        outstanding -= {n for lo, hi in ranges for n in range(lo, hi + 1)}
        in_flight -= (before - len(outstanding)) * MSS
        rows.append(
            [
                t,
                "recovery",
                "metrics_updated",
                {"bytes_in_flight": in_flight, "cwnd": 32 * MSS, "latest_rtt": RTT},
            ]
        )
    trace = {
        "vantage_point": {"type": "server"},
        "title": "quic-go",
        "event_fields": ["relative_time", "category", "event", "data"],
        "events": rows,
    }
    return orjson.dumps({"qlog_version": "draft-02-wip", "title": "quic-go", "traces": [trace]})


def _packets(events: list[tuple[float, str, dict[str, Any]]]) -> list[Packet]:
    out = []
    for t, d, data in events:
        p = packet_of(t, "packet_sent" if d == "sent" else "packet_received", data, 1.0)
        assert p is not None
        out.append(p)
    return out


def _read_quietly(path: Path, **options: object) -> tuple[pl.DataFrame, Diagnostics]:
    """``read_transitions`` with its warnings silenced, and what it reported."""
    diag = Diagnostics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        frame = read_transitions(path, diagnostics=diag, **options)  # type: ignore[arg-type]
    return frame, diag


def test_wire_states_follow_the_sender() -> None:
    result = wire_states(_packets(_sender()))
    states = [s for _, s, _ in result.rows]
    assert result.own_sends and result.losses >= 1 and result.probes >= 6
    assert states[0] == "SlowStart"
    order = [states.index(s) for s in ("SlowStart", "Recovery", "CongestionAvoidance")]
    assert order == sorted(order)
    assert "ApplicationLimited" in states[order[-1] :]
    tail = [s for _, s, _ in result.rows if s in ("TailLossProbe", "RetransmissionTimeout")]
    assert tail[0] == "TailLossProbe" and set(tail[1:]) == {"RetransmissionTimeout"}


def test_without_probes_the_trace_ends_application_limited() -> None:
    result = wire_states(_packets(_sender(probes=False)))
    assert result.rows[-1][1] == "ApplicationLimited" and result.probes == 0


def test_a_clients_log_infers_the_servers_sender() -> None:
    """The same packets seen from the receiver: the data arrives, the ACKs leave."""
    flipped = [
        Packet(p.time, not p.sent, p.space, p.number, p.size, p.acks, p.ack_delay_ms, p.eliciting)
        for p in _packets(_sender(probes=False))
    ]
    result = wire_states(flipped)
    assert not result.own_sends
    assert {"SlowStart", "Recovery", "CongestionAvoidance"} <= {s for _, s, _ in result.rows}


def test_a_qlog_01_capture_gives_states_from_its_packets(tmp_path: Path) -> None:
    path = tmp_path / "capture.qlog"
    path.write_bytes(_qlog01(_sender()))
    frame, diag = _read_quietly(path)
    states = frame["state"].to_list()
    assert states[0] == "Init" and len(states) > 4
    assert {"SlowStart", "Recovery", "TailLossProbe", "RetransmissionTimeout"} <= set(states)
    assert set(frame["trigger"].drop_nulls().to_list()) <= {
        "wire:probe_after_silence",
        "wire:loss",
        "wire:recovery",
        "wire:not_cwnd_limited",
        "wire:slow_start",
        "wire:congestion_avoidance",
    }
    assert any("states derived from its packets and ACK frames alone" in n for n in diag.notes)
    # an unknown producer's packets: the estimate derives every state (a cap from a flight that
    # stays flat), so nothing is said to be underivable
    assert diag.derivation == []
    assert read_packets(path).packets[0][0].sent


@pytest.mark.parametrize("mode", ["hybrid", "derived"])
def test_quic_go_2020_probe_backoff_is_derived(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "server.qlog"
    path.write_bytes(_quic_go_2020(_sender()))
    frame, diag = _read_quietly(path, states=mode)
    states = frame["state"].to_list()
    assert states[-2:] == ["TailLossProbe", "RetransmissionTimeout"], states
    assert any("logs no probe timeout although quic-go traces usually do" in n for n in diag.notes)
    # without the probes the trace ends as its metrics left it, with no note
    quiet = tmp_path / "quiet" / "server.qlog"
    quiet.parent.mkdir()
    quiet.write_bytes(_quic_go_2020(_sender(probes=False)))
    frame, diag = _read_quietly(quiet, states=mode)
    assert "TailLossProbe" not in frame["state"].to_list()
    assert not any("probe timeout" in n for n in diag.notes)


def test_capabilities_name_what_is_logged() -> None:
    caps = from_events([], packets=10, ack_frames=4)
    assert render(caps) == "packets, ack_frames"
    assert derivations(caps) == ["all states from packets and ACK frames (the wire derivation)"]
    assert derivations(frozenset()) == []


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0, 1e4, allow_nan=False),
            st.booleans(),
            st.sampled_from(["initial", "handshake", "application"]),
            st.integers(0, 50),
            st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), max_size=3),
            st.booleans(),
        ),
        max_size=80,
    )
)
def test_any_packets_give_rows_in_time_order(raw: list[Any]) -> None:
    packets = [
        Packet(t, sent, space, n, MSS, tuple((min(a, b), max(a, b)) for a, b in acks), 0.0, e)
        for t, sent, space, n, acks, e in raw
    ]
    result = wire_states(packets)
    times = [r[0] for r in result.rows]
    assert times == sorted(times)
    assert all(a[1] != b[1] for a, b in zip(result.rows, result.rows[1:], strict=False))


def _agreement(paths: list[str]) -> float:
    import sys

    bench = str(Path(__file__).resolve().parent.parent / "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    from wire_accuracy import load

    from quicsm.stats.agreement import overall_agreement

    return overall_agreement(load(paths))


FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_packet_only_derivation_agrees_with_logged_states_on_the_real_fixtures() -> None:
    """The wire derivation against the states instrumented quic-go and aioquic logged (every
    event but the packets set aside); docs/derive.md has the whole corpus."""
    assert _agreement([str(FIXTURES / "real")]) >= 0.85


@pytest.mark.slow
def test_packet_only_derivation_agrees_with_stock_quic_go() -> None:
    assert _agreement([str(FIXTURES / "stock" / "quic-go-v0.54.0.qlog")]) >= 0.85


def test_inspect_shows_what_each_trace_logs(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from quicsm.cli import main
    from quicsm.extract.capabilities import file_capabilities

    capture = tmp_path / "capture.qlog"
    capture.write_bytes(_qlog01(_sender()))
    old = tmp_path / "old" / "server.qlog"
    old.parent.mkdir()
    old.write_bytes(_quic_go_2020(_sender()))
    (found,) = file_capabilities(capture)
    assert render(found.capabilities) == "packets, ack_frames" and not found.missing_pto
    (found,) = file_capabilities(old)
    assert found.profile == "quic-go" and found.missing_pto
    assert render(found.capabilities) == (
        "metrics, cwnd, bytes_in_flight, rtt, packets, ack_frames"
    )
    result = CliRunner().invoke(main, ["inspect", str(old)])
    assert result.exit_code == 0, result.output
    assert "  #0 [quic-go]: metrics, cwnd, bytes_in_flight, rtt, packets, ack_frames" in (
        result.output
    )
    assert "! no probe timeout is logged although quic-go traces usually log them" in (
        result.output
    )


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "header",
                    "frames",
                    "frame_type",
                    "acked_ranges",
                    "ack_delay",
                    "packet_number",
                    "packet_type",
                    "raw",
                    "length",
                    "packet_size",
                    "type",
                    "ranges",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(_JSON, st.sampled_from(["packet_sent", "packet_received", "packet_rx"]))
def test_any_packet_data_gives_a_packet_or_none(data: Any, short: str) -> None:
    try:
        packet = packet_of(1.0, short, data, 1.0)
    except RecordProblem as problem:  # a packet number outside 0..2^62-1
        assert problem.expected.startswith(PACKET_NUMBER_EXPECTED), problem.expected
        return
    if packet is not None:
        wire_states([packet, packet])


def test_a_hostile_ack_range_costs_no_more_than_the_packets_in_flight() -> None:
    packets = [Packet(float(i), True, "application", i, MSS) for i in range(50)]
    packets.append(Packet(60.0, False, "application", 0, 50, ((0, 10**15),), 0.0, False))
    result = wire_states(packets)
    assert result.acks == 1 and result.rows[-1][1] in ("SlowStart", "ApplicationLimited")


def _draft01(events: list[tuple[float, str, dict[str, Any]]]) -> bytes:
    """A pcap2qlog draft-01 export (its shape written here by hand): array events with a
    trigger column, packet numbers and ACK ranges as strings, sizes in the header."""
    rows: list[Any] = []
    for t, d, data in events:
        header = {
            "packet_number": str(data["header"]["packet_number"]),
            "packet_size": data.get("raw", {}).get("length", 60),
        }
        frames = [
            {**f, "acked_ranges": [[str(a), str(b)] for a, b in f["acked_ranges"]]}
            if f.get("frame_type") == "ack"
            else f
            for f in data["frames"]
        ]
        name = "packet_sent" if d == "sent" else "packet_received"
        rows.append(
            [
                t,
                "transport",
                name,
                "line",
                {"packet_type": "1RTT", "header": header, "frames": frames},
            ]
        )
    rows.append([])
    trace = {
        "vantage_point": {"type": "network"},
        "title": "pcap2qlog",
        "event_fields": ["relative_time", "category", "event", "trigger", "data"],
        "events": rows,
    }
    return orjson.dumps({"qlog_version": "draft-01", "traces": [trace]})


def test_a_pcap2qlog_draft01_export_gives_states(tmp_path: Path) -> None:
    path = tmp_path / "capture.qlog"
    path.write_bytes(_draft01(_sender(probes=False)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        states = read_transitions(path)["state"].to_list()
    assert {"SlowStart", "Recovery", "CongestionAvoidance", "ApplicationLimited"} <= set(states)


def test_a_packet_record_that_does_not_decode_is_reported(tmp_path: Path) -> None:
    """The fast path checks only the framing of packet records: the full read for the wire
    derivation rejects a broken one, naming its record, or when lenient skips it and says
    so."""
    header = b'{"qlog_format": "JSON-SEQ", "qlog_version": "0.3", "trace": {}}'
    records = [header]
    for t, d, data in _sender(probes=False):
        name = "transport:packet_sent" if d == "sent" else "transport:packet_received"
        records.append(orjson.dumps({"time": t, "name": name, "data": data}))
    records.insert(5, b'{"time": 1, "name": "transport:packet_sent", "data": {oops}}')
    path = tmp_path / "x.sqlog"
    path.write_bytes(b"".join(b"\x1e" + r + b"\n" for r in records))
    with pytest.raises(QlogError, match=r"record 6 \(line 6\): expected a JSON text"):
        _read_quietly(path)
    frame, diag = _read_quietly(path, on_error="skip")
    assert "SlowStart" in frame["state"].to_list()
    # the first read checked its framing only: the packets' read skips it, counted once
    assert diag.skipped_records == 1
    (reason,) = diag.reasons
    assert reason.startswith(f"{path}: record 6 (line 6): expected a JSON text")
    assert reason.endswith(f"(trace {path}#0000)")


def _pcap2qlog_01(events: list[tuple[float, str, dict[str, Any]]]) -> bytes:
    """qlog 0.1 as pcap2qlog exported captures (shape written here by hand): a "connections"
    array, every packet PACKET_RX (the network's vantage), Wireshark's field names, and the
    direction only in the connection IDs."""
    client, server = "c1c1", "5e5e"
    rows: list[Any] = [
        [
            -1.0,
            "TRANSPORT",
            "PACKET_RX",
            "LINE",
            {
                "header": {
                    "form": "long",
                    "type": "Initial",
                    "scid": client,
                    "dcid": "0000",
                    "packet_number": "0",
                    "payload_length": "1200",
                },
                "frames": [{"frame_type": "CRYPTO"}],
            },
        ]
    ]
    for t, d, data in events:
        number = str(data["header"]["packet_number"])
        if d == "sent":  # server -> client
            header = {
                "form": "short",
                "dcid": client,
                "packet_number": number,
                "payload_length": str(MSS),
            }
            frames: list[Any] = [{"frame_type": "STREAM"}]
        else:
            lo, hi = data["frames"][0]["acked_ranges"][0]
            header = {
                "form": "short",
                "dcid": server,
                "packet_number": number,
                "payload_length": "TODO",
            }
            frames = [
                {
                    "frame_type": "ACK",
                    "frame_type.ack.largest_acknowledged": str(hi),
                    "frame_type.ack.ack_delay": "0",
                    "frame_type.ack.fab": str(hi - lo),
                }
            ]
        rows.append([t, "TRANSPORT", "PACKET_RX", "LINE", {"header": header, "frames": frames}])
    connection = {
        "vantagepoint": "NETWORK",
        "fields": ["time", "category", "type", "trigger", "data"],
        "events": rows,
    }
    return orjson.dumps({"qlog_version": "0.1", "connections": [connection]})


def test_a_pcap2qlog_capture_is_read_and_its_directions_told_by_connection_ids(
    tmp_path: Path,
) -> None:
    path = tmp_path / "capture.qlog"
    path.write_bytes(_pcap2qlog_01(_sender()))
    frame, diag = _read_quietly(path)
    states = frame["state"].to_list()
    assert {"SlowStart", "Recovery", "CongestionAvoidance", "TailLossProbe"} <= set(states)
    assert any("for the server's sender (a capture" in n for n in diag.notes), diag.notes
    assert read_traces(path)["format"].to_list() == ["JSON 0.1"]


# -- shapes found in public files (benchmarks/public_qlog.py): written here by hand ----------


def _wireshark_ack(ranges: list[tuple[int, int]], *, exported: int | None = None) -> dict[str, Any]:
    """An ACK frame with Wireshark's field names as pcap2qlog's qlog 0.1 exports carry them:
    the largest acknowledged, the first ACK block, then a gap and an ACK block per further
    range (one value, or a list when a field repeats); ``exported`` keeps only that many of
    the further blocks while ``ack_block_count`` still counts them all."""
    (lo, hi), rest = ranges[0], ranges[1:]
    frame: dict[str, Any] = {
        "frame_type": "ACK",
        "frame_type.ack.largest_acknowledged": str(hi),
        "frame_type.ack.ack_delay": "0",
        "frame_type.ack.ack_block_count": str(len(rest)),
        "frame_type.ack.fab": str(hi - lo),
    }
    gaps, blocks = [], []
    smallest = lo
    for below_lo, below_hi in rest:
        gaps.append(str(smallest - below_hi - 2))
        blocks.append(str(below_hi - below_lo))
        smallest = below_lo
    if exported is not None:
        gaps, blocks = gaps[:exported], blocks[:exported]
    if gaps:
        frame["frame_type.ack.gap"] = gaps if len(gaps) > 1 else gaps[0]
        frame["frame_type.ack.ack_block"] = blocks if len(blocks) > 1 else blocks[0]
    return frame


@pytest.mark.parametrize(
    "ranges",
    [[(18, 20)], [(18, 20), (12, 15)], [(18, 20), (12, 15), (6, 10)], [(90, 99), (0, 88)]],
)
def test_every_wireshark_ack_block_is_read(ranges: list[tuple[int, int]]) -> None:
    data = {"header": {"packet_number": "7"}, "frames": [_wireshark_ack(ranges)]}
    packet = packet_of(1.0, "packet_rx", data, 1.0)
    assert packet is not None and list(packet.acks) == ranges and not packet.partial_acks


def test_an_ack_exported_with_fewer_blocks_than_it_names_is_marked() -> None:
    frame = _wireshark_ack([(18, 20), (12, 15), (6, 10)], exported=1)
    packet = packet_of(1.0, "packet_rx", {"header": {"packet_number": "7"}, "frames": [frame]}, 1)
    assert packet is not None and list(packet.acks) == [(18, 20), (12, 15)]
    assert packet.partial_acks
    # a block running below packet 0 is not read, and marked too
    hostile = {
        **_wireshark_ack([(18, 20)]),
        "frame_type.ack.ack_block_count": "1",
        "frame_type.ack.gap": "16",
        "frame_type.ack.ack_block": "5",
    }
    packet = packet_of(1.0, "packet_rx", {"header": {"packet_number": "7"}, "frames": [hostile]}, 1)
    assert packet is not None and list(packet.acks) == [(18, 20)] and packet.partial_acks


def _delayed_ack_capture(*, exported: int | None = None) -> bytes:
    """A qlog 0.1 capture (pcap2qlog's "connections" shape) of a server sending 100 packets,
    the client acknowledging every 20th arrival with every range it holds; packet 45 is lost,
    so packets 40-44 are first acknowledged by the second block of the ACK of packet 59."""
    client, server = "c1c1", "5e5e"
    rows: list[Any] = [
        [
            0.0,
            "TRANSPORT",
            "PACKET_RX",
            "LINE",
            {
                "header": {
                    "form": "long",
                    "type": "Initial",
                    "scid": client,
                    "dcid": "0000",
                    "packet_number": "0",
                    "payload_length": "1200",
                },
                "frames": [{"frame_type": "CRYPTO"}],
            },
        ],
    ]
    received: list[int] = []
    ack_pn = 1
    for n in range(100):
        t = 1.0 + n * 0.5
        rows.append(
            [
                t,
                "TRANSPORT",
                "PACKET_RX",
                "LINE",
                {
                    "header": {
                        "form": "short",
                        "dcid": client,
                        "packet_number": str(n),
                        "payload_length": str(MSS),
                    },
                    "frames": [{"frame_type": "STREAM"}],
                },
            ]
        )
        if n != 45:
            received.append(n)
        if n % 20 == 19:
            ranges = [(lo, hi) for lo, hi in _ranges(received)]
            rows.append(
                [
                    t + RTT,
                    "TRANSPORT",
                    "PACKET_RX",
                    "LINE",
                    {
                        "header": {
                            "form": "short",
                            "dcid": server,
                            "packet_number": str(ack_pn),
                            "payload_length": "30",
                        },
                        "frames": [_wireshark_ack(ranges, exported=exported)],
                    },
                ]
            )
            ack_pn += 1
    rows.sort(key=lambda r: r[0])
    connection = {
        "vantagepoint": "NETWORK",
        "fields": ["time", "category", "type", "trigger", "data"],
        "events": rows,
    }
    return orjson.dumps({"qlog_version": "0.1", "connections": [connection]})


def test_a_multi_block_ack_of_a_capture_acknowledges_every_block(tmp_path: Path) -> None:
    """Read in full, the capture loses exactly packet 45; read with only the first ACK block
    (what the wire derivation did before), packets 40-44 stay unacknowledged and are declared
    lost too. A capture exported without its further blocks is read as far as it goes, and
    the read says how many ACK frames were cut."""
    full = tmp_path / "full.qlog"
    full.write_bytes(_delayed_ack_capture())
    result = wire_states(read_packets(full).packets[0])
    assert result.captured and result.losses == 1 and result.partial_acks == 0
    cut = tmp_path / "cut.qlog"
    cut.write_bytes(_delayed_ack_capture(exported=0))
    result = wire_states(read_packets(cut).packets[0])
    assert result.losses == 6 and result.partial_acks == 3
    _, diag = _read_quietly(cut)
    (note,) = [n for n in diag.notes if "ACK blocks" in n]
    assert note == (
        f"{cut}#0000: 3 ACK frames name more ACK blocks than the capture exported; only the "
        "exported blocks were read"
    )


def test_a_draft01_event_without_its_optional_trigger_is_read(tmp_path: Path) -> None:
    """pcap2qlog's draft-01 exports name a trigger column and leave it out of some events
    (``["13", "transport", "ALPN_update", {...}]``): read by default; an event short by
    anything else is still an error naming it."""
    events = _sender(probes=False)
    doc = orjson.loads(_draft01(events))
    rows = doc["traces"][0]["events"]
    rows.insert(3, [rows[2][0], "transport", "ALPN_update", {"old": "", "new": "h3-22"}])
    path = tmp_path / "x.qlog"
    path.write_bytes(orjson.dumps(doc))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        states = read_transitions(path)["state"].to_list()
    assert {"SlowStart", "Recovery", "CongestionAvoidance"} <= set(states)
    at = rows[2][0]
    for short in ([at, "transport", "ALPN_update"], [at, "transport", "x", "line"]):
        rows[3] = short
        path.write_bytes(orjson.dumps(doc))
        with pytest.raises(QlogError, match=r"traces\[0\]\.events\[3\]: expected an array of 5"):
            read_transitions(path)


def test_the_packet_type_beside_the_header_names_the_space() -> None:
    """pcap2qlog's later draft-01 exports write ``"type": "initial"`` beside the header."""
    kinds = (("initial", "initial"), ("handshake", "handshake"), ("1RTT", "application"))
    for kind, space in kinds:
        packet = packet_of(0.0, "packet_sent", {"type": kind, "header": {"packet_number": "3"}}, 1)
        assert packet is not None and packet.space == space


def test_packets_without_numbers_say_no_state_can_be_derived(tmp_path: Path) -> None:
    """An encrypted capture's export logs frames but no packet numbers: ACKs cannot be matched
    to packets, and the read says so instead of deriving from nothing."""
    doc = orjson.loads(_draft01(_sender(probes=False)))
    for row in doc["traces"][0]["events"]:
        if row and row[2] == "packet_sent":
            del row[4]["header"]["packet_number"]
    path = tmp_path / "encrypted.qlog"
    path.write_bytes(orjson.dumps(doc))
    frame, diag = _read_quietly(path)
    assert frame["state"].to_list() == ["Init"]
    (message,) = diag.derivation_messages()
    assert message.startswith("no state can be derived: its ") and "log no packet number" in message


def test_a_log_whose_acks_acknowledge_none_of_the_data_says_so(tmp_path: Path) -> None:
    """picoquic's frame-encoding references log only sends, some carrying ACK frames for the
    peer's packets: nothing acknowledges the data, so nothing is derived, and the read says
    why instead of claiming states from the packets."""
    doc = orjson.loads(_draft01([e for e in _sender(probes=False) if e[1] == "sent"]))
    rows = doc["traces"][0]["events"]
    rows.insert(
        2,
        [
            rows[1][0],
            "transport",
            "packet_sent",
            "line",
            {
                "packet_type": "1RTT",
                "header": {"packet_number": "999", "packet_size": 40},
                "frames": [{"frame_type": "ack", "acked_ranges": [["0", "5"]]}],
            },
        ],
    )
    path = tmp_path / "sends.qlog"
    path.write_bytes(orjson.dumps(doc))
    frame, diag = _read_quietly(path)
    assert frame["state"].to_list() == ["Init"]
    (message,) = diag.derivation_messages()
    assert message.startswith(
        "no state can be derived: no ACK frame it logs acknowledges a data packet of its own "
        "sender ("
    ), message
    assert not any("states derived from its packets" in n for n in diag.notes)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=40))
def test_wireshark_ack_fields_round_trip_any_set_of_packets(numbers: set[int]) -> None:
    """Any set of acknowledged packet numbers, written as Wireshark's ACK fields (first block,
    then gap / ACK block pairs), reads back as exactly its ranges."""
    ranges = [(lo, hi) for lo, hi in _ranges(sorted(numbers))]
    data = {"header": {"packet_number": "1"}, "frames": [_wireshark_ack(ranges)]}
    packet = packet_of(0.0, "packet_rx", data, 1.0)
    assert packet is not None and not packet.partial_acks
    assert {n for lo, hi in packet.acks for n in range(lo, hi + 1)} == numbers


@pytest.mark.parametrize("position", range(5))
def test_the_optional_trigger_may_be_left_out_wherever_event_fields_put_it(
    tmp_path: Path, position: int
) -> None:
    fields = ["relative_time", "category", "event", "data"]
    fields.insert(position, "trigger")

    def row(t: int, cwnd: int, *, trigger: bool) -> list[Any]:
        values = {
            "relative_time": t,
            "category": "recovery",
            "event": "metrics_updated",
            "data": {"cwnd": cwnd},
            "trigger": "ack",
        }
        return [values[f] for f in fields if trigger or f != "trigger"]

    trace = {
        "event_fields": fields,
        "events": [row(1, 1000, trigger=True), row(2, 2000, trigger=False)],
    }
    path = tmp_path / "x.qlog"
    path.write_bytes(orjson.dumps({"qlog_version": "draft-01", "traces": [trace]}))
    metrics = read_metrics(path)
    assert metrics["cwnd_bytes"].to_list() == [1000, 2000]


def test_a_trace_that_logs_no_state_is_not_said_to_log_its_profiles_states(
    tmp_path: Path,
) -> None:
    """picoquic's profile says picoquic logs SlowStart, CongestionAvoidance and Recovery; a
    picoquic trace that logs none of them (its app_msg_overflow reference: messages only) gets
    "no state can be derived", not a notice naming only the other states."""
    trace = {
        "title": "picoquic",
        "vantage_point": {"type": "client"},
        "event_fields": ["relative_time", "category", "event", "data"],
        "events": [[0, "info", "message", {"message": "s:xxxx"}]] * 3,
    }
    path = tmp_path / "messages.qlog"
    path.write_bytes(
        orjson.dumps({"qlog_version": "draft-00", "title": "picoquic", "traces": [trace]})
    )
    _, diag = _read_quietly(path)
    assert diag.derivation_messages() == [
        "no state can be derived: the trace logs no recovery metrics, losses or timers "
        f"({path}#0000)"
    ]
