"""An IP-level emulated path: two network namespaces joined through a userspace TUN relay.

The UDP relay (:mod:`quicsm.lab.relay`) forwards datagrams, so only UDP (QUIC) can cross it.
This path carries whole IP packets, so the kernel's TCP and any QUIC stack cross the same
impairments::

    namespace A (client, 10.77.0.1)              namespace B (server, 10.77.0.2)
      tun A  ──► relay: up   Link (loss ─► rate + queue ─► delay + jitter) ──►  tun B
      tun A  ◄── relay: down Link (the same, server → client)              ◄──  tun B

The relay process opens one TUN device per side (``IFF_TUN | IFF_NO_PI``: each ``read`` is one
IP packet, each ``write`` injects one), moves it into its namespace and gives it a
point-to-point address, then applies a :class:`~quicsm.lab.link.Link` per direction exactly as
the UDP relay does (same model, same seeds, same counters). Nothing is rewritten: a packet
read from A's device is written, unchanged, to B's. The TUN devices disappear when the relay
exits (they are not persistent); the namespaces belong to whoever made them
(:func:`namespaces` deletes them on the way out, also on failure).

Run it with ``python -m quicsm.lab.ippath --a-ns NS --b-ns NS --config relay.json`` (the
runner does): it prints ``ready`` once both devices are up and writes its counters as JSON on
SIGTERM/SIGINT. Needs root (CAP_NET_ADMIN) and ``/dev/net/tun``.
"""

from __future__ import annotations

import argparse
import fcntl
import itertools
import json
import os
import select
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quicsm.core.errors import LabError
from quicsm.lab.link import Link, link_config_from_dict
from quicsm.lab.relay import raise_priority

#: the client's (A) and the server's (B) address on the path
CLIENT_ADDRESS = "10.77.0.1"
SERVER_ADDRESS = "10.77.0.2"
#: IP MTU of both TUN devices (TCP segments of 1448 bytes with timestamps)
MTU = 1500
#: packets the kernel may queue on a TUN device before the relay reads them (default 500)
TXQUEUELEN = 10000

# <linux/if_tun.h>
_TUNSETIFF = 0x400454CA
_IFF_TUN = 0x0001
_IFF_NO_PI = 0x1000
_BATCH = 64
_MAX_PACKET = 65535

_counter = itertools.count(1)


@dataclass(frozen=True, kw_only=True)
class PathNames:
    """Names of one path's namespaces and devices (unique per process and path)."""

    client_ns: str
    server_ns: str
    client_dev: str
    server_dev: str


def path_names(tag: str | None = None) -> PathNames:
    """Fresh names; ``tag`` defaults to ``<pid>x<n>`` (device names stay within 15 bytes)."""
    tag = tag or f"{os.getpid()}x{next(_counter)}"
    if len(tag) > 12:
        raise LabError(f"path tag {tag!r} is longer than 12 characters")
    return PathNames(
        client_ns=f"qsm-{tag}-a",
        server_ns=f"qsm-{tag}-b",
        client_dev=f"qa{tag}",
        server_dev=f"qb{tag}",
    )


def _ip(*args: str) -> None:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise LabError(f"ip {' '.join(args)}: {res.stderr.strip() or res.returncode}")


def netns_exec(ns: str, argv: list[str]) -> list[str]:
    """``argv`` run inside namespace ``ns`` (``ip netns exec`` execs it: same pid)."""
    return ["ip", "netns", "exec", ns, *argv]


def existing_namespaces() -> set[str]:
    res = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return {line.split()[0] for line in res.stdout.splitlines() if line.strip()}


def create_namespaces(names: PathNames) -> None:
    """Create both namespaces (loopback up, no IPv6); on failure, delete what was made."""
    try:
        for ns in (names.client_ns, names.server_ns):
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            # no IPv6: its autoconfiguration chatter would be the relay's first packet, its
            # time zero of outages and rate schedules
            for conf in ("all", "default"):
                _ip("netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{conf}.disable_ipv6=1")
    except LabError:
        delete_namespaces(names)
        raise


def delete_namespaces(names: PathNames) -> None:
    """Delete both namespaces if they exist (processes still inside keep theirs alive)."""
    present = existing_namespaces()
    for ns in (names.client_ns, names.server_ns):
        if ns in present:
            with suppress(LabError):
                _ip("netns", "delete", ns)


@contextmanager
def namespaces(names: PathNames) -> Iterator[PathNames]:
    """Both namespaces for the duration of a ``with`` block, deleted also on failure."""
    create_namespaces(names)
    try:
        yield names
    finally:
        delete_namespaces(names)


def check_available() -> str | None:
    """Why the IP path cannot run here, or None."""
    if os.geteuid() != 0:
        return "the IP-level path needs root (network namespaces, TUN devices)"
    if not Path("/dev/net/tun").exists():
        return "the IP-level path needs /dev/net/tun"
    res = subprocess.run(["ip", "netns", "list"], capture_output=True, check=False)
    if res.returncode != 0:
        return "the IP-level path needs iproute2's 'ip netns'"
    return None


def open_tun(name: str) -> int:
    """Open a (non-persistent) TUN device ``name`` in this namespace; returns its fd."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    try:
        fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH", name.encode(), _IFF_TUN | _IFF_NO_PI))
    except OSError as exc:
        os.close(fd)
        raise LabError(f"cannot open TUN device {name}: {exc}") from None
    return fd


def attach_tun(dev: str, ns: str, *, local: str, peer: str) -> None:
    """Move ``dev`` into ``ns`` and give it a point-to-point address towards ``peer``."""
    _ip("link", "set", "dev", dev, "netns", ns)
    _ip("-n", ns, "link", "set", "dev", dev, "mtu", str(MTU), "txqueuelen", str(TXQUEUELEN))
    _ip("-n", ns, "link", "set", "dev", dev, "addrgenmode", "none")
    _ip("-n", ns, "addr", "add", local, "peer", peer, "dev", dev)
    _ip("-n", ns, "link", "set", "dev", dev, "up")


def tun_drops(ns: str, dev: str) -> dict[str, int]:
    """The kernel's own counters of ``dev`` (drops the relay never saw, e.g. a full queue)."""
    res = subprocess.run(
        ["ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        stats = json.loads(res.stdout)[0]["stats64"]
    except (ValueError, LookupError, TypeError):
        return {}
    return {"tx_dropped": int(stats["tx"]["dropped"]), "rx_dropped": int(stats["rx"]["dropped"])}


class TunRelay:
    """Relay IP packets between two TUN fds through one :class:`Link` per direction."""

    def __init__(
        self,
        *,
        client_fd: int,
        server_fd: int,
        up: Link[bytes],
        down: Link[bytes],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client_fd, self.server_fd = client_fd, server_fd
        self.up, self.down = up, down
        self._clock = clock
        self.write_errors = 0
        self.device_gone = False
        self.scheduling = "default"

    def _write(self, fd: int, packet: bytes) -> None:
        try:
            os.write(fd, packet)
        except OSError:
            self.write_errors += 1

    def _flush(self, now: float) -> None:
        for packet in self.up.due(now_s=now):
            self._write(self.server_fd, packet)
        for packet in self.down.due(now_s=now):
            self._write(self.client_fd, packet)

    def serve(self, *, should_stop: Callable[[], bool], poll_s: float = 0.05) -> None:
        clock = self._clock
        up, down = self.up, self.down
        fds = [self.client_fd, self.server_fd]
        while not should_stop():
            self._flush(clock())
            nexts = [t for t in (up.next_due_s(), down.next_due_s()) if t is not None]
            timeout = min(poll_s, max(0.0, min(nexts) - clock())) if nexts else poll_s
            try:
                readable, _, _ = select.select(fds, [], [], timeout)
            except InterruptedError:
                continue
            for fd in readable:
                link = up if fd == self.client_fd else down
                for _ in range(_BATCH):
                    try:
                        packet = os.read(fd, _MAX_PACKET)
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError:
                        # the device went away (its namespace was deleted): nothing more to do
                        self.device_gone = True
                        return
                    now = clock()
                    up.set_start(now)
                    down.set_start(now)
                    link.offer(now_s=now, size=len(packet), item=packet)
        self._flush(clock())

    def counters(self) -> dict[str, Any]:
        return {
            "up": self.up.counters.as_dict(),
            "down": self.down.counters.as_dict(),
            "send_errors": self.write_errors,
            "device_gone": self.device_gone,
            "in_flight_at_stop": self.up.in_flight() + self.down.in_flight(),
            "scheduling": self.scheduling,
        }


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m quicsm.lab.ippath", description=__doc__)
    ap.add_argument("--client-ns", required=True)
    ap.add_argument("--server-ns", required=True)
    ap.add_argument("--client-dev", required=True)
    ap.add_argument("--server-dev", required=True)
    ap.add_argument("--config", type=Path, required=True, help='JSON {"up": {...}, "down": {...}}')
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stats", type=Path, help="write the counters here as JSON on exit")
    ap.add_argument("--no-priority", action="store_true")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m quicsm.lab.ippath`` (used by the runner)."""
    args = _parse_args(argv)
    raw = json.loads(args.config.read_text())
    up: Link[bytes] = Link(
        link_config_from_dict(raw.get("up", {}), where=f"{args.config}: up"), seed=2 * args.seed
    )
    down: Link[bytes] = Link(
        link_config_from_dict(raw.get("down", {}), where=f"{args.config}: down"),
        seed=2 * args.seed + 1,
    )
    stop = False

    def _on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        client_fd = open_tun(args.client_dev)
        server_fd = open_tun(args.server_dev)
        attach_tun(args.client_dev, args.client_ns, local=CLIENT_ADDRESS, peer=SERVER_ADDRESS)
        attach_tun(args.server_dev, args.server_ns, local=SERVER_ADDRESS, peer=CLIENT_ADDRESS)
    except LabError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    relay = TunRelay(client_fd=client_fd, server_fd=server_fd, up=up, down=down)
    if not args.no_priority:
        relay.scheduling = raise_priority()
    print("ready", flush=True)
    try:
        relay.serve(should_stop=lambda: stop)
    finally:
        counters = relay.counters()
        counters["tun.client"] = tun_drops(args.client_ns, args.client_dev)
        counters["tun.server"] = tun_drops(args.server_ns, args.server_dev)
        os.close(client_fd)
        os.close(server_fd)
        if args.stats is not None:
            args.stats.write_text(json.dumps(counters, indent=1, sort_keys=True) + "\n")
        print(json.dumps(counters, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
