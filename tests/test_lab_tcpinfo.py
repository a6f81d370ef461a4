"""struct tcp_info as quicsm parses it: offsets against ctypes' layout and the running kernel."""

from __future__ import annotations

import ctypes
import re
import shutil
import socket
import struct
import subprocess
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quicsm.core.errors import LabError
from quicsm.lab.tcpinfo import (
    FIELDS,
    TCP_CONGESTION,
    TCP_INFO,
    TCP_INFO_BUFFER,
    TCP_INFO_SIZE,
    TcpInfoLayout,
    parse_bbr_info,
    parse_tcp_info,
)

#: quicsm's names for the kernel's fields where they differ beyond the ``tcpi_`` prefix
_KERNEL_NAME = {
    "rto_us": "tcpi_rto",
    "rtt_us": "tcpi_rtt",
    "rttvar_us": "tcpi_rttvar",
    "min_rtt_us": "tcpi_min_rtt",
    "busy_time_us": "tcpi_busy_time",
    "rwnd_limited_us": "tcpi_rwnd_limited",
    "sndbuf_limited_us": "tcpi_sndbuf_limited",
    "last_ack_recv_ms": "tcpi_last_ack_recv",
    "flags": "tcpi_flags",
}


def test_offsets_match_the_declared_layout() -> None:
    assert ctypes.sizeof(TcpInfoLayout) == TCP_INFO_SIZE
    for name, fmt, offset in FIELDS:
        kernel = _KERNEL_NAME.get(name, f"tcpi_{name}")
        field = getattr(TcpInfoLayout, kernel)
        assert field.offset == offset, name
        assert field.size == struct.calcsize(fmt), name


@given(st.binary(min_size=TCP_INFO_SIZE, max_size=TCP_INFO_BUFFER))
def test_parse_reads_each_field_where_ctypes_does(data: bytes) -> None:
    info = parse_tcp_info(data)
    layout = TcpInfoLayout.from_buffer_copy(data[:TCP_INFO_SIZE])
    for name, _, _ in FIELDS:
        assert getattr(info, name) == getattr(layout, _KERNEL_NAME.get(name, f"tcpi_{name}"))


@given(st.binary(max_size=TCP_INFO_SIZE - 1))
def test_short_answer_is_an_error_naming_the_size(data: bytes) -> None:
    with pytest.raises(LabError, match=f"returned {len(data)} bytes of struct tcp_info"):
        parse_tcp_info(data)


def test_bbr_info_needs_its_five_words() -> None:
    assert parse_bbr_info(b"") is None
    bbr = parse_bbr_info(struct.pack("<5I", 5, 1, 36000, 739, 739))
    assert bbr is not None
    assert (bbr.bw_bytes_per_s, bbr.min_rtt_us, bbr.pacing_gain) == ((1 << 32) | 5, 36000, 739)


def _ss_fields(port: int) -> dict[str, str]:
    out = subprocess.run(
        ["ss", "-tinH", "state", "established", f"( sport = :{port} )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(re.findall(r"\b([a-z_]+):(\S+)", out))


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs iproute2's ss")
def test_fields_against_the_running_kernel() -> None:
    """A loopback connection: the kernel's answer is long enough, and what quicsm parses is
    what it must be (sizes sent) and what ``ss -ti`` reads from the same socket."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    size = 3_000_000
    received = bytearray()
    read = threading.Event()

    def sink() -> None:
        conn, _ = listener.accept()
        with conn:
            while len(received) < size:
                chunk = conn.recv(1 << 20)
                if not chunk:
                    break
                received.extend(chunk)
            conn.sendall(b"k")  # all read: the sender's bytes are acknowledged
            read.wait(30)  # stay established while the sender's socket is read

    t = threading.Thread(target=sink)
    t.start()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, b"reno")
        sock.sendall(bytes(size))
        assert sock.recv(1) == b"k"
        raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, TCP_INFO_BUFFER)
        assert len(raw) >= TCP_INFO_SIZE  # the kernel's struct is at least what quicsm reads
        info = parse_tcp_info(raw)
        ss = _ss_fields(sock.getsockname()[1])
        again = parse_tcp_info(sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, TCP_INFO_BUFFER))
        read.set()
    t.join()
    listener.close()
    assert info.state == 1  # TCP_ESTABLISHED
    assert info.ca_state == 0  # Open: nothing lost on loopback
    # bytes_sent counts retransmissions too (a loaded machine's loopback sees a few probes)
    assert info.bytes_sent == size + info.bytes_retrans and info.bytes_acked == size + 1  # + SYN
    assert info.bytes_received == 1
    assert info.pmtu >= 65535 and 0 < info.snd_mss <= info.pmtu - 40  # loopback: 64 KiB
    assert info.unacked == 0 and info.bytes_in_flight == 0
    assert info.snd_cwnd >= 10 and info.rtt_us > 0 and info.min_rtt_us > 0
    assert info.data_segs_out >= size // info.snd_mss and info.delivery_rate > 0
    # the same socket through the kernel's other interface (INET_DIAG, as ss reads it)
    assert int(ss["bytes_sent"]) == info.bytes_sent
    assert int(ss["bytes_acked"]) == info.bytes_acked
    assert int(ss["cwnd"]) == info.snd_cwnd == again.snd_cwnd
    assert int(ss["mss"]) == info.snd_mss
    assert int(ss["pmtu"]) == info.pmtu
    assert int(ss["data_segs_out"]) == info.data_segs_out
