"""Throughput and peak memory of derived states: one long connection, and many real traces.

Two metrics-only JSON-SEQ inputs, written under ``benchmarks/data/``:

- **one connection** (``--size-mb``, default 200 MB): a seeded, aioquic-like trace, no
  ``congestion_state_updated``, packet events and ``recovery:metrics_updated`` after every send
  and every ACK (window, ssthresh, bytes in flight, RTTs), with losses and cutbacks now and then;
- **many traces** (``--multi-size-mb``, default 1000 MB, and at least ``--min-traces``, default
  1,000): the real traces of stock builds in the repository (quic-go v0.54.0's 30 traces in
  ``tests/fixtures/stock/``, aioquic 1.7.2's 70 in ``traces/``), their
  ``congestion_state_updated`` records left out, one after another in ONE file, taken in turn
  until the file is large enough and holds enough traces.

Each measurement runs in a fresh process; its CPU time and peak RSS come from ``wait4``. The
package's bytecode is written first, as it is where users run it
(:func:`quicsm.testing.bench.compile_package`):

- **pysimdjson** / **orjson**: a plain full parse: the file read in 8 MiB blocks, split into
  records at the RS bytes, every record parsed (``simdjson.Parser.parse``, ``orjson.loads``)
  and its ``name`` read;
- **derived**: ``quicsm.read_transitions(file, states="derived")`` (GC on, as users run it),
  with the native deriver (``quicsm._native``, built with the package);
- **derived, Python**: the same with ``QUICSM_NATIVE=0`` (the Python reference deriver);
  ``--no-python`` leaves it out.

Throughput is per CPU second (robust on a busy machine); the ratios are taken within one run.
The measurements take turns, ``--repeat`` rounds (default 3), and each kind keeps its least
CPU time (every round's is printed, and the kernel's share of the kept one); the Python
deriver runs once.

::

    .venv/bin/python benchmarks/bench_derive.py --shape one --size-mb 2000  # a 2 GB connection
    .venv/bin/python benchmarks/bench_derive.py --shape multi  # >= 1 GB and >= 1,000 traces

Targets (docs/derive.md, issue 29): derived >= 3x pysimdjson on both shapes at >= 1 GB; peak
RSS <= 300 MB. The row counts of the native and the Python runs must agree (tests/test_native.py
compares the rows themselves).
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

from quicsm.testing.bench import compile_package

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


#: real multi-trace qlog files from stock builds, states and all (tests/fixtures, traces/)
MULTI_SOURCES = (
    "tests/fixtures/stock/quic-go-v0.54.0.qlog",
    "traces/aioquic-1.7.2.qlog",
)


def real_traces(path: Path) -> list[list[bytes]]:
    """The traces of a real JSON-SEQ file (zstd or plain) as lists of records (the header
    first), each record without its separator; ``congestion_state_updated`` records are left
    out, so every trace is metrics-only."""
    import orjson
    import zstandard

    raw = path.read_bytes()
    if raw[:4] == b"\x28\xb5\x2f\xfd":
        raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    traces: list[list[bytes]] = []
    for record in raw.split(RS):
        if not record.strip() or b"congestion_state_updated" in record:
            continue
        if not record.startswith(b'{"time":'):
            obj = orjson.loads(record)
            if isinstance(obj, dict) and "trace" in obj and "name" not in obj:
                traces.append([record])
                continue
        traces[-1].append(record)
    return traces


def generate_multi(path: Path, size_mb: float, min_traces: int) -> int:
    """Real traces of stock builds (:data:`MULTI_SOURCES`, made metrics-only), one after
    another in one JSON-SEQ file, the sources taken in turn, until the file holds at least
    ``size_mb`` and ``min_traces`` traces; returns the number of traces."""
    pools = [real_traces(ROOT.parent / source) for source in MULTI_SOURCES]
    target = int(size_mb * (1 << 20))
    written = n = 0
    cursors = [0] * len(pools)
    with path.open("wb") as f:
        while written < target or n < min_traces:
            k = n % len(pools)
            trace = pools[k][cursors[k] % len(pools[k])]
            cursors[k] += 1
            block = b"".join(RS + record for record in trace)
            f.write(block)
            written += len(block)
            n += 1
    return n


#: a full parse of every record of the file by ``parse`` (set up by ``setup``), counting events
_FULL_PARSE = """
import sys
{setup}
n = 0
with open(sys.argv[1], "rb", buffering=0) as f:
    carry = b""
    while block := f.read(8 << 20):
        records = (carry + block).split(b"\\x1e")
        carry = records.pop()
        for r in records:
            if r.strip():
                n += parse(r).get("name") is not None
    if carry.strip():
        n += parse(carry).get("name") is not None
print(n)
"""
BASELINE = _FULL_PARSE.format(setup="import simdjson\nparse = simdjson.Parser().parse")
ORJSON = _FULL_PARSE.format(setup="from orjson import loads as parse")

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
        "kernel_s": usage.ru_stime,
        "wall_s": wall,
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "output": float(out.splitlines()[-1]),
    }


def run_shape(path: Path, label: str, *, python: bool, repeat: int = 1) -> dict[str, object]:
    """Every measurement of one input, in one run; prints and returns them. With ``repeat``,
    the measurements take turns (baseline, orjson, derived, then again), and each kind's least
    CPU time is kept: a disturbance of the shared machine then costs no kind its result."""
    size = path.stat().st_size / 1e6
    kinds = {"pysimdjson": BASELINE, "orjson": ORJSON, "derived": DERIVED}
    rounds = [{name: measure(code, path) for name, code in kinds.items()} for _ in range(repeat)]
    runs = {}
    for name in kinds:
        least = min((r[name] for r in rounds), key=lambda m: m["cpu_s"])
        runs[name] = {
            **least,
            "peak_rss_mb": max(r[name]["peak_rss_mb"] for r in rounds),
            "cpu_s_all": [r[name]["cpu_s"] for r in rounds],
        }
    if python:
        runs["derived_python"] = measure(DERIVED, path, native=False)
        if runs["derived_python"]["output"] != runs["derived"]["output"]:
            raise SystemExit(f"native and Python derivers disagree: {runs}")
    if runs["pysimdjson"]["output"] != runs["orjson"]["output"]:
        raise SystemExit(f"the two baselines read different record counts: {runs}")
    rate = {name: size / r["cpu_s"] for name, r in runs.items()}
    print(f"file: {size:.1f} MB, {label}, metrics only ({path.name})")
    for name, r in runs.items():
        extra = f", {r['output']:.0f} rows" if name.startswith("derived") else ""
        every = r.get("cpu_s_all", [])
        spread = (
            f" (least of {len(every)}: {', '.join(f'{c:.2f}' for c in every)})"
            if len(every) > 1
            else ""
        )
        print(
            f"  {name}: {r['cpu_s']:.2f} s CPU ({r['kernel_s']:.2f} s kernel){spread}, "
            f"{rate[name]:.0f} MB/s CPU, peak RSS {r['peak_rss_mb']:.0f} MB{extra}"
        )
    for name in ("derived", "derived_python"):
        if name in runs:
            print(
                f"  ratio {name} / pysimdjson: {rate[name] / rate['pysimdjson']:.2f}x, "
                f"/ orjson: {rate[name] / rate['orjson']:.2f}x"
            )
    return {
        "size_mb": size,
        "shape": label,
        **runs,
        "ratio": rate["derived"] / rate["pysimdjson"],
        "ratio_orjson": rate["derived"] / rate["orjson"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shape",
        choices=("one", "multi", "both"),
        default="both",
        help="one connection, many traces, or both",
    )
    parser.add_argument("--size-mb", type=float, default=200, help="the one-connection file")
    parser.add_argument("--multi-size-mb", type=float, default=1000, help="the many-trace file")
    parser.add_argument("--min-traces", type=int, default=1000, help="the many-trace file")
    parser.add_argument("--no-python", action="store_true", help="skip the Python deriver")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument(
        "--repeat", type=int, default=3, help="rounds of measurements; each kind's least CPU"
    )
    args = parser.parse_args(argv)
    compile_package()  # the bytecode users have (quicsm.testing.bench)
    data = ROOT / "data"
    data.mkdir(exist_ok=True)
    from quicsm import _native  # noqa: F401  (the measurement is of the native deriver: it must exist)

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results = []
    if args.shape in ("one", "both"):
        path = data / f"derive-{args.size_mb:g}mb.sqlog"
        if not path.exists():
            generate(path, args.size_mb)
        results.append(
            run_shape(path, "one connection", python=not args.no_python, repeat=args.repeat)
        )
        if not args.keep:
            path.unlink()
    if args.shape in ("multi", "both"):
        path = data / f"derive-multi-{args.multi_size_mb:g}mb-{args.min_traces}.sqlog"
        # written by a child process: the fixtures it holds in memory would otherwise count
        # in the peak RSS of every measurement (a forked child starts with its parent's pages)
        write = (
            "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
            "from bench_derive import generate_multi; "
            "print(generate_multi(Path(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])))"
        )
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                write,
                str(ROOT),
                str(path),
                str(args.multi_size_mb),
                str(args.min_traces),
            ],
            check=True,
            capture_output=True,
            cwd=ROOT.parent,
        ).stdout
        traces = int(out.decode().strip().splitlines()[-1])
        label = f"{traces:,} real traces"
        results.append(run_shape(path, label, python=not args.no_python, repeat=args.repeat))
        if not args.keep:
            path.unlink()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    out = ROOT / "results"
    out.mkdir(exist_ok=True)
    (out / "bench_derive.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
