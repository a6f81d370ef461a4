"""Loopback smoke transfers for the instrumented stacks in ``build/stacks.json``.

Runs a stack's lab server and client on 127.0.0.1 through a tiny UDP forwarder that blacks out
the server-to-client direction once (so that probe timeouts, losses and recovery happen) and
returns the congestion states the server's qlog recorded. Used by ``tests/test_patches.py`` and
``scripts/make_fixtures``; the lab proper (``quicsm lab``) has its own impairment relay.

    python instrumentation-patches/smoke.py [STACK[@VERSION[/CC]]] ...   # states per stack
    python instrumentation-patches/smoke.py --fixtures DIR          # writes real qlog fixtures
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quicsm.core import states

ROOT = Path(__file__).resolve().parent.parent
STACKS_JSON = ROOT / "build" / "stacks.json"
STATE_EVENT = "congestion_state_updated"


def load_stacks(path: Path = STACKS_JSON) -> list[dict[str, Any]]:
    """The stacks that ``build.sh`` built, or [] when it has not run."""
    if not path.exists():
        return []
    stacks: list[dict[str, Any]] = json.loads(path.read_text())
    return stacks


def with_controllers(stacks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (stack, congestion controller): ``cc`` set, ``QUICSM_CC`` in ``env``."""
    out = []
    for stack in stacks:
        for cc in stack.get("controllers") or [""]:
            env = dict(stack.get("env", {}), **({"QUICSM_CC": cc} if cc else {}))
            out.append(dict(stack, cc=cc, env=env))
    return out


def selects(selector: str, stack: dict[str, Any]) -> bool:
    """``quinn``, ``quinn@0.11.12``, ``quinn/bbr`` or ``quinn@0.11.12/bbr`` (as ``quicsm lab``)."""
    rest, _, cc = selector.partition("/")
    name, _, version = rest.partition("@")
    return (name == stack["stack"] and version in ("", stack["version"])
            and cc in ("", stack.get("cc", "")))


def stack_name(stack: dict[str, Any]) -> str:
    """``quic-go@v0.65.0`` or, for one controller, ``quic-go@v0.65.0/cubic``."""
    name = f"{stack['stack']}@{stack['version']}"
    return f"{name}/{stack['cc']}" if stack.get("cc") else name


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Blackout:
    """Drop every server-to-client datagram from the ``after``-th one for ``ms`` milliseconds."""

    after: int = 300
    ms: float = 600.0
    dropped: int = 0
    forwarded: int = 0


class Forwarder(threading.Thread):
    """UDP forwarder client <-> 127.0.0.1:listen <-> server, with one blackout downstream."""

    def __init__(self, server_port: int, blackout: Blackout) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port: int = self.sock.getsockname()[1]
        self.server = ("127.0.0.1", server_port)
        self.blackout = blackout
        self.client: tuple[str, int] | None = None
        self.stopped = threading.Event()
        self._blackout_until: float | None = None

    def run(self) -> None:
        b = self.blackout
        while not self.stopped.is_set():
            try:
                data, addr = self.sock.recvfrom(65535)
            except TimeoutError:
                continue
            except OSError:
                return
            if addr == self.server:
                if self.client is None:
                    continue
                b.forwarded += 1
                if b.forwarded == b.after:
                    self._blackout_until = time.monotonic() + b.ms / 1000
                if self._blackout_until is not None and time.monotonic() < self._blackout_until:
                    b.dropped += 1
                    continue
                self.sock.sendto(data, self.client)
            else:
                self.client = addr
                self.sock.sendto(data, self.server)

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=1)
        self.sock.close()


@dataclass
class SmokeResult:
    stack: str
    version: str
    client: dict[str, Any]
    server_qlogs: list[Path]
    client_qlogs: list[Path]
    states: list[str] = field(default_factory=list)
    dropped: int = 0


def qlog_events(path: Path) -> list[dict[str, Any]]:
    """Events of one qlog file: JSON (one object with traces) or JSON-SEQ (one record per line)."""
    text = path.read_text()
    if text.lstrip("\x1e \n").startswith('{"qlog_format": "JSON"') or path.suffix == ".qlog":
        doc = json.loads(text)
        return [e for t in doc.get("traces", []) for e in t.get("events", [])]
    records = [json.loads(r) for r in text.replace("\x1e", "\n").splitlines() if r.strip()]
    return [r for r in records if "name" in r]


def states_in(path: Path) -> list[str]:
    return [
        e["data"]["new"] for e in qlog_events(path) if str(e.get("name", "")).endswith(STATE_EVENT)
    ]


def run_smoke(
    stack: dict[str, Any],
    workdir: Path,
    *,
    objects: int = 2,
    object_size: int = 1_500_000,
    max_cwnd_packets: int | None = 48,
    blackout: Blackout | None = None,
    timeout: float = 30.0,
) -> SmokeResult:
    """One loopback page load through the forwarder; qlogs land in workdir/{server,client}."""
    env = dict(os.environ, **stack.get("env", {}))
    if max_cwnd_packets:
        env["QUICSM_MAX_CWND_PACKETS"] = str(max_cwnd_packets)
    server_port = free_port()
    sdir, cdir = workdir / "server", workdir / "client"
    server = subprocess.Popen(
        [
            *stack["server"],
            "server",
            "--listen",
            f"127.0.0.1:{server_port}",
            "--qlog-dir",
            str(sdir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    fwd = Forwarder(server_port, blackout or Blackout())
    try:
        assert server.stdout is not None
        line = server.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"{stack['stack']} server did not start: {line!r} {server.stderr}")
        fwd.start()
        out = subprocess.run(
            [
                *stack["client"],
                "client",
                "--connect",
                f"127.0.0.1:{fwd.port}",
                "--objects",
                str(objects),
                "--object-size",
                str(object_size),
                "--qlog-dir",
                str(cdir),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
        lines = out.stdout.strip().splitlines()
        if out.returncode != 0 or not lines:
            raise RuntimeError(f"{stack['stack']} client failed ({out.returncode}): {out.stderr}")
        client = json.loads(lines[-1])
        # Let the server finish closing the connection (aioquic writes its qlog at the end of
        # the draining period), then stop it; SIGTERM makes it flush whatever is still open.
        time.sleep(1.0)
    finally:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        fwd.stop()
    server_qlogs = sorted(p for p in sdir.glob("*") if p.suffix in (".qlog", ".sqlog"))
    client_qlogs = sorted(p for p in cdir.glob("*") if p.suffix in (".qlog", ".sqlog"))
    states = [s for p in server_qlogs for s in states_in(p)]
    return SmokeResult(
        stack=stack["stack"],
        version=stack["version"],
        client=client,
        server_qlogs=server_qlogs,
        client_qlogs=client_qlogs,
        states=states,
        dropped=fwd.blackout.dropped,
    )


PAPER_STATES = frozenset(states.PAPER_STATES)
#: stacks whose patch honours QUICSM_MAX_CWND_PACKETS (quiche and quinn have no window cap)
WINDOW_CAP_STACKS = ("quic-go", "aioquic")


def write_fixtures(stack: dict[str, Any], outdir: Path, *, attempts: int = 5) -> Path:
    """Small real traces for reader tests: outdir/<stack>-<version>/{server,client}.* + run.json.

    One 300 kB object with the window capped at 40 packets and one 400 ms blackout: enough for
    every paper state to occur. The server trace is zstd-compressed, the client trace gzip-
    compressed (readers detect both by magic bytes).
    """
    import gzip

    import zstandard

    params = {"objects": 1, "object_size": 300_000, "max_cwnd_packets": 40}
    blackout = {"after": 80, "ms": 400.0}
    for _ in range(attempts):
        with tempfile.TemporaryDirectory() as tmp:
            res = run_smoke(
                stack,
                Path(tmp),
                blackout=Blackout(after=int(blackout["after"]), ms=blackout["ms"]),
                objects=params["objects"],
                object_size=params["object_size"],
                max_cwnd_packets=params["max_cwnd_packets"],
            )
            if not (res.client["ok"] and PAPER_STATES.issubset(res.states)):
                continue
            dest = outdir / f"{stack['stack']}-{stack['version']}"
            dest.mkdir(parents=True, exist_ok=True)
            for old in dest.iterdir():
                old.unlink()
            (server,), (client,) = res.server_qlogs, res.client_qlogs
            zst = zstandard.ZstdCompressor(level=19).compress(server.read_bytes())
            (dest / f"server{server.suffix}.zst").write_bytes(zst)
            gz = gzip.compress(client.read_bytes(), compresslevel=9, mtime=0)
            (dest / f"client{client.suffix}.gz").write_bytes(gz)
            run = {
                "stack": stack["stack"],
                "version": stack["version"],
                "patch": stack["patch"],
                "scenario": "loopback-blackout",
                "device": "desktop",
                **params,
                "blackout_after_datagrams": blackout["after"],
                "blackout_ms": blackout["ms"],
                "relay_dropped": res.dropped,
                "ok": res.client["ok"],
                "bytes": res.client["bytes"],
                "completion_ms": res.client["completion_ms"],
            }
            (dest / "run.json").write_text(json.dumps(run, indent=2) + "\n")
            return dest
    raise RuntimeError(f"{stack['stack']} {stack['version']}: no run showed all eight states")


def main(argv: list[str]) -> int:
    stacks = load_stacks()
    if not stacks:
        print("no build/stacks.json: run instrumentation-patches/build.sh first", file=sys.stderr)
        return 1
    if argv[:1] == ["--fixtures"]:
        outdir = Path(argv[1])
        for stack in stacks:
            if stack["stack"] not in WINDOW_CAP_STACKS:
                continue  # without a window cap, CongestionAvoidanceMaxed cannot occur
            print(f"wrote {write_fixtures(stack, outdir)}")
        return 0
    for stack in with_controllers(stacks):
        name = stack_name(stack)
        if argv and not any(selects(w, stack) for w in argv):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            res = run_smoke(stack, Path(tmp))
        seen = sorted(set(res.states))
        print(f"{name}: client={res.client} dropped={res.dropped} states={seen}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
