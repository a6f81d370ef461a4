"""Throughput and peak memory of derived states on one long metrics-only connection.

The generator writes a seeded, aioquic-like JSON-SEQ file (``--size-mb``, default 200 MB) under
``benchmarks/data/``: ONE trace (a single connection), no ``congestion_state_updated``, packet
events and ``recovery:metrics_updated`` after every send and every ACK (window, ssthresh, bytes
in flight, RTTs), with losses and cutbacks now and then. Each measurement runs in a fresh
process; its CPU time and peak RSS come from ``wait4``:

- **baseline**: a plain pysimdjson full parse: the file read in 8 MiB blocks, split into
  records at the RS bytes, every record parsed by ``simdjson.Parser.parse`` and its ``name``
  read;
- **derived**: ``quicsm.read_transitions(file, states="derived")`` (GC on, as users run it),
  with the native deriver (``quicsm._native``, built with the package);
- **derived, Python**: the same with ``QUICSM_NATIVE=0`` (the Python reference deriver).

Throughput is per CPU second (robust on a busy machine); the ratio is taken within one run.

::

    .venv/bin/python benchmarks/bench_derive.py                  # ~200 MB
    .venv/bin/python benchmarks/bench_derive.py --size-mb 2000   # the 2 GB target file

Targets (docs/derive.md): derived >= 1x the baseline; peak RSS <= 300 MB for a 2 GB file. The
row counts of the native and the Python runs must agree (tests/test_native.py compares rows).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
RS = b"\x1e"
MDS = 1200


def generate(path: Path, size_mb: float, seed: int = 1) -> None:
    """One connection: slow start, then congestion avoidance with a loss every few hundred
    packets; a metrics update after every send and every ACK, as aioquic logs them."""
    rng = random.Random(seed)
    target = int(size_mb * (1 << 20))
    header = {
        "qlog_format": "JSON-SEQ",
        "qlog_version": "0.3",
        "title": "aioquic-like bench trace",
        "trace": {
            "vantage_point": {"type": "server"},
            "common_fields": {"time_format": "relative", "reference_time": 1.7e12},
            "quicsm_labels": {"stack": "aioquic"},
        },
    }
    t = 0.0
    cwnd, ssthresh, in_flight, pn = 12000, None, 0, 0
    srtt, rttvar = 40.0, 5.0
    written = 0
    with path.open("wb") as f:
        f.write(RS + json.dumps(header).encode() + b"\n")
        while written < target:
            parts: list[bytes] = []
            while in_flight + MDS <= cwnd:  # send a window's worth
                t += 0.05
                pn += 1
                in_flight += MDS
                parts.append(
                    b'{"time":%.3f,"name":"transport:packet_sent","data":{"header":'
                    b'{"packet_type":"1RTT","packet_number":%d},"raw":{"length":%d},'
                    b'"frames":[{"frame_type":"stream","stream_id":0,"offset":%d,'
                    b'"length":1150}]}}' % (t, pn, MDS, pn * 1150)
                )
                parts.append(
                    b'{"time":%.3f,"name":"recovery:metrics_updated","data":{"bytes_in_flight"'
                    b':%d,"cwnd":%d,"cubic-wmax":%d}}' % (t, in_flight, cwnd, cwnd)
                )
            for _ in range(rng.randint(1, 4)):  # ACKs
                t += rng.uniform(0.1, 0.6)
                rtt = srtt + rng.uniform(-2, 2)
                srtt = 0.875 * srtt + 0.125 * rtt
                in_flight = max(0, in_flight - 2 * MDS)
                if rng.random() < 0.004:  # a loss and a cutback
                    parts.append(
                        b'{"time":%.3f,"name":"recovery:packet_lost","data":{"header":'
                        b'{"packet_number":%d},"trigger":"time_threshold"}}' % (t, pn - 20)
                    )
                    cwnd = max(2 * MDS, int(cwnd * 0.7))
                    ssthresh = cwnd
                elif ssthresh is None or cwnd < ssthresh:
                    cwnd += 2 * MDS
                    if cwnd > 4_000_000:
                        ssthresh = cwnd
                else:
                    cwnd += MDS * MDS // max(cwnd, 1)
                parts.append(
                    b'{"time":%.3f,"name":"transport:packet_received","data":{"header":'
                    b'{"packet_type":"1RTT","packet_number":%d},"frames":[{"frame_type":"ack",'
                    b'"ack_delay":0.5,"acked_ranges":[[%d,%d]]}]}}' % (t, pn, pn - 50, pn - 2)
                )
                ss = b"" if ssthresh is None else b',"ssthresh":%d' % ssthresh
                parts.append(
                    b'{"time":%.3f,"name":"recovery:metrics_updated","data":{"bytes_in_flight"'
                    b':%d,"cwnd":%d,"cubic-wmax":%d%s,"latest_rtt":%.3f,"min_rtt":35.0,'
                    b'"smoothed_rtt":%.3f,"rtt_variance":%.3f}}'
                    % (t, in_flight, cwnd, cwnd, ss, rtt, srtt, rttvar)
                )
            block = b"".join(RS + p + b"\n" for p in parts)
            f.write(block)
            written += len(block)


BASELINE = """
import sys, simdjson
parser = simdjson.Parser()
n = 0
with open(sys.argv[1], "rb", buffering=0) as f:
    carry = b""
    while block := f.read(8 << 20):
        records = (carry + block).split(b"\\x1e")
        carry = records.pop()
        for r in records:
            if r.strip():
                n += parser.parse(r).get("name") is not None
    if carry.strip():
        n += parser.parse(carry).get("name") is not None
print(n)
"""

DERIVED = """
import sys, warnings
from quicsm.extract.read import read_transitions
warnings.simplefilter("ignore")
frame = read_transitions(sys.argv[1], states="derived")
print(frame.height)
"""


def measure(code: str, path: Path, *, native: bool = True) -> dict[str, float]:
    start = time.perf_counter()
    env = {**os.environ, "QUICSM_NATIVE": "1" if native else "0"}
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, cwd=ROOT.parent, env=env
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    assert proc.stdout is not None
    out = proc.stdout.read().decode().strip()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"measurement failed ({proc.returncode}): {out}")
    return {
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "wall_s": wall,
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "output": float(out.splitlines()[-1]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=200)
    parser.add_argument("--keep", action="store_true", help="keep the generated file")
    args = parser.parse_args(argv)
    data = ROOT / "data"
    data.mkdir(exist_ok=True)
    path = data / f"derive-{args.size_mb:g}mb.sqlog"
    if not path.exists():
        generate(path, args.size_mb)
    size = path.stat().st_size / 1e6
    from quicsm import _native  # noqa: F401  (the measurement is of the native deriver: it must exist)

    base = measure(BASELINE, path)
    ours = measure(DERIVED, path)
    python = measure(DERIVED, path, native=False)
    if python["output"] != ours["output"]:
        raise SystemExit(f"native and Python derivers disagree: {ours} vs {python}")
    base_rate = size / base["cpu_s"]
    our_rate = size / ours["cpu_s"]
    python_rate = size / python["cpu_s"]
    print(f"file: {size:.1f} MB, one connection, metrics only ({path.name})")
    print(
        f"baseline (pysimdjson full parse): {base_rate:.0f} MB/s CPU, "
        f"peak RSS {base['peak_rss_mb']:.0f} MB"
    )
    print(
        f"derived (read_transitions, states=derived): {our_rate:.0f} MB/s CPU, "
        f"peak RSS {ours['peak_rss_mb']:.0f} MB, {ours['output']:.0f} rows"
    )
    print(
        f"derived, Python deriver (QUICSM_NATIVE=0): {python_rate:.0f} MB/s CPU, "
        f"peak RSS {python['peak_rss_mb']:.0f} MB, {python['output']:.0f} rows"
    )
    print(f"ratio derived / baseline: {our_rate / base_rate:.2f}x")
    print(f"ratio derived (Python deriver) / baseline: {python_rate / base_rate:.2f}x")
    results = ROOT / "results"
    results.mkdir(exist_ok=True)
    (results / "bench_derive.json").write_text(
        json.dumps(
            {
                "size_mb": size,
                "baseline": base,
                "derived": ours,
                "derived_python": python,
                "ratio": our_rate / base_rate,
                "ratio_python": python_rate / base_rate,
            },
            indent=2,
        )
    )
    if not args.keep:
        path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
