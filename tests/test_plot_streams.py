"""The byte-offset panel's data: STREAM frames of the data direction with when each was first
acknowledged or declared lost, and the receiver's flow-control limits (MAX_DATA,
MAX_STREAM_DATA) — read from real traces, and checked against a brute-force oracle on
generated events."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from quicsm.extract.packets import read_packet_timelines
from quicsm.extract.streams import StreamColumns

REAL = Path(__file__).parent / "fixtures" / "real"
SERVER = REAL / "quic-go-v0.65.0" / "server.sqlog.zst"
AIOQUIC = REAL / "aioquic-1.7.2" / "server.qlog.zst"


def test_real_server_trace_has_its_stream_and_limits() -> None:
    """quic-go's server log: it sends the data (a stream read from offset 0 without gaps
    beyond retransmissions), ACKs come after the frames they cover, and the client's limits
    bound the data it received."""
    for path in (SERVER, AIOQUIC):
        timeline = read_packet_timelines(path, [f"{path}#0000"])[f"{path}#0000"]
        streams = timeline.streams
        assert streams is not None and streams.own_sends
        frames = streams.frames
        assert frames and min(off for _, off, _, _ in frames) == 0
        assert [t for t, *_ in frames] == sorted(t for t, *_ in frames)
        top = max(off + n for _, off, n, _ in frames)
        covered = sorted((off, off + n) for _, off, n, _ in frames)
        reach = 0
        for lo, hi in covered:  # every byte up to the top was sent at least once
            assert lo <= reach, (path, lo, reach)
            reach = max(reach, hi)
        assert reach == top
        for (t, *_), acked in zip(frames, streams.acked_at, strict=True):
            assert acked is None or acked >= t
        # a frame never acknowledged was declared lost, or its bytes were acknowledged in
        # other frames (sent again, split differently), or it is past the last byte acknowledged
        acked_bytes: list[list[int]] = []
        for (_, off, n, _), a in sorted(
            zip(frames, streams.acked_at, strict=True), key=lambda fa: fa[0][1]
        ):
            if a is None:
                continue
            if acked_bytes and off <= acked_bytes[-1][1]:
                acked_bytes[-1][1] = max(acked_bytes[-1][1], off + n)
            else:
                acked_bytes.append([off, off + n])
        for (_, off, n, _), a, gone in zip(frames, streams.acked_at, streams.lost_at, strict=True):
            if a is None and gone is None:
                tail = off + n > acked_bytes[-1][1]  # the log ends before its ACK
                covered = any(lo <= off and off + n <= hi for lo, hi in acked_bytes)
                assert tail or covered, (path, off)
    quic_go = read_packet_timelines(SERVER, [f"{SERVER}#0000"])[f"{SERVER}#0000"].streams
    assert quic_go is not None and quic_go.max_stream_data and quic_go.max_data


def _event(number: int, frames: list[dict[str, object]]) -> dict[str, object]:
    return {"header": {"packet_type": "1RTT", "packet_number": number}, "frames": frames}


@given(
    st.lists(st.tuples(st.integers(0, 40), st.integers(1, 1200)), min_size=1, max_size=30),
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 10)), max_size=20),
    st.sets(st.integers(0, 40), max_size=5),
)
def test_first_ack_and_loss_match_a_brute_force_oracle(
    sends: list[tuple[int, int]], acks: list[tuple[int, int]], lost: set[int]
) -> None:
    """Frames sent in packets 0..n-1 (one stream, consecutive offsets), ACK ranges received
    later, some packets declared lost: each frame's first ACK is the earliest ACK whose range
    holds its packet number, its loss the declaration of its packet."""
    cols = StreamColumns()
    offset = 0
    for number, (_, length) in enumerate(sends):
        frame = {"frame_type": "stream", "stream_id": 4, "offset": offset, "length": length}
        cols.packet(float(number), "packet_sent", _event(number, [frame]), 1.0)
        offset += length
    t = float(len(sends))
    ack_times: list[tuple[float, int, int]] = []
    for i, (lo, width) in enumerate(acks):
        ack = {"frame_type": "ack", "acked_ranges": [[lo, lo + width]]}
        cols.packet(t + i, "packet_received", _event(1000 + i, [ack]), 1.0)
        ack_times.append((t + i, lo, lo + width))
    for i, number in enumerate(sorted(lost)):
        header = {"header": {"packet_type": "1RTT", "packet_number": number}}
        cols.loss(t + 0.5 + i, "packet_lost", header, 1.0)
    timeline = cols.timeline(0.0)
    assert timeline is not None and timeline.own_sends and timeline.stream_id == 4
    for (sent, _, _, number), acked, declared in zip(
        timeline.frames, timeline.acked_at, timeline.lost_at, strict=True
    ):
        expected = min((at for at, lo, hi in ack_times if lo <= number <= hi), default=None)
        assert acked == expected
        loss = [t + 0.5 + i for i, n in enumerate(sorted(lost)) if n == number]
        assert declared == (loss[0] if loss else None)
        assert sent == float(number)


def test_no_stream_frames_no_view() -> None:
    cols = StreamColumns()
    cols.packet(1.0, "packet_sent", _event(0, [{"frame_type": "ping"}]), 1.0)
    assert cols.timeline(0.0) is None
