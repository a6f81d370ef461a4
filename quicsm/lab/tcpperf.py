"""The kernel's TCP as a lab stack: a bulk sender and a receiver that log qlog.

``python -m quicsm.lab.tcpperf server --listen HOST:PORT --qlog-dir DIR`` and ``... client
--connect HOST:PORT --objects N --object-size BYTES --qlog-dir DIR`` speak the command line of
every lab program (:mod:`quicsm.lab.stacks`). The congestion controller comes from
``QUICSM_CC`` (``reno``, ``cubic``, ``bbr``: any name in
``net.ipv4.tcp_available_congestion_control``) and is set per socket with ``TCP_CONGESTION``.

The client asks for ``objects`` objects one after another on one connection (a request is one
line, ``GET <bytes>``); the server sends them. While it sends, the server samples the socket's
``TCP_INFO`` (and BBR's ``TCP_CC_INFO``) every ``QUICSM_TCP_SAMPLE_US`` microseconds (default
200) and writes JSON-SEQ qlog (:mod:`quicsm.lab.tcpqlog`): a ``congestion_state_updated``
whenever the state of :class:`~quicsm.lab.tcpstates.KernelStateMapper` changes, a
``metrics_updated`` whenever the window, threshold, RTT or bytes in flight change. At the
end it records the network namespace's own counters of the episodes the sampling should
have seen (``TcpExt`` fast-recovery entries, RTOs, tail loss probes; the sender is the only
TCP connection of its namespace in the lab), so a run shows whether the sampling missed any.
The client prints the lab's JSON result line (``{"ok", "bytes", "completion_ms"}``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from quicsm.core.errors import LabError
from quicsm.lab.tcpinfo import (
    TCP_CC_INFO,
    TCP_CONGESTION,
    TCP_INFO,
    TCP_INFO_BUFFER,
    parse_bbr_info,
    parse_tcp_info,
)
from quicsm.lab.tcpqlog import QlogWriter
from quicsm.lab.tcpstates import KernelStateMapper

CC_ENV = "QUICSM_CC"
SAMPLE_ENV = "QUICSM_TCP_SAMPLE_US"
DEFAULT_SAMPLE_US = 200
_CHUNK = 64 * 1024
#: the sender's socket buffer: every object fits, so the kernel always has data queued and the
#: sender is never limited by this program's own pace (SO_SNDBUFFORCE passes wmem_max as root)
SNDBUF_BYTES = 16 * 1024 * 1024
_SO_SNDBUFFORCE = 32
#: TcpExt counters of /proc/net/netstat that count the episodes sampling should see
NETSTAT_COUNTERS = (
    "TCPSackRecovery",
    "TCPRenoRecovery",
    "TCPTimeouts",
    "TCPLossProbes",
    "TCPLossProbeRecovery",
    "TCPSpuriousRTOs",
)


def read_netstat(path: str = "/proc/net/netstat") -> dict[str, int]:
    """The namespace's TcpExt counters (name -> value)."""
    lines = Path(path).read_text().splitlines()
    out: dict[str, int] = {}
    for head, values in zip(lines[::2], lines[1::2], strict=False):
        names, nums = head.split(), values.split()
        if names and names[0] == "TcpExt:":
            out.update({n: int(v) for n, v in zip(names[1:], nums[1:], strict=False)})
    return out


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise LabError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def set_congestion(sock: socket.socket, cc: str) -> None:
    try:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, cc.encode())
    except OSError as exc:
        raise LabError(
            f"{CC_ENV}={cc}: the kernel refused this congestion controller ({exc}); "
            "see sysctl net.ipv4.tcp_available_congestion_control"
        ) from None


def _sample(
    sock: socket.socket, writer: QlogWriter, mapper: KernelStateMapper, *, bbr: bool
) -> None:
    info = parse_tcp_info(sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, TCP_INFO_BUFFER))
    cc_info = parse_bbr_info(sock.getsockopt(socket.IPPROTO_TCP, TCP_CC_INFO, 64)) if bbr else None
    writer.sample(time.time() * 1e3, info, mapper.decide(info, cc_info))


def _send_objects(
    conn: socket.socket, writer: QlogWriter, *, cc: str, sample_s: float
) -> dict[str, Any]:
    """Serve one connection's requests while sampling it; returns counters for the log."""
    mapper = KernelStateMapper()
    bbr = cc == "bbr"
    done = threading.Event()
    error: list[BaseException] = []
    served: dict[str, Any] = {"objects": 0, "bytes": 0}

    def serve() -> None:
        try:
            reader = conn.makefile("rb")
            payload = bytes(_CHUNK)
            while True:
                line = reader.readline()
                if not line:
                    break
                parts = line.split()
                if len(parts) != 2 or parts[0] != b"GET" or not parts[1].isdigit():
                    raise LabError(f"bad request {line[:40]!r}")
                left = int(parts[1])
                while left > 0:
                    n = min(left, _CHUNK)
                    conn.sendall(payload[:n])
                    left -= n
                served["objects"] += 1
                served["bytes"] += int(parts[1])
        except (OSError, LabError) as exc:
            error.append(exc)
        finally:
            done.set()

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    while not done.is_set():
        _sample(conn, writer, mapper, bbr=bbr)
        done.wait(sample_s)
    _sample(conn, writer, mapper, bbr=bbr)
    worker.join()
    if error:
        served["error"] = str(error[0])
    return served


def server(args: argparse.Namespace) -> int:
    cc = os.environ.get(CC_ENV, "cubic")
    sample_s = int(os.environ.get(SAMPLE_ENV, DEFAULT_SAMPLE_US)) / 1e6
    qlog_dir = Path(args.qlog_dir)
    qlog_dir.mkdir(parents=True, exist_ok=True)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    set_congestion(listener, cc)
    listener.bind(_address(args.listen))
    listener.listen(8)
    stop = False

    def _on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True
        listener.close()

    signal.signal(signal.SIGTERM, _on_signal)
    print("ready", flush=True)
    n = 0
    while not stop:
        try:
            conn, peer = listener.accept()
        except OSError:
            break
        n += 1
        before = read_netstat()
        with (
            conn,
            QlogWriter(
                qlog_dir / f"server-{n}.sqlog",
                vantage="server",
                cc=cc,
                title=f"linux-tcp {cc} to {peer[0]}:{peer[1]}",
            ) as writer,
        ):
            set_congestion(conn, cc)
            try:
                conn.setsockopt(socket.SOL_SOCKET, _SO_SNDBUFFORCE, SNDBUF_BYTES)
            except OSError:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SNDBUF_BYTES)
            served = _send_objects(conn, writer, cc=cc, sample_s=sample_s)
            conn.shutdown(socket.SHUT_WR)
            after = read_netstat()
            kernel = {k: after.get(k, 0) - before.get(k, 0) for k in NETSTAT_COUNTERS}
            writer.summary({**served, "kernel_counters": kernel})
        print(json.dumps({"connection": n, **served}), file=sys.stderr, flush=True)
    return 0


def client(args: argparse.Namespace) -> int:
    qlog_dir = Path(args.qlog_dir)
    qlog_dir.mkdir(parents=True, exist_ok=True)
    cc = os.environ.get(CC_ENV, "cubic")
    total = 0
    start = time.monotonic()
    result: dict[str, Any]
    try:
        with (
            socket.create_connection(_address(args.connect), timeout=30) as sock,
            QlogWriter(
                qlog_dir / "client.sqlog", vantage="client", cc=cc, title="linux-tcp receiver"
            ) as writer,
        ):
            buf = bytearray(1 << 20)
            for _ in range(args.objects):
                sock.sendall(f"GET {args.object_size}\n".encode())
                left = args.object_size
                while left > 0:
                    got = sock.recv_into(buf, min(left, len(buf)))
                    if got == 0:
                        raise LabError(f"server closed with {left} bytes of an object missing")
                    left -= got
                    total += got
            completion_ms = (time.monotonic() - start) * 1e3
            writer.summary({"bytes": total, "completion_ms": completion_ms})
        result = {"ok": True, "bytes": total, "completion_ms": round(completion_ms, 3)}
    except (OSError, LabError) as exc:
        result = {"ok": False, "bytes": total, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m quicsm.lab.tcpperf", description=__doc__)
    sub = ap.add_subparsers(dest="role", required=True)
    s = sub.add_parser("server")
    s.add_argument("--listen", required=True)
    s.add_argument("--qlog-dir", required=True)
    c = sub.add_parser("client")
    c.add_argument("--connect", required=True)
    c.add_argument("--objects", type=int, default=1)
    c.add_argument("--object-size", type=int, required=True)
    c.add_argument("--parallel", type=int, default=1, help="accepted; objects go one at a time")
    c.add_argument("--qlog-dir", required=True)
    args = ap.parse_args(argv)
    try:
        return server(args) if args.role == "server" else client(args)
    except LabError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
