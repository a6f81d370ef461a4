"""A connection's stream data by byte offset, and its flow-control limits, for the byte-offset
panel of ``quicsm plot`` (qvis draws the same from the same frames): each STREAM frame of the
data direction (RFC 9000 section 19.8: stream ID, offset, length), when the packet carrying it
was first acknowledged (an ACK range covering its packet number, RFC 9000 section 19.3) or
declared lost, and every MAX_DATA and MAX_STREAM_DATA frame (sections 19.9 and 19.10: the
connection's and a stream's receive limits, in bytes of offset).

:class:`StreamColumns` is sans-I/O: it takes one trace's decoded ``packet_sent`` /
``packet_received`` and ``packet_lost`` events as they are read (the same hooks
:class:`quicsm.extract.packets.PacketColumns` uses) and keeps numbers only;
:meth:`StreamColumns.timeline` picks the data direction (the one whose STREAM frames carry more
bytes) and the stream that carries the most of them, and returns a :class:`StreamTimeline`
(None when the trace logs no STREAM frames).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Final

from quicsm.extract.wire import Packet, lost_packet_of, packet_of


@dataclass(frozen=True)
class StreamTimeline:
    """The stream that carries the most data in the data direction; times in ms from the
    trace's first event, offsets in bytes."""

    #: the log owner sent the data (else: the peer did, seen arriving)
    own_sends: bool
    stream_id: int
    #: STREAM frames of that stream: (time sent, offset, length, packet number) in time order
    frames: list[tuple[float, int, int, int]]
    #: per frame: when an ACK first covered its packet (None: never, in this log)
    acked_at: list[float | None]
    #: per frame: when its packet was declared lost (None: not declared lost)
    lost_at: list[float | None]
    #: MAX_DATA frames (the connection's limit) that bound the data: (time, maximum)
    max_data: list[tuple[float, int]] = field(default_factory=list)
    #: MAX_STREAM_DATA frames of this stream that bound the data: (time, maximum)
    max_stream_data: list[tuple[float, int]] = field(default_factory=list)
    #: other streams carrying data that way (not drawn)
    other_streams: int = 0
    #: whether this log holds the data sender's loss declarations
    losses_here: bool = True


def _int(value: object) -> int | None:
    if type(value) is int:  # the common case first (bool is not int's type)
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


#: the transport parameters that set the initial flow-control limits
INITIAL_LIMITS: Final = (
    "initial_max_data",
    "initial_max_stream_data_bidi_local",
    "initial_max_stream_data_bidi_remote",
    "initial_max_stream_data_uni",
)


class StreamColumns:
    """One trace's STREAM, ACK and flow-control frames and its losses, as plain rows."""

    __slots__ = ("acks", "blocked", "limits", "losses", "parameters", "stream_rows")

    def __init__(self) -> None:
        #: (time, sent, stream, offset, length, packet number)
        self.stream_rows: list[tuple[float, bool, int, int, int, int]] = []
        #: (time, sent, smallest, largest) of 1-RTT ACK ranges
        self.acks: list[tuple[float, bool, int, int]] = []
        #: (time, sent, stream or -1 for MAX_DATA, maximum)
        self.limits: list[tuple[float, bool, int, int]] = []
        #: (time, packet number) of 1-RTT packets declared lost
        self.losses: list[tuple[float, int]] = []
        #: (time, sent, stream or -1 for DATA_BLOCKED, limit) of the *_BLOCKED frames
        #: (RFC 9000 sections 19.12 and 19.13)
        self.blocked: list[tuple[float, bool, int, int]] = []
        #: the transport parameters' initial limits by who set them (True: the log owner)
        self.parameters: dict[bool, dict[str, int]] = {}

    def packet(self, time: float, short: str, data: object, scale: float) -> None:
        """A ``packet_sent`` / ``packet_received`` event."""
        p = packet_of(time, short, data, scale)
        if p is not None:
            self.add(time, p, data)

    def add(self, time: float, p: Packet, data: object) -> None:
        """A packet event already decoded (``p``) with its event data."""
        if p.space != "application" or not isinstance(data, dict):
            return
        for lo, hi in p.acks:
            self.acks.append((time, p.sent, lo, hi))
        frames = data.get("frames")
        if not isinstance(frames, list):
            return
        for frame in frames:
            if not isinstance(frame, dict):
                continue
            kind = str(frame.get("frame_type", frame.get("type", ""))).lower()
            if kind == "stream" and p.number is not None:
                stream, offset = _int(frame.get("stream_id")), _int(frame.get("offset", 0))
                length = _int(frame.get("length"))
                raw = frame.get("raw")
                if length is None and isinstance(raw, dict):  # qlog 0.4 on: raw.payload_length
                    length = _int(raw.get("payload_length"))
                if stream is not None and offset is not None and length:
                    self.stream_rows.append((time, p.sent, stream, offset, length, p.number))
            elif kind == "max_data":
                maximum = _int(frame.get("maximum"))
                if maximum is not None:
                    self.limits.append((time, p.sent, -1, maximum))
            elif kind == "max_stream_data":
                stream, maximum = _int(frame.get("stream_id")), _int(frame.get("maximum"))
                if stream is not None and maximum is not None:
                    self.limits.append((time, p.sent, stream, maximum))
            elif kind == "data_blocked":
                limit = _int(frame.get("limit"))
                if limit is not None:
                    self.blocked.append((time, p.sent, -1, limit))
            elif kind == "stream_data_blocked":
                stream, limit = _int(frame.get("stream_id")), _int(frame.get("limit"))
                if stream is not None and limit is not None:
                    self.blocked.append((time, p.sent, stream, limit))

    def transport_parameters(self, data: object) -> None:
        """A ``parameters_set`` event: the initial flow-control limits (RFC 9000 section 18.2)
        its owner (``owner`` in qlog 0.3, ``initiator`` later: local or remote) set."""
        if not isinstance(data, dict):
            return
        who = data.get("owner", data.get("initiator"))
        if who not in ("local", "remote"):
            return
        kept = self.parameters.setdefault(who == "local", {})
        for name in INITIAL_LIMITS:
            value = _int(data.get(name))
            if value is not None:
                kept[name] = value

    def loss(self, time: float, short: str, data: object, scale: float) -> None:
        """A ``packet_lost`` event."""
        space, number, _ = lost_packet_of(data)
        if space == "application" and number is not None:
            self.losses.append((time, number))

    def timeline(self, start: float) -> StreamTimeline | None:
        """The byte-offset view of the trace, times from ``start`` (ms); None without STREAM
        frames."""
        if not self.stream_rows:
            return None
        by_way = [0, 0]
        for _, sent, _, _, length, _ in self.stream_rows:
            by_way[sent] += length
        own = by_way[1] >= by_way[0]
        per_stream: dict[int, int] = {}
        for _, sent, stream, _, length, _ in self.stream_rows:
            if sent == own:
                per_stream[stream] = per_stream.get(stream, 0) + length
        stream = max(sorted(per_stream), key=lambda s: per_stream[s])
        frames = sorted(
            (t - start, offset, length, number)
            for t, sent, s, offset, length, number in self.stream_rows
            if sent == own and s == stream
        )
        # ACKs of the data travel the other way; each range covers packet numbers
        acks = sorted((t - start, lo, hi) for t, sent, lo, hi in self.acks if sent != own)
        first_ack: dict[int, float] = {}
        # packet numbers not acknowledged yet: each leaves once, at its first ACK (ranges are
        # cumulative, so walking every number a range covers would cost ACKs x packets)
        pending = sorted({n for *_, n in frames})
        for t, lo, hi in acks:
            i = bisect.bisect_left(pending, lo)
            j = bisect.bisect_right(pending, hi, i)
            if i < j:
                first_ack.update(dict.fromkeys(pending[i:j], t))
                del pending[i:j]
        lost: dict[int, float] = {}
        for t, number in sorted(self.losses):
            lost.setdefault(number, t - start)
        # limits that bound the data were sent by its receiver
        limits = sorted((t - start, s, m) for t, sent, s, m in self.limits if sent != own)
        return StreamTimeline(
            own_sends=own,
            stream_id=stream,
            frames=frames,
            acked_at=[first_ack.get(n) for *_, n in frames],
            lost_at=[lost.get(n) for *_, n in frames],
            max_data=[(t, m) for t, s, m in limits if s == -1],
            max_stream_data=[(t, m) for t, s, m in limits if s == stream],
            other_streams=len(per_stream) - 1,
            losses_here=own,
        )


__all__ = ["StreamColumns", "StreamTimeline"]
