"""quicsm lab program for aioquic: an HTTP/3 server answering ``GET /<n>`` with n bytes, and a
client fetching a page of objects and printing one JSON line.

    python lab.py server --listen HOST:PORT --qlog-dir DIR
    python lab.py client --connect HOST:PORT --objects N --object-size BYTES --qlog-dir DIR \
        [--parallel P] [--read-mbit R --read-interval-ms I]

With ``--read-mbit`` the client is a slow receiving application (the lab's phone profile): it
reads the responses in bursts, every I ms as much as R Mbit/s allows since the first burst, and
its flow-control credit follows what it has read (``PacedCredit``), as quic-go's does: a window
of READ_STREAM_WINDOW per stream and READ_CONNECTION_WINDOW per connection beyond the bytes
read. aioquic itself raises its limits as data arrives, read or not, so the client replaces
that rule on its own connection.

Runs in the virtualenv that ``build.sh`` installs the patched aioquic into. The certificate is a
throw-away self-signed one made at start-up; nothing is written but the qlog files.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import signal
import socket
import sys
import time
from typing import Any

from aioquic.asyncio import QuicConnectionProtocol, connect, serve
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ProtocolNegotiated, QuicEvent
from aioquic.quic.logger import QuicFileLogger
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# Flow-control windows large enough that the receiver does not cap the sender on the lab's
# links (aioquic's defaults are 1 MB, which would make every long transfer receiver-limited).
FLOW_WINDOW = 32 * 1024 * 1024
SEND_BACKLOG = 4 * 1024 * 1024
SOCKET_BUFFER = 4 * 1024 * 1024
# A paced reader's receive windows beyond the bytes it has read: quic-go's initial stream and
# connection windows (512 KB, 768 KB), which quic-go's auto-tuning keeps for a slow reader.
READ_STREAM_WINDOW = 512 * 1024
READ_CONNECTION_WINDOW = 768 * 1024
CHUNK = bytes((ord("a") + i % 26) for i in range(64 * 1024))


def host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def grow_socket_buffers(transport: asyncio.BaseTransport) -> None:
    """Ask for 4 MB UDP buffers, as quic-go does for itself: with the kernel's default ~200 kB a
    Python receiver that falls behind for a moment loses datagrams in its own socket buffer, which
    the sender would take for network loss. SO_RCVBUFFORCE works as root; otherwise the kernel
    clamps the request to net.core.rmem_max."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return
    for option, forced in (
        (socket.SO_RCVBUF, getattr(socket, "SO_RCVBUFFORCE", None)),
        (socket.SO_SNDBUF, getattr(socket, "SO_SNDBUFFORCE", None)),
    ):
        try:
            sock.setsockopt(socket.SOL_SOCKET, forced or option, SOCKET_BUFFER)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER)


def configuration(
    *, is_client: bool, qlog_dir: str, cc: str, paced: bool = False
) -> QuicConfiguration:
    os.makedirs(qlog_dir, exist_ok=True)
    config = QuicConfiguration(
        is_client=is_client,
        alpn_protocols=H3_ALPN,
        quic_logger=QuicFileLogger(qlog_dir),
        congestion_control_algorithm=cc,
        max_data=READ_CONNECTION_WINDOW if paced else FLOW_WINDOW,
        max_stream_data=READ_STREAM_WINDOW if paced else FLOW_WINDOW,
        idle_timeout=30.0,
    )
    if not is_client:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "quicsm-lab")])
        now = datetime.datetime.now(datetime.UTC)
        config.certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256())
        )
        config.private_key = key
    else:
        config.verify_mode = 0  # ssl.CERT_NONE: the lab certificate is self-signed
    return config


# ---------------------------------------------------------------- server


class ObjectServer(QuicConnectionProtocol):
    live: set[ObjectServer] = set()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._http: H3Connection | None = None
        self._remaining: dict[int, int] = {}  # stream id -> response bytes not yet queued
        ObjectServer.live.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        ObjectServer.live.discard(self)
        super().connection_lost(exc)

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, ProtocolNegotiated) and event.alpn_protocol in H3_ALPN:
            self._http = H3Connection(self._quic)
        if self._http is not None:
            for h3_event in self._http.handle_event(event):
                self._on_http(h3_event)

    def _on_http(self, event: H3Event) -> None:
        if not isinstance(event, HeadersReceived) or self._http is None:
            return
        headers = dict(event.headers)
        path = headers.get(b":path", b"/").decode()[1:]
        if headers.get(b":method") != b"GET" or not path.isdigit():
            self._http.send_headers(event.stream_id, [(b":status", b"400")], end_stream=True)
        else:
            size = int(path)
            self._http.send_headers(
                event.stream_id,
                [(b":status", b"200"), (b"content-length", str(size).encode())],
                end_stream=size == 0,
            )
            if size:
                self._remaining[event.stream_id] = size
                self._pump()
        self.transmit()

    def datagram_received(self, data: bytes | str, addr: Any) -> None:
        super().datagram_received(data, addr)
        if self._remaining:
            self._pump()
            self.transmit()

    def _pump(self) -> None:
        """Queue response bytes so that at most SEND_BACKLOG wait unsent per stream.

        aioquic has no "writable" signal; topping up on every received datagram (ACKs) keeps
        memory bounded for large objects without ever starving the congestion controller.
        """
        assert self._http is not None
        for stream_id, remaining in list(self._remaining.items()):
            stream = self._quic._streams.get(stream_id)
            if stream is None:  # reset by the peer
                del self._remaining[stream_id]
                continue
            backlog = stream.sender._buffer_stop - stream.sender.next_offset
            while remaining > 0 and backlog < SEND_BACKLOG:
                n = min(remaining, len(CHUNK))
                remaining -= n
                backlog += n
                self._http.send_data(stream_id, CHUNK[:n], end_stream=remaining == 0)
            if remaining:
                self._remaining[stream_id] = remaining
            else:
                del self._remaining[stream_id]


async def run_server(args: argparse.Namespace) -> None:
    host, port = args.listen
    config = configuration(is_client=False, qlog_dir=args.qlog_dir, cc=args.congestion_control)
    server = await serve(host, port, configuration=config, create_protocol=ObjectServer)
    if server._transport is not None:
        grow_socket_buffers(server._transport)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print("ready", flush=True)
    await stop.wait()
    # Close live connections so that their qlog traces are written before exiting.
    live = list(ObjectServer.live)
    for proto in live:
        proto.close()
    if live:
        await asyncio.wait([asyncio.ensure_future(p.wait_closed()) for p in live], timeout=2.0)
    server.close()


# ---------------------------------------------------------------- client


class PacedCredit:
    """The slow receiving application of one client connection: reads in bursts at a mean rate
    and grants flow-control credit only beyond what it has read."""

    def __init__(self, proto: ObjectClient, *, bytes_per_s: float, every_s: float) -> None:
        self.proto = proto
        self.bytes_per_s = bytes_per_s
        self.every_s = every_s
        self.read_total = 0
        quic = proto._quic
        # aioquic doubles a limit once half of it has arrived; this reader's credit replaces
        # that rule: the originals run with the arrived counts hidden, so they only send
        # the limits set in grant()
        write_conn, write_stream = quic._write_connection_limits, quic._write_stream_limits

        def conn_limits(builder: Any, space: Any) -> None:
            limit = quic._local_max_data
            used, limit.used = limit.used, 0
            try:
                write_conn(builder, space)
            finally:
                limit.used = used

        def stream_limits(builder: Any, space: Any, stream: Any) -> None:
            receiver = stream.receiver
            highest, receiver.highest_offset = receiver.highest_offset, 0
            try:
                write_stream(builder, space, stream)
            finally:
                receiver.highest_offset = highest

        quic._write_connection_limits = conn_limits  # type: ignore[method-assign]
        quic._write_stream_limits = stream_limits  # type: ignore[method-assign]

    async def run(self) -> None:
        start = time.monotonic()
        tick = 0
        while True:
            tick += 1
            await asyncio.sleep(max(0.0, start + tick * self.every_s - time.monotonic()))
            budget = int(self.bytes_per_s * tick * self.every_s) - self.read_total
            for stream_id, (_, state) in list(self.proto._pending.items()):
                take = min(budget, state[1] - state[2])  # arrived, not yet read
                if take > 0:
                    state[2] += take
                    budget -= take
                    self.read_total += take
                self.proto._maybe_done(stream_id)
            self.grant()

    def grant(self) -> None:
        quic = self.proto._quic
        conn = quic._local_max_data
        want = self.read_total + READ_CONNECTION_WINDOW
        if want - conn.value >= READ_CONNECTION_WINDOW // 4:
            conn.value = want
        for stream_id, (_, state) in self.proto._pending.items():
            stream = quic._streams.get(stream_id)
            if stream is None:
                continue
            want = state[2] + READ_STREAM_WINDOW
            if want - stream.max_stream_data_local >= READ_STREAM_WINDOW // 4:
                stream.max_stream_data_local = want
        self.proto.transmit()


class ObjectClient(QuicConnectionProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._http = H3Connection(self._quic)
        # stream id -> (future, [status, bytes arrived, bytes read, ended])
        self._pending: dict[int, tuple[asyncio.Future[tuple[int, int]], list[int]]] = {}
        self.paced = False  # a PacedCredit reads for the application

    def quic_event_received(self, event: QuicEvent) -> None:
        for h3_event in self._http.handle_event(event):
            stream_id = getattr(h3_event, "stream_id", -1)
            entry = self._pending.get(stream_id)
            if entry is None:
                continue
            _, state = entry
            if isinstance(h3_event, HeadersReceived):
                state[0] = int(dict(h3_event.headers).get(b":status", b"0"))
            elif isinstance(h3_event, DataReceived):
                state[1] += len(h3_event.data)
                if not self.paced:
                    state[2] = state[1]  # read at once
            if getattr(h3_event, "stream_ended", False):
                state[3] = 1
            self._maybe_done(stream_id)

    def _maybe_done(self, stream_id: int) -> None:
        entry = self._pending.get(stream_id)
        if entry is None:
            return
        future, state = entry
        if state[3] and state[2] == state[1] and not future.done():
            future.set_result((state[0], state[2]))
            del self._pending[stream_id]

    async def get(self, authority: str, path: str) -> tuple[int, int]:
        stream_id = self._quic.get_next_available_stream_id()
        future: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()
        self._pending[stream_id] = (future, [0, 0, 0, 0])
        self._http.send_headers(
            stream_id,
            [
                (b":method", b"GET"),
                (b":scheme", b"https"),
                (b":authority", authority.encode()),
                (b":path", path.encode()),
            ],
            end_stream=True,
        )
        self.transmit()
        return await future


async def fetch_page(args: argparse.Namespace) -> tuple[int, str | None]:
    host, port = args.connect
    paced = args.read_mbit > 0
    config = configuration(
        is_client=True, qlog_dir=args.qlog_dir, cc=args.congestion_control, paced=paced
    )
    total = 0
    async with connect(
        host, port, configuration=config, create_protocol=ObjectClient, wait_connected=False
    ) as proto:
        assert isinstance(proto, ObjectClient) and proto._transport is not None
        grow_socket_buffers(proto._transport)
        reader: asyncio.Task[None] | None = None
        if paced:
            proto.paced = True
            credit = PacedCredit(
                proto, bytes_per_s=args.read_mbit * 1e6 / 8, every_s=args.read_interval_ms / 1e3
            )
        proto.transmit()  # the Initial packet, held back until the buffers were set
        await proto.wait_connected()
        if paced:
            reader = asyncio.get_running_loop().create_task(credit.run())
        limit = asyncio.Semaphore(args.parallel)
        authority = f"{host}:{port}"

        async def one() -> None:
            nonlocal total
            async with limit:
                status, n = await proto.get(authority, f"/{args.object_size}")
            total += n
            if status != 200 or n != args.object_size:
                raise RuntimeError(f"GET /{args.object_size}: status {status}, {n} bytes")

        try:
            await asyncio.gather(*(one() for _ in range(args.objects)))
        finally:
            if reader is not None:
                reader.cancel()
    return total, None


async def run_client(args: argparse.Namespace) -> None:
    start = time.perf_counter()
    total, error = 0, None
    try:
        total, error = await asyncio.wait_for(fetch_page(args), timeout=args.timeout)
    except Exception as exc:  # reported in the JSON line, not raised
        error = f"{type(exc).__name__}: {exc}"
    elapsed_ms = (time.perf_counter() - start) * 1000
    result = {
        "ok": error is None,
        "bytes": total,
        "completion_ms": round(elapsed_ms, 3),
        "error": error,
    }
    print(json.dumps(result), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lab.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="role", required=True)
    srv = sub.add_parser("server")
    srv.add_argument("--listen", type=host_port, required=True)
    cli = sub.add_parser("client")
    cli.add_argument("--connect", type=host_port, required=True)
    cli.add_argument("--objects", type=int, default=1)
    cli.add_argument("--object-size", type=int, default=1 << 20)
    cli.add_argument("--parallel", type=int, default=1)
    cli.add_argument("--timeout", type=float, default=120.0)
    cli.add_argument("--read-mbit", type=float, default=0.0,
                     help="read the responses at most this fast, Mbit/s (0: at once)")
    cli.add_argument("--read-interval-ms", type=float, default=20.0,
                     help="with --read-mbit: read a burst this often, ms")
    for p in (srv, cli):
        p.add_argument("--qlog-dir", required=True)
        # the lab selects the sender's controller with QUICSM_CC, as for the other stacks
        p.add_argument("--congestion-control", default=os.environ.get("QUICSM_CC", "cubic"),
                       choices=["cubic", "reno"])
    args = parser.parse_args(argv)
    if args.congestion_control not in ("cubic", "reno"):
        parser.error(f"QUICSM_CC: unknown congestion controller {args.congestion_control!r}"
                     " (cubic, reno)")
    if args.role == "client" and (args.objects < 1 or args.parallel < 1 or args.object_size < 0):
        parser.error("--objects and --parallel must be >= 1 and --object-size >= 0")
    if args.role == "client" and (args.read_mbit < 0 or args.read_interval_ms <= 0):
        parser.error("--read-mbit must be >= 0 and --read-interval-ms > 0")
    asyncio.run(run_server(args) if args.role == "server" else run_client(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
