"""Ingest throughput of ``read_transitions`` on a large JSON-SEQ file, against a baseline.

The data generator writes a seeded, quic-go-like JSON-SEQ file (``--size-mb``, default 220 MB)
under ``benchmarks/data/``: many traces, each a header followed by packet_sent /
packet_received (with frames), metrics_updated after every ACK, loss_timer_updated,
congestion_state_updated and packet_lost events in realistic proportions.

Measured in the same run, on one core:

- **baseline**: split the file into records at the RS bytes and ``orjson.loads`` every record
  (cyclic GC off, which favours the baseline);
- **quicsm**: ``quicsm.read_transitions(file, states="explicit")`` (GC on, as users run it;
  ``--states`` changes the mode);
- **peak memory**: how much a process's RSS peaks above its level before a second
  ``read_transitions`` call (``/proc/self/clear_refs`` resets the peak), compared with the file
  size and the largest trace.

Throughput is reported per CPU second of this process (one core; robust on a busy machine)
and per wall-clock second; the best of ``--repeat`` runs counts.

::

    .venv/bin/python benchmarks/bench_ingest.py                 # ~220 MB, about a minute
    .venv/bin/python benchmarks/bench_ingest.py --size-mb 30    # a quick look

Targets (issue "Foundation"): quicsm >= 5x the baseline and >= 500 MB/s; peak memory bounded
by the largest trace, not the file. Results are written to ``benchmarks/results/bench_ingest.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent
RS = b"\x1e"


def _header(i: int, rng: random.Random) -> bytes:
    odcid = f"{rng.getrandbits(64):016x}"
    header = {
        "file_schema": "urn:ietf:params:qlog:file:sequential",
        "serialization_format": "application/qlog+json-seq",
        "title": "quic-go qlog",
        "code_version": "v0.57.1",
        "trace": {
            "vantage_point": {"type": "server" if i % 2 else "client"},
            "common_fields": {
                "group_id": odcid,
                "reference_time": {"clock_type": "monotonic", "epoch": "unknown"},
            },
            "quicsm_labels": {"run": i, "scenario": "bench"},
        },
        "qlog_format": "JSON-SEQ",
        "qlog_version": "0.3",
    }
    return RS + orjson.dumps(header) + b"\n"


def _trace(i: int, rng: random.Random, n_packets: int, *, states: bool = True) -> bytes:
    """One connection: mostly packets, metrics after each ACK, a few state changes
    (``states=False``: no congestion_state_updated, as aioquic/ngtcp2/quinn write)."""
    out = [_header(i, rng)]
    t = 0.0
    cwnd = 13500
    rtt = 10.0 + rng.random() * 40
    state = "slow_start"
    if states:
        out.append(
            b'\x1e{"time":%.6f,"name":"recovery:congestion_state_updated","data":{"new":"%s"}}\n'
            % (t, state.encode())
        )
    for pn in range(1, n_packets + 1):
        t += rng.random() * 0.2
        out.append(
            b'\x1e{"time":%.6f,"name":"transport:packet_sent","data":{"header":{"packet_type":'
            b'"1RTT","packet_number":%d,"dcid":"4f2a9c1e"},"raw":{"length":1252},"frames":'
            b'[{"frame_type":"stream","stream_id":0,"offset":%d,"length":1200,"fin":false}]}}\n'
            % (t, pn, pn * 1200)
        )
        if pn % 2 == 0:
            out.append(
                b'\x1e{"time":%.6f,"name":"recovery:loss_timer_updated","data":{"event_type":'
                b'"set","timer_type":"pto","packet_number_space":"application_data",'
                b'"delta":%.3f}}\n' % (t, rtt * 3)
            )
        if rng.random() < 0.5:  # an ACK arrives
            t += rng.random() * 0.2
            out.append(
                b'\x1e{"time":%.6f,"name":"transport:packet_received","data":{"header":'
                b'{"packet_type":"1RTT","packet_number":%d},"raw":{"length":45},"frames":'
                b'[{"frame_type":"ack","ack_delay":0.02,"acked_ranges":[[%d,%d]]}]}}\n'
                % (t, pn, max(0, pn - 3), pn)
            )
            cwnd += 1200 if state == "slow_start" else 40
            out.append(
                b'\x1e{"time":%.6f,"name":"recovery:metrics_updated","data":{"smoothed_rtt":'
                b'%.3f,"latest_rtt":%.3f,"congestion_window":%d,"bytes_in_flight":%d}}\n'
                % (t, rtt, rtt + rng.random(), cwnd, rng.randrange(0, cwnd))
            )
        if rng.random() < 0.002:  # a loss and a state change
            out.append(
                b'\x1e{"time":%.6f,"name":"recovery:packet_lost","data":{"header":{"packet_type":'
                b'"1RTT","packet_number":%d},"trigger":"reordering_threshold"}}\n' % (t, pn - 2)
            )
            state = rng.choice(["recovery", "congestion_avoidance", "application_limited"])
            if not states:
                continue
            out.append(
                b'\x1e{"time":%.6f,"name":"recovery:congestion_state_updated","data":'
                b'{"new":"%s"}}\n' % (t, state.encode())
            )
    return b"".join(out)


def generate(
    path: Path,
    size_mb: float,
    *,
    seed: int = 7,
    packets_per_trace: int = 6000,
    states: bool = True,
) -> dict[str, int]:
    """Write the benchmark file (if missing or of another size); returns its shape."""
    target = int(size_mb * 1e6)
    meta_path = path.with_suffix(".json")
    if path.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if (meta.get("target"), meta.get("seed"), meta.get("states", True)) == (
            target,
            seed,
            states,
        ):
            return dict(meta)
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = largest = traces = 0
    with path.open("wb") as f:
        while written < target:
            trace = _trace(traces, rng, packets_per_trace, states=states)
            f.write(trace)
            written += len(trace)
            largest = max(largest, len(trace))
            traces += 1
    meta = {
        "target": target,
        "seed": seed,
        "states": states,
        "bytes": written,
        "traces": traces,
        "largest_trace_bytes": largest,
    }
    meta_path.write_text(json.dumps(meta))
    return meta


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) since ``start``."""
    wall, cpu = _clock()
    return wall - start[0], cpu - start[1]


def baseline(path: Path, block: int = 8 << 20) -> tuple[float, float]:
    """(wall, CPU) seconds to orjson.loads every record (RS-split, streamed in blocks), GC off."""
    gc.disable()
    try:
        start = _clock()
        carry = b""
        with path.open("rb") as f:
            while chunk := f.read(block):
                parts = (carry + chunk).split(RS)
                carry = parts.pop()
                for part in parts:
                    if part:
                        orjson.loads(part)
        if carry.strip():
            orjson.loads(carry)
        return _since(start)
    finally:
        gc.enable()


def ours(path: Path, states: str = "explicit") -> tuple[float, float, int]:
    """(wall, CPU) seconds of read_transitions, and the number of rows it returned."""
    from quicsm.extract.read import read_transitions

    start = _clock()
    frame = read_transitions(path, states=states)
    wall, cpu = _since(start)
    return wall, cpu, frame.height


_MEASURE = """
import sys
import quicsm.extract.read

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

quicsm.extract.read.read_transitions(sys.argv[1], states=sys.argv[2])  # warm up
with open("/proc/self/clear_refs", "w") as f:  # reset the peak (VmHWM) to the current RSS
    f.write("5")
before = status("VmRSS:")
quicsm.extract.read.read_transitions(sys.argv[1], states=sys.argv[2])
print(before, status("VmHWM:"))
"""


def peak_memory(path: Path, states: str = "explicit") -> dict[str, int]:
    """Peak RSS growth (bytes) of a process while it runs read_transitions on ``path``."""
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), states],
        capture_output=True,
        text=True,
        check=True,
    )
    before, peak = (int(x) for x in out.stdout.split())
    return {"rss_before": before, "rss_peak": peak, "extra_rss": peak - before}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--size-mb", type=float, default=220.0, help="size of the generated trace, in MB"
    )
    parser.add_argument("--repeat", type=int, default=3, help="best of N timings")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=ROOT / "data",
        help="where the trace is generated (and reused)",
    )
    parser.add_argument("--seed", type=int, default=7, help="seed of the generated trace")
    parser.add_argument(
        "--states",
        choices=("explicit", "hybrid", "derived"),
        help="read_transitions(states=...): default explicit (hybrid with --derived); hybrid "
        "on these stock-quic-go-like traces derives the states quic-go does not log",
    )
    parser.add_argument(
        "--derived",
        action="store_true",
        help="traces without congestion_state_updated: states derived from metrics",
    )
    args = parser.parse_args(argv)

    kind = "-derived" if args.derived else ""
    path = args.data_dir / f"ingest-{args.size_mb:g}mb-seed{args.seed}{kind}.sqlog"
    meta = generate(path, args.size_mb, seed=args.seed, states=not args.derived)
    mb = meta["bytes"] / 1e6
    path.read_bytes()  # warm the page cache for both contenders
    bases = [baseline(path) for _ in range(args.repeat)]
    states = args.states or ("hybrid" if args.derived else "explicit")
    runs = [ours(path, states) for _ in range(args.repeat)]
    base_wall, base_cpu = min(b[0] for b in bases), min(b[1] for b in bases)
    our_wall, our_cpu = min(r[0] for r in runs), min(r[1] for r in runs)
    memory = peak_memory(path, states)
    result = {
        "file_mb": round(mb, 1),
        "traces": meta["traces"],
        "largest_trace_mb": round(meta["largest_trace_bytes"] / 1e6, 2),
        "transition_rows": runs[0][2],
        "baseline_cpu_mb_s": round(mb / base_cpu, 1),
        "quicsm_cpu_mb_s": round(mb / our_cpu, 1),
        "ratio_cpu": round(base_cpu / our_cpu, 2),
        "baseline_wall_mb_s": round(mb / base_wall, 1),
        "quicsm_wall_mb_s": round(mb / our_wall, 1),
        "ratio_wall": round(base_wall / our_wall, 2),
        "peak_extra_rss_mb": round(memory["extra_rss"] / 1e6, 1),
        "derived": args.derived,
        "python": sys.version.split()[0],
        "load_average": round(os.getloadavg()[0], 2),
    }
    print(
        f"file: {result['file_mb']} MB, {result['traces']} traces "
        f"(largest {result['largest_trace_mb']} MB), {result['transition_rows']} transition rows\n"
        f"                                   CPU time            wall clock\n"
        f"baseline orjson.loads per record: {result['baseline_cpu_mb_s']:>8} MB/s"
        f"  {result['baseline_wall_mb_s']:>10} MB/s\n"
        f"quicsm read_transitions:          {result['quicsm_cpu_mb_s']:>8} MB/s"
        f"  {result['quicsm_wall_mb_s']:>10} MB/s\n"
        f"ratio:                            {result['ratio_cpu']:>8}x"
        f"  {result['ratio_wall']:>10}x\n"
        f"peak RSS growth while reading: {result['peak_extra_rss_mb']} MB "
        f"(load average {result['load_average']})"
    )
    out = ROOT / "results" / f"bench_ingest{kind}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
