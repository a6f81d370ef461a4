"""The packets panel of `quicsm plot`: quicsm.extract.packets on real traces (checked against
what quic-go logs itself), on packet events made up to state one rule each, and as drawn."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from quicsm.cli import main
from quicsm.core.diagnostics import Diagnostics
from quicsm.core.errors import QlogError
from quicsm.extract.packets import (
    PacketColumns,
    _acknowledged_after,
    _covered,
    read_packet_timelines,
)
from quicsm.extract.read import read_metrics, read_transitions
from quicsm.render import charts
from quicsm.render.connection import connection_series, loss_marks

ROOT = Path(__file__).parent.parent
V65 = ROOT / "traces" / "quic-go-v0.65.0.qlog"  # logs spurious_loss itself
V48 = ROOT / "traces" / "quic-go-v0.48.2.qlog"  # does not
REAL = Path(__file__).parent / "fixtures" / "real"
SERVER = REAL / "quic-go-v0.65.0" / "server.sqlog.zst"
QUICHE = Path(__file__).parent / "fixtures" / "qlog" / "quiche_quic.sqlog"  # no packet_lost


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def v65() -> tuple[dict[str, object], pl.DataFrame]:
    metrics = read_metrics([V65])
    ids = metrics["trace"].unique(maintain_order=True).to_list()
    return read_packet_timelines([V65], ids), metrics


def test_losses_and_spurious_losses_agree_with_what_quic_go_logs(v65) -> None:  # type: ignore[no-untyped-def]
    """quic-go v0.65.0 logs its own packet_lost and spurious_loss events: on every sender
    trace of the corpus, the losses read from packet_lost and the spurious ones found by
    packet number (declared lost, acknowledged by a later ACK) are exactly as many."""
    timelines, metrics = v65
    senders = 0
    for trace, p in timelines.items():
        events = metrics.filter(pl.col("trace") == trace)["event"].value_counts()
        count = dict(zip(events["event"].to_list(), events["count"].to_list(), strict=True))
        if not p.losses_here:  # the client: the data's losses are the server's
            assert not p.own_sends and not p.lost
            continue
        senders += 1
        assert len(p.lost) == count.get("packet_lost", 0), trace
        assert p.spurious == count.get("spurious_loss", 0), trace
        assert p.acknowledged <= len(p.sent[0])
        assert list(p.sent[0]) == sorted(p.sent[0])
        assert list(p.largest_acked[1]) == sorted(p.largest_acked[1])  # only rises
    assert senders >= 30
    assert sum(p.spurious for p in timelines.values()) > 100  # the jitter scenarios


def test_trace_14_every_loss_is_spurious_and_drawn_apart(v65) -> None:  # type: ignore[no-untyped-def]
    timelines, metrics = v65
    trace = f"{V65}#0014"
    p = timelines[trace]
    assert len(p.lost) == p.spurious == 21
    s = connection_series(read_transitions([V65]), metrics, trace, packets=p)
    spec = charts.connection_spec(s)
    panel = next(v for v in spec["vconcat"] if v["title"]["text"].startswith("packets"))
    assert "1,627 sent" in panel["title"]["text"]
    assert "21 declared lost, 21 of them spurious" in panel["title"]["text"]
    marks = [layer for layer in panel["layer"] if layer["mark"]["type"] == "point"]
    kinds = {
        r["kind"]: (layer["mark"]["filled"], layer["encoding"]["shape"]["scale"])
        for layer in marks
        for r in layer["data"]["values"]
        if "kind" in r  # the sent dots take theirs from a transform
    }
    lost, spurious = (charts.PACKET_MARKS[k][0] for k in ("lost", "spurious"))
    assert spurious in kinds and lost not in kinds  # every loss is drawn as spurious
    _, shapes = kinds[spurious]
    # a spurious loss differs from a loss by shape and colour, in the panel and its legend
    assert shapes["range"][shapes["domain"].index(spurious)] == "diamond"
    assert shapes["range"][shapes["domain"].index(lost)] == "cross"
    assert charts.PACKET_MARKS["spurious"][2] != charts.PACKET_MARKS["lost"][2]
    # the clustered marks count every loss once
    counted = sum(r["n"] for layer in marks for r in layer["data"]["values"] if "n" in r)
    assert counted == 21
    assert any(r["count"] == "11" for layer in marks for r in layer["data"]["values"]
               if "count" in r)  # fmt: skip


def test_spurious_losses_found_where_the_producer_does_not_log_them() -> None:
    """quic-go v0.48.2 logs no spurious_loss event: the plot finds them from the packets, in
    the events panel too."""
    trace = f"{V48}#0010"
    p = read_packet_timelines([V48], [trace])[trace]
    metrics = read_metrics([V48])
    assert metrics.filter((pl.col("trace") == trace) & (pl.col("event") == "spurious_loss"))\
        .height == 0  # fmt: skip
    assert len(p.lost) == 130 and p.spurious == 129
    s = connection_series(read_transitions([V48]), metrics, trace, packets=p)
    assert len(s.spurious_ms) == 129
    rows = {r["row"] for v in charts.connection_spec(s)["vconcat"] for layer in v["layer"]
            for r in layer["data"]["values"] if "row" in r}  # fmt: skip
    assert "spurious loss (129)" in rows


def _sent(c: PacketColumns, t: float, n: int, space: str = "1RTT") -> None:
    c.packet(t, "packet_sent", {"header": {"packet_type": space, "packet_number": n},
                                "raw": {"length": 1200}, "frames": [{"frame_type": "stream"}]},
             1.0)  # fmt: skip


def _ack(c: PacketColumns, t: float, n: int, ranges: list[list[int]]) -> None:
    c.packet(t, "packet_received", {"header": {"packet_type": "1RTT", "packet_number": n},
                                    "raw": {"length": 40},
                                    "frames": [{"frame_type": "ack", "acked_ranges": ranges}]},
             1.0)  # fmt: skip


def test_timeline_rules_on_made_up_packets() -> None:
    c = PacketColumns()
    for n in range(10):
        _sent(c, 100.0 + n, n)
    _sent(c, 101.0, 0, "handshake")  # another number space: not drawn
    _ack(c, 130.0, 0, [[0, 2], [4, 6]])
    c.loss(131.0, "packet_lost", {"header": {"packet_type": "1RTT", "packet_number": 3},
                                  "trigger": "reordering_threshold"}, 1.0)  # fmt: skip
    c.loss(131.5, "packet_lost", {"type": "1RTT", "packet_number": 7}, 1.0)  # aioquic's form
    c.loss(131.6, "packet_lost", {"type": "initial", "packet_number": 1}, 1.0)
    _ack(c, 140.0, 1, [[0, 6]])  # 3 acknowledged after it was declared lost: spurious
    _ack(c, 141.0, 2, [[0, 6], [8, 8]])  # 7 never acknowledged: lost
    p = c.timeline(100.0)
    assert p.own_sends and not p.captured and p.losses_here
    assert (list(p.sent[0]), list(p.sent[1])) == ([float(n) for n in range(10)], list(range(10)))
    assert (list(p.largest_acked[0]), list(p.largest_acked[1])) == ([30.0, 41.0], [6, 8])
    assert p.acknowledged == 8  # 0-6 and 8
    assert p.lost == [(31.0, 3, True, "reordering_threshold"), (31.5, 7, False, None)]
    assert p.spurious == 1


def test_the_receivers_log_shows_the_peers_packets_and_no_losses() -> None:
    c = PacketColumns()
    for n in range(5):
        c.packet(10.0 + n, "packet_received", {"header": {"packet_type": "1RTT",
                 "packet_number": n}, "raw": {"length": 1200},
                 "frames": [{"frame_type": "stream"}]}, 1.0)  # fmt: skip
    c.packet(20.0, "packet_sent", {"header": {"packet_type": "1RTT", "packet_number": 0},
             "raw": {"length": 40}, "frames": [{"frame_type": "ack", "acked_ranges": [[0, 4]]}]},
             1.0)  # fmt: skip
    c.loss(21.0, "packet_lost", {"header": {"packet_type": "1RTT", "packet_number": 0}}, 1.0)
    p = c.timeline(0.0)
    assert not p.own_sends and not p.losses_here and p.lost == []
    assert list(p.sent[1]) == [0, 1, 2, 3, 4] and p.acknowledged == 5


def test_losses_with_and_without_a_trigger_at_one_time_are_ordered() -> None:
    """Two declarations of one packet at one time, one naming its trigger and one not (a
    hostile log): ordered (none first), not compared (a TypeError before)."""
    c = PacketColumns()
    c.packet(1.0, "packet_sent", {"header": {"packet_type": "1RTT", "packet_number": 0},
             "raw": {"length": 1200}, "frames": [{"frame_type": "stream"}]}, 1.0)  # fmt: skip
    header = {"packet_type": "1RTT", "packet_number": 0}
    c.loss(2.0, "packet_lost", {"header": header, "trigger": "time_threshold"}, 1.0)
    c.loss(2.0, "packet_lost", {"header": header}, 1.0)
    p = c.timeline(0.0)
    assert p.lost == [(2.0, 0, False, None), (2.0, 0, False, "time_threshold")]


def _acknowledged_after_by_sweep(
    lost: list[tuple[float, int]], acks: list[tuple[float, int, int]]
) -> list[bool]:
    """The sweep the account used before its segment tree: ACK ranges in time order, each
    loss pending from the first ACK after it until a range covers its number."""
    import bisect

    out = [False] * len(lost)
    by_time = sorted(range(len(lost)), key=lambda j: lost[j])
    pending: list[tuple[int, int]] = []
    i = 0
    for t, lo, hi in acks:
        while i < len(by_time) and lost[by_time[i]][0] < t:
            bisect.insort(pending, (lost[by_time[i]][1], by_time[i]))
            i += 1
        a = bisect.bisect_left(pending, (lo, -1))
        b = bisect.bisect_right(pending, (hi, len(lost)))
        for _, j in pending[a:b]:
            out[j] = True
        del pending[a:b]
    return out


def _arrays(
    lost: list[tuple[float, int]], acks: list[tuple[float, int, int]]
) -> tuple[np.ndarray, ...]:
    return (
        np.array([t for t, _ in lost], dtype=np.float64),
        np.array([n for _, n in lost], dtype=np.int64),
        np.array([t for t, _, _ in acks], dtype=np.float64),
        np.array([lo for _, lo, _ in acks], dtype=np.int64),
        np.array([hi for _, _, hi in acks], dtype=np.int64),
    )


@given(
    st.lists(st.tuples(st.floats(0, 100), st.integers(0, 60)), max_size=40),
    st.lists(st.tuples(st.floats(0, 100), st.integers(0, 60), st.integers(-3, 20)), max_size=40),
)
def test_acknowledged_after_is_any_later_covering_range(
    lost: list[tuple[float, int]], raw: list[tuple[float, int, int]]
) -> None:
    """Also with equal times (a range arriving with the loss does not count), repeated
    numbers, and ranges whose ends are swapped (they cover nothing); the same answers as the
    sweep it replaced."""
    acks = sorted((t, lo, lo + w) for t, lo, w in raw)
    got = _acknowledged_after(*_arrays(lost, acks)).tolist()
    want = [any(at > t and lo <= n <= hi for at, lo, hi in acks) for t, n in lost]
    assert got == want
    assert got == _acknowledged_after_by_sweep(lost, acks)


@given(
    st.lists(st.tuples(st.integers(0, 30), st.integers(-5, 2000)), max_size=300),
    st.lists(
        st.tuples(st.integers(0, 30), st.integers(-5, 2000), st.integers(0, 400)), max_size=300
    ),
)
def test_acknowledged_after_on_many_numbers(
    lost: list[tuple[int, int]], raw: list[tuple[int, int, int]]
) -> None:
    """Deep trees (hundreds of distinct numbers) and coarse times, so that ties are common."""
    losses = [(float(t), n) for t, n in lost]
    acks = sorted((float(t), lo, lo + w) for t, lo, w in raw)
    got = _acknowledged_after(*_arrays(losses, acks)).tolist()
    assert got == _acknowledged_after_by_sweep(losses, acks)


@given(
    st.sets(st.integers(0, 80), max_size=60),
    st.lists(st.tuples(st.integers(0, 80), st.integers(0, 15)), max_size=30),
)
def test_covered_counts_numbers_inside_any_range(
    numbers: set[int], raw: list[tuple[int, int]]
) -> None:
    import numpy as np

    lo = np.array([a for a, _ in raw], dtype=np.int64)
    hi = np.array([a + w for a, w in raw], dtype=np.int64)
    want = sum(1 for n in numbers if any(a <= n <= a + w for a, w in raw))
    assert _covered(np.array(sorted(numbers), dtype=np.int64), lo, hi) == want


@given(
    st.lists(st.tuples(st.floats(0, 1000), st.integers(0, 5000)), max_size=200),
    st.floats(0.1, 50),
    st.floats(0.5, 200),
)
def test_loss_marks_count_every_loss_once(
    losses: list[tuple[float, int]], gap_ms: float, gap_number: float
) -> None:
    marks = loss_marks(losses, gap_ms=gap_ms, gap_number=gap_number)
    assert sum(m[4] for m in marks) == len(losses)
    for first, last, lo, hi, n in marks:
        assert first <= last and lo <= hi and (n > 1 or (first == last and lo == hi))
        inside = [x for x in losses if first <= x[0] <= last and lo <= x[1] <= hi]
        assert len(inside) >= n
    for a, b in zip(marks, marks[1:], strict=False):
        assert b[0] >= a[1]  # in time order


def test_cli_packets_panel_strict_and_lenient(tmp_path: Path) -> None:
    """A packet record that does not decode: the strict plot names the file and the record;
    --lenient draws the rest and says which record it skipped."""
    import zstandard

    text = zstandard.ZstdDecompressor().stream_reader(SERVER.open("rb")).read().decode()
    records = text.split("\x1e")
    at = next(i for i, r in enumerate(records) if '"transport:packet_sent"' in r and i > 40)
    records[at] = records[at].replace('"frames":', '"frames":: ', 1)
    broken = tmp_path / "broken.sqlog"
    broken.write_text("\x1e".join(records))
    code, _, err = run("plot", str(broken), "-o", str(tmp_path / "a.svg"))
    assert code == 1 and "Traceback" not in err
    assert str(broken) in err and "record" in err
    code, _, err = run("plot", str(broken), "--lenient", "-o", str(tmp_path / "b.svg"))
    assert code == 0, err
    assert "skipped 1 record;" in err and f"{broken}: record " in err
    assert ">packets by 1-RTT packet number" in (tmp_path / "b.svg").read_text()
    with pytest.raises(QlogError, match="broken.sqlog"):
        read_packet_timelines([broken], [f"{broken}#0000"])
    diagnostics = Diagnostics()
    got = read_packet_timelines(
        [broken], [f"{broken}#0000"], on_error="skip", diagnostics=diagnostics
    )
    assert list(got) == [f"{broken}#0000"] and diagnostics.skipped_records == 1


def test_only_the_chosen_traces_are_kept(tmp_path: Path) -> None:
    copy = tmp_path / "copy.sqlog.zst"
    shutil.copy(SERVER, copy)
    got = read_packet_timelines([SERVER, copy], [f"{copy}#0000"])
    assert list(got) == [f"{copy}#0000"]
    assert read_packet_timelines([SERVER], []) == {}


def test_cli_plot_says_not_logged_in_the_packets_panel(tmp_path: Path) -> None:
    out = tmp_path / "q.svg"
    code, _, err = run("plot", str(QUICHE), "-o", str(out))
    assert code == 0, err
    svg = out.read_text()
    assert ">losses: not logged by this producer</text>" in svg
    assert "declared lost," not in svg.split(">packets by", 1)[1].split("</text>", 1)[0]
    out = tmp_path / "client.svg"
    code, _, err = run("plot", str(REAL / "quic-go-v0.65.0" / "client.sqlog.gz"), "-o", str(out))
    assert code == 0, err
    svg = out.read_text()
    assert ">losses are declared by the data's sender: not in this log</text>" in svg
    assert " received, " in svg


def test_a_capture_is_told_apart_by_connection_ids(tmp_path: Path) -> None:
    """A pcap2qlog capture logs every packet as received: the data's direction is told by
    connection IDs, as for states from the wire, and it holds no loss declarations."""
    from test_wire import _pcap2qlog_01, _sender

    events = _sender()
    path = tmp_path / "capture.qlog"
    path.write_bytes(_pcap2qlog_01(events))
    (p,) = read_packet_timelines([path], [f"{path}#0000"]).values()
    assert p.captured and not p.own_sends and not p.losses_here and p.lost == []
    sent = sorted(int(d["header"]["packet_number"]) for _, way, d in events if way == "sent")
    assert sorted(p.sent[1]) == sent
    # the capture exports each ACK's first range only
    acked = {n for _, way, d in events if way == "received"
             for n in range(d["frames"][0]["acked_ranges"][0][0],
                            d["frames"][0]["acked_ranges"][0][1] + 1)}  # fmt: skip
    assert p.acknowledged == len(acked & set(sent)) and 60 not in acked


def test_reading_packets_serialises_no_event(monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace's losses are kept as numbers only: reading its packets turns no event into JSON
    text (the records a click shows are read apart, :mod:`quicsm.extract.raw_events`), so the
    work does not grow with the losses' data. Counts ``orjson.dumps`` calls on a real trace
    that declares losses."""
    import orjson

    calls = []
    real = orjson.dumps

    def counted(*args: object, **kwargs: object) -> bytes:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(orjson, "dumps", counted)
    trace = f"{SERVER}#0000"
    timeline = read_packet_timelines(SERVER, [trace])[trace]
    assert timeline.lost  # the trace declares losses
    assert calls == []
