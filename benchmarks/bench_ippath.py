"""The IP-level path's accuracy: rate achieved, delay and loss realised vs configured.

The same cases and the same measurement as ``benchmarks/bench_relay.py`` (the UDP relay), over
the IP-level path instead (``quicsm.lab.ippath``: two network namespaces joined by the TUN
relay): a paced UDP sender in the client's namespace sends 1350-byte datagrams to a receiver in
the server's namespace that timestamps each arrival (both read CLOCK_MONOTONIC, which network
namespaces share). Each case prints what was configured and what was realised, the relay's CPU
use, and the kernel's own drops on the TUN devices (packets the relay never saw). Then a kernel
TCP bulk transfer (cubic, 20 MB) with no impairment shows the path's ceiling for TCP. Needs
root::

    .venv/bin/python benchmarks/bench_ippath.py            # all cases, ~60 s
    .venv/bin/python benchmarks/bench_ippath.py --quick    # 1 s per case

The load average before and after is printed: the machine is shared. Results are also written
as JSON to ``benchmarks/results/bench_ippath.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from quicsm.lab.ippath import (
    CLIENT_ADDRESS,
    SERVER_ADDRESS,
    namespaces,
    netns_exec,
    path_names,
)

_spec = importlib.util.spec_from_file_location(
    "bench_relay", Path(__file__).with_name("bench_relay.py")
)
assert _spec is not None and _spec.loader is not None
bench_relay = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_relay)

PAYLOAD = bench_relay.PAYLOAD
CASES = bench_relay.CASES
PORT = 5555

RECEIVER = bench_relay.RECEIVER.replace('("127.0.0.1", 0)', f'("{SERVER_ADDRESS}", {PORT})')

SENDER = r"""
import socket, struct, sys, time
try:
    import os
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
except (OSError, AttributeError):
    pass
host, port, payload = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
offered_mbit, seconds = float(sys.argv[4]), float(sys.argv[5])
head = struct.Struct("!Id")
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
tx.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
pad = bytes(payload - head.size)
gap = payload * 8 / (offered_mbit * 1e6)
n = int(seconds / gap)
t0 = time.monotonic()
for seq in range(n):
    target = t0 + seq * gap
    while (now := time.monotonic()) < target:
        if target - now > 0.001:
            time.sleep(target - now - 0.0005)
    tx.sendto(head.pack(seq, now) + pad, (host, port))
print(n, time.monotonic() - t0, flush=True)
"""


def _relay(names: Any, tmp: Path, up: dict[str, Any], seed: int) -> subprocess.Popen[str]:
    cfg = tmp / "relay.json"
    cfg.write_text(json.dumps({"up": up, "down": {}}))
    relay = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "quicsm.lab.ippath",
            "--client-ns",
            names.client_ns,
            "--server-ns",
            names.server_ns,
            "--client-dev",
            names.client_dev,
            "--server-dev",
            names.server_dev,
            "--config",
            str(cfg),
            "--seed",
            str(seed),
            "--stats",
            str(tmp / "stats.json"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert relay.stdout is not None
    if relay.stdout.readline().strip() != "ready":
        raise RuntimeError("the IP path's relay did not start")
    return relay


def run_case(
    name: str, up: dict[str, Any], *, offered_mbit: float, seconds: float, seed: int = 1
) -> dict[str, Any]:
    names = path_names()
    with namespaces(names), tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        relay = _relay(names, tmp, up, seed)
        log = tmp / "received.bin"
        idle_s = 1.0 + (up.get("delay_ms", 0) + up.get("jitter_ms", 0)) / 1e3
        receiver = subprocess.Popen(
            netns_exec(names.server_ns, [sys.executable, "-c", RECEIVER, str(log), str(idle_s)]),
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert receiver.stdout is not None
            receiver.stdout.readline()
            cpu0 = bench_relay._cpu_seconds(relay.pid)
            out = subprocess.run(
                netns_exec(
                    names.client_ns,
                    [
                        sys.executable,
                        "-c",
                        SENDER,
                        SERVER_ADDRESS,
                        str(PORT),
                        str(PAYLOAD),
                        str(offered_mbit),
                        str(seconds),
                    ],
                ),
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            n, t_send = int(out[0]), float(out[1])
            cpu = bench_relay._cpu_seconds(relay.pid) - cpu0
            receiver.wait(timeout=120)
        finally:
            relay.terminate()
            relay.wait(timeout=10)
            receiver.kill()
        stats = json.loads((tmp / "stats.json").read_text())
        raw = log.read_bytes()
    rec = struct.Struct("!Idd")
    received = [rec.unpack_from(raw, i) for i in range(0, len(raw), rec.size)]
    delays = [(r - s) * 1e3 for _, s, r in received]
    span = received[-1][2] - received[0][2] if len(received) > 1 else float("nan")
    ip_bytes = PAYLOAD + 28  # the relay sees IP packets: + UDP and IPv4 headers
    return {
        "case": name,
        "config": up,
        "offered_mbit": offered_mbit,
        "offered_pps": round(n / t_send),
        "sent": n,
        "received": len(received),
        "loss_realised": 1 - len(received) / n,
        # the rate cap applies to IP packets: report the IP-level rate, comparable to the cap
        "rate_achieved_mbit": len(received) * ip_bytes * 8 / span / 1e6,
        "delay_mean_ms": statistics.fmean(delays) if delays else float("nan"),
        "delay_stdev_ms": statistics.pstdev(delays) if delays else float("nan"),
        "reordered_seen": bench_relay._count_reordered([q for q, _, _ in received]),
        "relay_counters": stats["up"],
        "tun_drops": {"client": stats["tun.client"], "server": stats["tun.server"]},
        "relay_cpu_share": cpu / t_send,
    }


def tcp_transfer(cc: str, *, size: int, seed: int = 1) -> dict[str, Any]:
    """A kernel TCP bulk transfer through the unimpaired path (its ceiling here)."""
    names = path_names()
    env = {**os.environ, "QUICSM_CC": cc}
    with namespaces(names), tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        relay = _relay(names, tmp, {}, seed)
        server = subprocess.Popen(
            netns_exec(
                names.server_ns,
                [
                    sys.executable,
                    "-m",
                    "quicsm.lab.tcpperf",
                    "server",
                    "--listen",
                    f"{SERVER_ADDRESS}:{PORT}",
                    "--qlog-dir",
                    str(tmp / "s"),
                ],
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        try:
            assert server.stdout is not None
            server.stdout.readline()
            out = subprocess.run(
                netns_exec(
                    names.client_ns,
                    [
                        sys.executable,
                        "-m",
                        "quicsm.lab.tcpperf",
                        "client",
                        "--connect",
                        f"{SERVER_ADDRESS}:{PORT}",
                        "--object-size",
                        str(size),
                        "--qlog-dir",
                        str(tmp / "c"),
                    ],
                ),
                capture_output=True,
                text=True,
                env=env,
                check=True,
            ).stdout
            result = json.loads(out.strip().splitlines()[-1])
        finally:
            server.terminate()
            server.wait(timeout=10)
            relay.terminate()
            relay.wait(timeout=10)
    return {
        "case": f"kernel TCP {cc}, {size // 1_000_000} MB, no impairment",
        "mbit": result["bytes"] * 8 / result["completion_ms"] / 1e3,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 s per case instead of 3 s")
    ap.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "results" / "bench_ippath.json",
        help="the results file",
    )
    args = ap.parse_args()
    load_before = os.getloadavg()
    print(f"load average before: {load_before[0]:.2f} (2 cores shared with everything else)")
    print(f"client {CLIENT_ADDRESS} -> server {SERVER_ADDRESS} through the TUN relay")
    seconds = 1.0 if args.quick else 3.0
    results: list[dict[str, Any]] = []
    print(
        f"{'case':44} {'pps':>6} {'Mbit/s':>7} {'loss':>7} {'delay ms':>9} {'sd':>5} "
        f"{'reord':>6} {'relay cpu':>9} {'tun drops':>9}"
    )
    for name, up, offered in CASES:
        r = run_case(name, up, offered_mbit=offered, seconds=seconds)
        results.append(r)
        drops = sum(v for side in r["tun_drops"].values() for v in side.values())
        print(
            f"{name:44} {r['offered_pps']:6d} {r['rate_achieved_mbit']:7.1f} "
            f"{r['loss_realised']:7.2%} {r['delay_mean_ms']:9.2f} {r['delay_stdev_ms']:5.2f} "
            f"{r['reordered_seen']:6d} {r['relay_cpu_share']:9.0%} {drops:9d}",
            flush=True,
        )
    for cc in ("cubic", "bbr"):
        rows = [tcp_transfer(cc, size=20_000_000) for _ in range(2)]
        print(f"{rows[0]['case']}: Mbit/s runs {[round(r['mbit'], 1) for r in rows]}")
        results.extend(rows)
    load_after = os.getloadavg()
    print(f"load average after: {load_after[0]:.2f}")
    results.append({"load_before": load_before, "load_after": load_after})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
