"""The userspace UDP impairment relay.

Clients send to the relay's listening address; for every client address the relay opens its own
socket towards the target (so replies find their way back, like a NAT) and forwards each
datagram through a :class:`~quicsm.lab.link.Link`: ``up`` for client -> server, ``down`` for
server -> client. One thread, non-blocking sockets, ``select`` with a timeout equal to the next
delivery time; packets are read in batches and leave in delivery-time order.

Run it standalone with ``quicsm lab relay`` or ``python -m quicsm.lab.relay`` (which the lab
runner uses: it prints ``ready HOST:PORT`` once listening and writes its counters as JSON on
SIGTERM/SIGINT).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quicsm.core.errors import LabError
from quicsm.lab.link import Link, LinkConfig, link_config_from_dict

Address = tuple[str, int]

#: datagrams read from one socket before the relay looks at its timers again
_BATCH = 64
#: socket buffer size requested (the kernel may cap it at net.core.{r,w}mem_max)
_SOCKET_BUFFER_BYTES = 4 * 1024 * 1024
_MAX_DATAGRAM = 65535


@dataclass(frozen=True, kw_only=True)
class RelayConfig:
    """Where to listen, where to forward, and the impairments of each direction."""

    listen: Address
    target: Address
    up: LinkConfig
    down: LinkConfig
    seed: int = 0


def parse_address(text: str) -> Address:
    """``"127.0.0.1:4433"`` -> ``("127.0.0.1", 4433)``."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise LabError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def raise_priority() -> str:
    """Make this process's wake-ups prompt on a loaded machine; returns what was obtained.

    The relay needs little CPU (~15% of a core at 9k packets/s) but must run *when* a packet
    is due: on a 2-core machine shared with both QUIC endpoints, scheduling latency would
    otherwise add milliseconds of unconfigured delay. ``SCHED_FIFO`` (priority 10; the
    kernel's real-time throttling still keeps 5% for others) needs root or CAP_SYS_NICE;
    then ``nice -10``; otherwise the default policy is kept.
    """
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
        return "fifo"
    except (OSError, AttributeError):
        pass
    try:
        os.nice(-10)
        return "nice-10"
    except OSError:
        return "default"


def _udp_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
        sock.setsockopt(socket.SOL_SOCKET, opt, _SOCKET_BUFFER_BYTES)
    sock.setblocking(False)
    return sock


class Relay:
    """A bound relay; call :meth:`serve` to run it. See the module docstring."""

    def __init__(self, config: RelayConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        # the two directions draw from independent streams derived from one seed; their time
        # zero (rate schedule, outages) is the first packet the relay sees, in either direction
        self.up: Link[tuple[socket.socket, bytes]] = Link(config.up, seed=2 * config.seed)
        self.down: Link[tuple[socket.socket, Address, bytes]] = Link(
            config.down, seed=2 * config.seed + 1
        )
        self._listen = _udp_socket()
        self._listen.bind(config.listen)
        self._upstream: dict[Address, socket.socket] = {}
        self._client_of: dict[socket.socket, Address] = {}
        self.send_errors = 0
        self.scheduling = "default"

    @property
    def address(self) -> Address:
        host, port = self._listen.getsockname()[:2]
        return str(host), int(port)

    def counters(self) -> dict[str, Any]:
        """Counters of both directions plus relay-level ones, JSON-ready."""
        return {
            "up": self.up.counters.as_dict(),
            "down": self.down.counters.as_dict(),
            "clients": len(self._upstream),
            "send_errors": self.send_errors,
            "in_flight_at_stop": self.up.in_flight() + self.down.in_flight(),
            "scheduling": self.scheduling,
        }

    def _upstream_for(self, client: Address) -> socket.socket:
        sock = self._upstream.get(client)
        if sock is None:
            sock = _udp_socket()
            sock.connect(self.config.target)
            self._upstream[client] = sock
            self._client_of[sock] = client
        return sock

    def _send(self, sock: socket.socket, data: bytes, addr: Address | None) -> None:
        try:
            if addr is None:
                sock.send(data)
            else:
                sock.sendto(data, addr)
        except OSError:
            # a full socket buffer or an unreachable peer (server gone): the packet is lost
            self.send_errors += 1

    def _flush(self, now: float) -> None:
        for up_sock, data in self.up.due(now_s=now):
            self._send(up_sock, data, None)
        for listen, client, data in self.down.due(now_s=now):
            self._send(listen, data, client)

    def serve(self, *, should_stop: Callable[[], bool], poll_s: float = 0.05) -> None:
        """Relay until ``should_stop()`` is true (checked at least every ``poll_s`` seconds)."""
        listen = self._listen
        clock = self._clock
        up, down = self.up, self.down
        while not should_stop():
            now = clock()
            self._flush(now)
            nexts = [t for t in (up.next_due_s(), down.next_due_s()) if t is not None]
            timeout = min(poll_s, max(0.0, min(nexts) - clock())) if nexts else poll_s
            readable, _, _ = select.select([listen, *self._client_of], [], [], timeout)
            for sock in readable:
                for _ in range(_BATCH):
                    try:
                        data, addr = sock.recvfrom(_MAX_DATAGRAM)
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError:
                        # ICMP port unreachable reported on a connected socket: server gone
                        self.send_errors += 1
                        break
                    now = clock()
                    up.set_start(now)
                    down.set_start(now)
                    if sock is listen:
                        client = (str(addr[0]), int(addr[1]))
                        up.offer(now_s=now, size=len(data), item=(self._upstream_for(client), data))
                    else:
                        down.offer(
                            now_s=now, size=len(data), item=(listen, self._client_of[sock], data)
                        )
        self._flush(clock())

    def close(self) -> None:
        for sock in [self._listen, *self._upstream.values()]:
            sock.close()


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m quicsm.lab.relay", description=__doc__)
    ap.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT to listen on")
    ap.add_argument("--target", required=True, help="HOST:PORT to forward to")
    ap.add_argument("--config", type=Path, required=True, help='JSON {"up": {...}, "down": {...}}')
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stats", type=Path, help="write the counters here as JSON on exit")
    ap.add_argument(
        "--no-priority",
        action="store_true",
        help="keep the default scheduling policy (see raise_priority)",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m quicsm.lab.relay`` (used by the runner)."""
    args = _parse_args(argv)
    raw = json.loads(args.config.read_text())
    config = RelayConfig(
        listen=parse_address(args.listen),
        target=parse_address(args.target),
        up=link_config_from_dict(raw.get("up", {}), where=f"{args.config}: up"),
        down=link_config_from_dict(raw.get("down", {}), where=f"{args.config}: down"),
        seed=args.seed,
    )
    stop = False

    def _on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    relay = Relay(config)
    if not args.no_priority:
        relay.scheduling = raise_priority()
    host, port = relay.address
    print(f"ready {host}:{port}", flush=True)
    try:
        relay.serve(should_stop=lambda: stop)
    finally:
        relay.close()
        counters = relay.counters()
        if args.stats is not None:
            args.stats.write_text(json.dumps(counters, indent=1, sort_keys=True) + "\n")
        print(json.dumps(counters, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
