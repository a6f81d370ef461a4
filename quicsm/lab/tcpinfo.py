"""Linux's ``struct tcp_info`` (``getsockopt(TCP_INFO)``) and BBR's ``struct tcp_bbr_info``
(``getsockopt(TCP_CC_INFO)``), parsed from bytes (no socket here).

The layout is the kernel's user-space ABI, ``include/uapi/linux/tcp.h`` (``struct tcp_info``;
fields are only ever appended, so a longer answer from a newer kernel parses the same, and a
shorter one from an older kernel is an error naming what is missing). Offsets below are in
bytes; ``tests/test_lab_tcpinfo.py`` checks them against ``ctypes``' layout of the same
declaration and against the running kernel (the size it returns, and values it must hold on
a live connection, compared with ``ss -ti``'s reading of the same socket).
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass

from quicsm.core.errors import LabError

#: <netinet/tcp.h>
TCP_INFO = 11
TCP_CONGESTION = 13
TCP_CC_INFO = 26

#: ``enum tcp_ca_state`` (include/uapi/linux/tcp.h)
CA_OPEN, CA_DISORDER, CA_CWR, CA_RECOVERY, CA_LOSS = range(5)
CA_STATE_NAMES = ("open", "disorder", "cwr", "recovery", "loss")


class TcpInfoLayout(ctypes.Structure):
    """``struct tcp_info`` up to ``tcpi_snd_wnd`` (Linux 5.4 and later), as declared."""

    _fields_ = [  # noqa: RUF012 (ctypes' own declaration form)
        ("tcpi_state", ctypes.c_uint8),
        ("tcpi_ca_state", ctypes.c_uint8),
        ("tcpi_retransmits", ctypes.c_uint8),
        ("tcpi_probes", ctypes.c_uint8),
        ("tcpi_backoff", ctypes.c_uint8),
        ("tcpi_options", ctypes.c_uint8),
        ("tcpi_wscale", ctypes.c_uint8),  # snd_wscale:4, rcv_wscale:4
        ("tcpi_flags", ctypes.c_uint8),  # delivery_rate_app_limited:1, fastopen_client_fail:2
        ("tcpi_rto", ctypes.c_uint32),
        ("tcpi_ato", ctypes.c_uint32),
        ("tcpi_snd_mss", ctypes.c_uint32),
        ("tcpi_rcv_mss", ctypes.c_uint32),
        ("tcpi_unacked", ctypes.c_uint32),
        ("tcpi_sacked", ctypes.c_uint32),
        ("tcpi_lost", ctypes.c_uint32),
        ("tcpi_retrans", ctypes.c_uint32),
        ("tcpi_fackets", ctypes.c_uint32),
        ("tcpi_last_data_sent", ctypes.c_uint32),
        ("tcpi_last_ack_sent", ctypes.c_uint32),
        ("tcpi_last_data_recv", ctypes.c_uint32),
        ("tcpi_last_ack_recv", ctypes.c_uint32),
        ("tcpi_pmtu", ctypes.c_uint32),
        ("tcpi_rcv_ssthresh", ctypes.c_uint32),
        ("tcpi_rtt", ctypes.c_uint32),
        ("tcpi_rttvar", ctypes.c_uint32),
        ("tcpi_snd_ssthresh", ctypes.c_uint32),
        ("tcpi_snd_cwnd", ctypes.c_uint32),
        ("tcpi_advmss", ctypes.c_uint32),
        ("tcpi_reordering", ctypes.c_uint32),
        ("tcpi_rcv_rtt", ctypes.c_uint32),
        ("tcpi_rcv_space", ctypes.c_uint32),
        ("tcpi_total_retrans", ctypes.c_uint32),
        ("tcpi_pacing_rate", ctypes.c_uint64),
        ("tcpi_max_pacing_rate", ctypes.c_uint64),
        ("tcpi_bytes_acked", ctypes.c_uint64),
        ("tcpi_bytes_received", ctypes.c_uint64),
        ("tcpi_segs_out", ctypes.c_uint32),
        ("tcpi_segs_in", ctypes.c_uint32),
        ("tcpi_notsent_bytes", ctypes.c_uint32),
        ("tcpi_min_rtt", ctypes.c_uint32),
        ("tcpi_data_segs_in", ctypes.c_uint32),
        ("tcpi_data_segs_out", ctypes.c_uint32),
        ("tcpi_delivery_rate", ctypes.c_uint64),
        ("tcpi_busy_time", ctypes.c_uint64),
        ("tcpi_rwnd_limited", ctypes.c_uint64),
        ("tcpi_sndbuf_limited", ctypes.c_uint64),
        ("tcpi_delivered", ctypes.c_uint32),
        ("tcpi_delivered_ce", ctypes.c_uint32),
        ("tcpi_bytes_sent", ctypes.c_uint64),
        ("tcpi_bytes_retrans", ctypes.c_uint64),
        ("tcpi_dsack_dups", ctypes.c_uint32),
        ("tcpi_reord_seen", ctypes.c_uint32),
        ("tcpi_rcv_ooopack", ctypes.c_uint32),
        ("tcpi_snd_wnd", ctypes.c_uint32),
    ]


#: the fields quicsm reads, as (name, struct format, offset in bytes)
FIELDS: tuple[tuple[str, str, int], ...] = (
    ("state", "B", 0),
    ("ca_state", "B", 1),
    ("retransmits", "B", 2),
    ("probes", "B", 3),
    ("backoff", "B", 4),
    ("flags", "B", 7),
    ("rto_us", "I", 8),
    ("snd_mss", "I", 16),
    ("unacked", "I", 24),
    ("sacked", "I", 28),
    ("lost", "I", 32),
    ("retrans", "I", 36),
    ("last_ack_recv_ms", "I", 56),
    ("pmtu", "I", 60),
    ("rtt_us", "I", 68),
    ("rttvar_us", "I", 72),
    ("snd_ssthresh", "I", 76),
    ("snd_cwnd", "I", 80),
    ("reordering", "I", 88),
    ("total_retrans", "I", 100),
    ("pacing_rate", "Q", 104),
    ("bytes_acked", "Q", 120),
    ("bytes_received", "Q", 128),
    ("segs_out", "I", 136),
    ("notsent_bytes", "I", 144),
    ("min_rtt_us", "I", 148),
    ("data_segs_out", "I", 156),
    ("delivery_rate", "Q", 160),
    ("busy_time_us", "Q", 168),
    ("rwnd_limited_us", "Q", 176),
    ("sndbuf_limited_us", "Q", 184),
    ("delivered", "I", 192),
    ("bytes_sent", "Q", 200),
    ("bytes_retrans", "Q", 208),
    ("snd_wnd", "I", 228),
)
#: bytes of ``struct tcp_info`` quicsm needs (through ``tcpi_snd_wnd``, Linux 5.4)
TCP_INFO_SIZE = 232
_OFFSETS = tuple(offset for _, _, offset in FIELDS)
_FORMATS = tuple(struct.Struct("<" + fmt) for _, fmt, _ in FIELDS)
#: bytes to ask the kernel for (more than it has: it answers with its own size)
TCP_INFO_BUFFER = 512


@dataclass(frozen=True, slots=True)
class TcpInfo:
    """One ``TCP_INFO`` sample (units as the kernel gives them: µs, bytes/s, segments)."""

    state: int
    ca_state: int
    retransmits: int
    probes: int
    backoff: int
    flags: int
    rto_us: int
    snd_mss: int
    unacked: int
    sacked: int
    lost: int
    retrans: int
    last_ack_recv_ms: int
    pmtu: int
    rtt_us: int
    rttvar_us: int
    snd_ssthresh: int
    snd_cwnd: int
    reordering: int
    total_retrans: int
    pacing_rate: int
    bytes_acked: int
    bytes_received: int
    segs_out: int
    notsent_bytes: int
    min_rtt_us: int
    data_segs_out: int
    delivery_rate: int
    busy_time_us: int
    rwnd_limited_us: int
    sndbuf_limited_us: int
    delivered: int
    bytes_sent: int
    bytes_retrans: int
    snd_wnd: int

    @property
    def app_limited(self) -> bool:
        """``tcpi_delivery_rate_app_limited``: the last rate sample was application-limited."""
        return bool(self.flags & 1)

    @property
    def packets_in_flight(self) -> int:
        """``tcp_packets_in_flight()`` (include/net/tcp.h): out - (sacked + lost) + retrans."""
        return max(0, self.unacked - (self.sacked + self.lost) + self.retrans)

    @property
    def bytes_in_flight(self) -> int:
        return self.packets_in_flight * self.snd_mss

    @property
    def cwnd_bytes(self) -> int:
        return self.snd_cwnd * self.snd_mss


def parse_tcp_info(data: bytes, *, where: str = "TCP_INFO") -> TcpInfo:
    """Parse the bytes ``getsockopt(TCP_INFO)`` returned; shorter than needed is an error."""
    if len(data) < TCP_INFO_SIZE:
        raise LabError(
            f"{where}: the kernel returned {len(data)} bytes of struct tcp_info, quicsm needs "
            f"{TCP_INFO_SIZE} (tcpi_snd_wnd, Linux 5.4 or later)"
        )
    values = [fmt.unpack_from(data, off)[0] for fmt, off in zip(_FORMATS, _OFFSETS, strict=True)]
    return TcpInfo(*values)


#: ``struct tcp_bbr_info`` (include/uapi/linux/inet_diag.h): bw_lo, bw_hi, min_rtt (µs),
#: pacing_gain and cwnd_gain (both in units of BBR_UNIT = 256)
_BBR_INFO = struct.Struct("<5I")
BBR_UNIT = 256


@dataclass(frozen=True, slots=True)
class BbrInfo:
    bw_bytes_per_s: int
    min_rtt_us: int
    pacing_gain: int
    cwnd_gain: int


def parse_bbr_info(data: bytes) -> BbrInfo | None:
    """``getsockopt(TCP_CC_INFO)`` of a BBR socket; None when the answer is not BBR's."""
    if len(data) < _BBR_INFO.size:
        return None
    bw_lo, bw_hi, min_rtt, pacing_gain, cwnd_gain = _BBR_INFO.unpack_from(data)
    return BbrInfo(
        bw_bytes_per_s=(bw_hi << 32) | bw_lo,
        min_rtt_us=min_rtt,
        pacing_gain=pacing_gain,
        cwnd_gain=cwnd_gain,
    )
