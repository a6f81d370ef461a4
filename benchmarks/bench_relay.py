"""Relay throughput and accuracy: rate achieved, delay and loss realised vs configured.

Runs the real relay process (``python -m quicsm.lab.relay``) on 127.0.0.1 and pushes paced UDP
datagrams through it, one direction (client -> server), from this process to a receiver
process that timestamps each arrival (both read CLOCK_MONOTONIC). Each case prints what was
configured and what was realised, plus the relay's CPU use while sending (share of one core,
from /proc) so you can see it is not the bottleneck::

    .venv/bin/python benchmarks/bench_relay.py            # all cases, ~40 s
    .venv/bin/python benchmarks/bench_relay.py --quick    # shorter runs

Results are also written as JSON to ``benchmarks/results/bench_relay.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PAYLOAD = 1350  # bytes per datagram, a full QUIC packet
HEADER = struct.Struct("!Id")  # sequence number, send time


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


RECEIVER = r"""
import os, socket, struct, sys, time
try:  # the measuring end must not add scheduling delay of its own
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
except (OSError, AttributeError):
    pass
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
sock.bind(("127.0.0.1", 0))
sock.settimeout(float(sys.argv[2]))
print(sock.getsockname()[1], flush=True)
rec = struct.Struct("!Idd")
with open(sys.argv[1], "wb") as out:
    while True:
        try:
            data = sock.recv(65535)
        except TimeoutError:
            break
        seq, sent = struct.unpack_from("!Id", data)
        out.write(rec.pack(seq, sent, time.monotonic()))
"""


def run_case(
    name: str, up: dict[str, Any], *, offered_mbit: float, seconds: float, seed: int = 1
) -> dict[str, Any]:
    """Send paced datagrams through a relay process to a receiver process (no shared GIL)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "received.bin"
        idle_s = 1.0 + (up.get("delay_ms", 0) + up.get("jitter_ms", 0)) / 1e3
        receiver = subprocess.Popen(
            [sys.executable, "-c", RECEIVER, str(log), str(idle_s)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert receiver.stdout is not None
        sink_port = int(receiver.stdout.readline())
        cfg = Path(tmp) / "relay.json"
        cfg.write_text(json.dumps({"up": up, "down": {}}))
        stats = Path(tmp) / "stats.json"
        relay = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "quicsm.lab.relay",
                "--target",
                f"127.0.0.1:{sink_port}",
                "--config",
                str(cfg),
                "--seed",
                str(seed),
                "--stats",
                str(stats),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert relay.stdout is not None
            host, port = relay.stdout.readline().split()[1].rsplit(":", 1)
            tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            pad = bytes(PAYLOAD - HEADER.size)
            gap = PAYLOAD * 8 / (offered_mbit * 1e6)
            n = int(seconds / gap)
            cpu0 = _cpu_seconds(relay.pid)
            t0 = time.monotonic()
            for seq in range(n):
                target = t0 + seq * gap
                while (now := time.monotonic()) < target:
                    if target - now > 0.001:
                        time.sleep(target - now - 0.0005)
                tx.sendto(HEADER.pack(seq, now) + pad, (host, int(port)))
            t_send = time.monotonic() - t0
            cpu = _cpu_seconds(relay.pid) - cpu0  # steady state: work lags by the delay only
            receiver.wait(timeout=120)
        finally:
            relay.terminate()
            relay.wait(timeout=10)
            receiver.kill()
        counters = json.loads(stats.read_text())["up"]
        raw = log.read_bytes()
    rec = struct.Struct("!Idd")
    received = [rec.unpack_from(raw, i) for i in range(0, len(raw), rec.size)]
    delays = [(r - s) * 1e3 for _, s, r in received]
    seqs = [q for q, _, _ in received]
    reordered = _count_reordered(seqs)
    span = received[-1][2] - received[0][2] if len(received) > 1 else float("nan")
    return {
        "case": name,
        "config": up,
        "offered_mbit": offered_mbit,
        "offered_pps": round(n / t_send),
        "sent": n,
        "received": len(received),
        "loss_realised": 1 - len(received) / n,
        "rate_achieved_mbit": len(received) * PAYLOAD * 8 / span / 1e6,
        "delay_mean_ms": statistics.fmean(delays) if delays else float("nan"),
        "delay_p50_ms": statistics.median(delays) if delays else float("nan"),
        "delay_stdev_ms": statistics.pstdev(delays) if delays else float("nan"),
        "reordered_seen": reordered,
        "relay_counters": counters,
        "relay_cpu_share": cpu / t_send,
    }


def _count_reordered(seqs: list[int]) -> int:
    """Datagrams that arrived after one sent later than them."""
    top, count = -1, 0
    for q in seqs:
        if q < top:
            count += 1
        else:
            top = q
    return count


CASES: list[tuple[str, dict[str, Any], float]] = [
    ("passthrough 100 Mbit/s offered", {}, 100.0),
    ("passthrough 200 Mbit/s offered", {}, 200.0),
    ("rate 100 Mbit/s, offered 120", {"rate_mbit": 100, "queue_packets": 200}, 120.0),
    ("rate 10 Mbit/s, offered 15", {"rate_mbit": 10, "queue_packets": 100}, 15.0),
    ("delay 50 ms", {"delay_ms": 50}, 50.0),
    ("delay 56 ms jitter 10 ms", {"delay_ms": 56, "jitter_ms": 10}, 50.0),
    ("loss 1%", {"loss": 0.01}, 50.0),
    ("gilbert p=0.01 r=0.3 (mean 3.2%)", {"gilbert": {"p": 0.01, "r": 0.3}}, 50.0),
    (
        "rate 50-150 Mbit/s every 1 s, offered 160",
        {
            "rate_schedule": {
                "kind": "uniform",
                "low_mbit": 50,
                "high_mbit": 150,
                "interval_s": 1.0,
            },
            "queue_packets": 300,
        },
        160.0,
    ),
]


def stack_through_relay(stack_key: str, *, size: int, repeats: int) -> list[dict[str, Any]]:
    """A real stack's bulk transfer straight to its server vs through an unimpaired relay."""
    from quicsm.lab.stacks import load_stacks, select_stacks

    (stack,) = select_stacks(load_stacks(), (stack_key,), where="--stack")[:1]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        server = subprocess.Popen(
            [*stack.server, "server", "--listen", f"127.0.0.1:{port}", "--qlog-dir", f"{tmp}/s"],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        cfg = Path(tmp) / "relay.json"
        cfg.write_text(json.dumps({"up": {}, "down": {}}))
        relay = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "quicsm.lab.relay",
                "--target",
                f"127.0.0.1:{port}",
                "--config",
                str(cfg),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None and relay.stdout is not None
            server.stdout.readline()
            relay_addr = relay.stdout.readline().split()[1]
            for path, addr in (("direct", f"127.0.0.1:{port}"), ("relay", relay_addr)) * repeats:
                res = subprocess.run(
                    [
                        *stack.client,
                        "client",
                        "--connect",
                        addr,
                        "--objects",
                        "1",
                        "--object-size",
                        str(size),
                        "--qlog-dir",
                        f"{tmp}/c",
                    ],
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                r = json.loads(res.stdout.strip().splitlines()[-1])
                out.append(
                    {
                        "case": f"{stack.key} {path}",
                        "mbit": r["bytes"] * 8 / r["completion_ms"] / 1e3,
                    }
                )
        finally:
            relay.terminate()
            os.killpg(server.pid, 15)
            relay.wait(timeout=10)
            server.wait(timeout=10)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 s per case instead of 3 s")
    ap.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "results" / "bench_relay.json",
        help="the results file",
    )
    ap.add_argument(
        "--stack",
        default=None,
        help="also compare a built stack's transfer direct vs through the relay, "
        'e.g. "quic-go@v0.65.0" (qlog writing off is not possible: both pay it)',
    )
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores shared with everything else)")
    seconds = 1.0 if args.quick else 3.0
    results = []
    print(
        f"{'case':44} {'pps':>6} {'Mbit/s':>7} {'loss':>7} {'delay ms':>9} {'sd':>5} "
        f"{'reord':>6} {'relay cpu':>9}"
    )
    for name, up, offered in CASES:
        r = run_case(name, up, offered_mbit=offered, seconds=seconds)
        results.append(r)
        print(
            f"{name:44} {r['offered_pps']:6d} {r['rate_achieved_mbit']:7.1f} "
            f"{r['loss_realised']:7.2%} {r['delay_mean_ms']:9.2f} {r['delay_stdev_ms']:5.2f} "
            f"{r['reordered_seen']:6d} {r['relay_cpu_share']:9.0%}",
            flush=True,
        )
    if args.stack:
        rows = stack_through_relay(args.stack, size=20_000_000, repeats=3)
        for path in ("direct", "relay"):
            mbit = sorted(r["mbit"] for r in rows if r["case"].endswith(path))
            print(f"{args.stack} 20 MB transfer, {path:6}: Mbit/s runs {mbit}")
        results.extend(rows)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
