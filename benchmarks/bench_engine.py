"""Throughput of the engines on many small qlog files, against the single-process baseline.

Generates ``--files`` (default 100,000) seeded JSON-SEQ qlog files under
``benchmarks/data/engine-<n>/``, one connection each: a header with labels, packet events,
metrics updates and a random walk over the paper's congestion states (a small Markov chain, so
the corpus has many distinct state sequences but far fewer than traces). Then, in the same run,
each configuration in a fresh process:

- **baseline**: ``extract(engine="local", workers=1)``: every batch in one process (the
  single-process figure the others are divided by);
- **processes 1 / 2**: a pool of 1 or 2 worker processes;
- **dask 1 / 2**: a ``dask.distributed`` LocalCluster of 1 or 2 single-threaded workers;
- **per-file calls**: ``read_transitions([file])`` once per file on the first ``--sample``
  files (what ``quicsm infer`` did per file while showing progress), as files/s;
- **cache**: a run that fills the partition cache, a warm re-run, and a re-run after 10 % more
  files were added (it reads only those).

Reported: files/s and MB/s (wall clock) and the speed-up over the baseline; CPU time per file
(driver and workers together, worker start-up included) and the baseline's CPU per file divided
by it (1.00 = no overhead); the mean load average during the run (on a shared machine the wall
clock follows the load, CPU time much less); peak RSS of the driver and of the largest worker;
and how many distinct state sequences inference runs on as the corpus grows (the weighted trace
set). No cache is used except in the cache rows. The Dask rows time a running cluster (its
start is not included); the process rows include starting the pool.

::

    nice .venv/bin/python benchmarks/bench_engine.py                  # 10^5 files
    .venv/bin/python benchmarks/bench_engine.py --files 2000 --sample 500   # a quick look

Results are written to ``benchmarks/results/bench_engine.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent
RS = b"\x1e"

#: successors of each state in the generated walks (weights), END ends the connection
CHAIN: dict[str, dict[str, float]] = {
    "slow_start": {"recovery": 0.5, "congestion_avoidance": 0.3, "application_limited": 0.2},
    "recovery": {"congestion_avoidance": 0.8, "slow_start": 0.1, "END": 0.1},
    "congestion_avoidance": {"recovery": 0.5, "application_limited": 0.3, "END": 0.2},
    "application_limited": {"congestion_avoidance": 0.4, "END": 0.6},
}


def _walk(rng: random.Random) -> list[str]:
    state, out = "slow_start", ["slow_start"]
    while len(out) < 40:
        names, weights = zip(*CHAIN[state].items(), strict=True)
        state = rng.choices(names, weights)[0]
        if state == "END":
            break
        out.append(state)
    return out


def qlog_file(i: int, rng: random.Random) -> bytes:
    header = {
        "qlog_format": "JSON-SEQ",
        "qlog_version": "0.3",
        "title": "bench",
        "trace": {
            "vantage_point": {"type": "server"},
            "common_fields": {"reference_time": 0},
            "quicsm_labels": {"run": i, "scenario": "bench"},
        },
    }
    out = [RS + orjson.dumps(header) + b"\n"]
    t = 0.0
    cwnd = 13500
    for state in _walk(rng):
        out.append(
            RS
            + b'{"time":%.3f,"name":"recovery:congestion_state_updated","data":{"new":"%s"}}\n'
            % (t, state.encode())
        )
        for _ in range(rng.randint(1, 4)):
            t += rng.expovariate(1 / 5.0)
            cwnd += rng.randint(-1200, 2400)
            out.append(
                RS + b'{"time":%.3f,"name":"transport:packet_sent","data":{"header":'
                b'{"packet_type":"1RTT","packet_number":%d},"raw":{"length":1252}}}\n'
                % (t, rng.getrandbits(20))
            )
            out.append(
                RS + b'{"time":%.3f,"name":"recovery:metrics_updated","data":'
                b'{"congestion_window":%d,"bytes_in_flight":%d}}\n'
                % (t, max(cwnd, 2400), rng.randint(0, 40000))
            )
    return b"".join(out)


def generate(directory: Path, n: int, *, seed: int, start: int = 0) -> list[Path]:
    """Files ``start .. n-1`` of the seeded corpus (existing ones are kept)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(start, n):
        path = directory / f"{i // 1000:03d}" / f"conn-{i:06d}.sqlog"
        if not path.exists():
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(qlog_file(i, random.Random(seed * 1_000_003 + i)))
        paths.append(path)
    return paths


def _one(config: dict[str, Any]) -> dict[str, Any]:
    """Run one configuration in this (fresh) process; print its measurements as JSON."""
    from quicsm.engine import extract

    files = Path(config["list"]).read_text().split("\n")
    load = os.getloadavg()[0]
    if config.get("kind") == "per-file":
        from quicsm.extract.read import read_transitions

        cpu0 = _cpu(resource.RUSAGE_SELF)
        start = time.perf_counter()
        for f in files:
            read_transitions([f])
        wall = time.perf_counter() - start
        return {
            "wall_s": wall,
            "files": len(files),
            "cpu_s": _cpu(resource.RUSAGE_SELF) - cpu0,
            "load": (load + os.getloadavg()[0]) / 2,
            "driver_rss_mb": _rss(resource.RUSAGE_SELF),
        }
    worker_rss: list[float] = []
    cpu0 = _cpu(resource.RUSAGE_SELF)
    start = time.perf_counter()
    corpus = extract(
        files,
        engine=config["engine"],
        workers=config["workers"],
        cache=config.get("cache_dir") is not None,
        cache_dir=config.get("cache_dir"),
    )
    wall = time.perf_counter() - start
    cpu = _cpu(resource.RUSAGE_SELF) - cpu0 + _cpu(resource.RUSAGE_CHILDREN)
    if corpus.workers > 1 or config["engine"] == "processes":
        worker_rss.append(_rss(resource.RUSAGE_CHILDREN))
    assert corpus.aggregate is not None
    return {
        "wall_s": wall,
        "files": len(files),
        "cpu_s": cpu,
        "load": (load + os.getloadavg()[0]) / 2,
        "traces": corpus.aggregate.traces,
        "visits": corpus.aggregate.visits,
        "distinct": corpus.aggregate.distinct,
        "read_files": corpus.read_files,
        "cached_files": corpus.cached_files,
        "driver_rss_mb": _rss(resource.RUSAGE_SELF),
        "worker_rss_mb": max(worker_rss) if worker_rss else None,
    }


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _rss(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0  # KiB on Linux


def run_config(config: dict[str, Any]) -> dict[str, Any]:
    if config.get("engine") == "dask":
        config = {**config, "kind": "dask"}
    out = subprocess.run(
        [sys.executable, __file__, "--one", json.dumps(config)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _one_dask(config: dict[str, Any]) -> dict[str, Any]:
    """A Dask run on a LocalCluster we start, so the workers' peak RSS can be asked for."""
    from distributed import Client, LocalCluster

    from quicsm.engine import extract

    files = Path(config["list"]).read_text().split("\n")
    with (
        LocalCluster(
            n_workers=config["workers"], threads_per_worker=1, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        load = os.getloadavg()[0]
        before = client.run(_cpu, resource.RUSAGE_SELF)
        cpu0 = _cpu(resource.RUSAGE_SELF)
        start = time.perf_counter()
        corpus = extract(files, engine="dask", scheduler=cluster.scheduler_address, cache=False)
        wall = time.perf_counter() - start
        cpu = _cpu(resource.RUSAGE_SELF) - cpu0
        after = client.run(_cpu, resource.RUSAGE_SELF)
        cpu += sum(after[w] - before[w] for w in after if w in before)
        peaks = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)
    assert corpus.aggregate is not None
    return {
        "wall_s": wall,
        "files": len(files),
        "cpu_s": cpu,
        "load": (load + os.getloadavg()[0]) / 2,
        "traces": corpus.aggregate.traces,
        "visits": corpus.aggregate.visits,
        "distinct": corpus.aggregate.distinct,
        "driver_rss_mb": _rss(resource.RUSAGE_SELF),
        "worker_rss_mb": max(peaks.values()),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--files", type=int, default=100_000, help="trace files in the generated corpus")
    p.add_argument("--sample", type=int, default=5_000, help="files for the per-file row")
    p.add_argument("--seed", type=int, default=1, help="seed of the synthetic traces")
    p.add_argument(
        "--data-dir",
        type=Path,
        default=ROOT / "data",
        help="where the corpus is generated (and reused)",
    )
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        config = json.loads(args.one)
        result = _one_dask(config) if config.get("kind") == "dask" else _one(config)
        print(json.dumps(result))
        return result

    t0 = time.perf_counter()
    directory = args.data_dir / f"engine-{args.files}-seed{args.seed}"
    grown = int(args.files * 1.1)
    paths = generate(directory, grown, seed=args.seed)
    gen_s = time.perf_counter() - t0
    main_files = [str(x) for x in paths[: args.files]]
    nbytes = sum(Path(f).stat().st_size for f in main_files)
    tmp = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    lists = {}
    for name, subset in (
        ("all", main_files),
        ("grown", [str(x) for x in paths]),
        ("sample", main_files[: args.sample]),
        ("1%", main_files[: max(1, args.files // 100)]),
        ("10%", main_files[: max(1, args.files // 10)]),
    ):
        lists[name] = tmp / f"{name}.txt"
        lists[name].write_text("\n".join(subset))
    print(
        f"{args.files} files, {nbytes / 1e6:.1f} MB (generated/checked in {gen_s:.0f} s)",
        flush=True,
    )

    rows: dict[str, dict[str, Any]] = {}

    def run(name: str, config: dict[str, Any]) -> dict[str, Any]:
        result = run_config(config)
        rows[name] = result
        files_s = result["files"] / result["wall_s"]
        base = rows.get("baseline (local, 1 process)")
        speedup = files_s / (base["files"] / base["wall_s"]) if base else 1.0
        extra = ""
        if "read_files" in result:
            extra = f"  read {result['read_files']}, cached {result['cached_files']}"
        worker = result.get("worker_rss_mb")
        cpu_ms = 1000 * result["cpu_s"] / result["files"]
        base_cpu = 1000 * base["cpu_s"] / base["files"] if base else cpu_ms
        print(
            f"{name:32s} {result['wall_s']:7.1f} s {files_s:7.0f} files/s "
            f"{nbytes * result['files'] / args.files / result['wall_s'] / 1e6:6.2f} MB/s "
            f"x{speedup:5.2f}  cpu {cpu_ms:5.3f} ms/file (x{base_cpu / cpu_ms:4.2f})  "
            f"load {result['load']:4.1f}  driver {result['driver_rss_mb']:4.0f} MB"
            + (f"  worker peak {worker:4.0f} MB" if worker else "")
            + extra,
            flush=True,
        )
        return result

    base = run(
        "baseline (local, 1 process)", {"list": str(lists["all"]), "engine": "local", "workers": 1}
    )
    run("processes, 1 worker", {"list": str(lists["all"]), "engine": "processes", "workers": 1})
    run("processes, 2 workers", {"list": str(lists["all"]), "engine": "processes", "workers": 2})
    run("dask LocalCluster, 1 worker", {"list": str(lists["all"]), "engine": "dask", "workers": 1})
    run("dask LocalCluster, 2 workers", {"list": str(lists["all"]), "engine": "dask", "workers": 2})
    run(
        f"per-file read_transitions ({args.sample})",
        {"list": str(lists["sample"]), "kind": "per-file"},
    )
    cache_dir = str(tmp / "cache")
    cached = {"engine": "local", "workers": 2, "cache_dir": cache_dir}
    run("cache: cold (local, 2)", {**cached, "list": str(lists["all"])})
    run("cache: warm re-run", {**cached, "list": str(lists["all"])})
    run("cache: +10% files", {**cached, "list": str(lists["grown"])})
    sizes = {}
    for name in ("1%", "10%"):
        sizes[name] = run_config({**cached, "list": str(lists[name])})
    sizes["100%"] = base
    sizes["110%"] = rows["cache: +10% files"]
    print("distinct state sequences (the weighted trace set inference runs on):")
    for name, r in sizes.items():
        print(f"  {r['traces']:>8} traces -> {r['distinct']:>6} distinct ({name} of the corpus)")
    shutil.rmtree(tmp, ignore_errors=True)
    summary = {
        "files": args.files,
        "bytes": nbytes,
        "rows": rows,
        "distinct": {k: [v["traces"], v["distinct"]] for k, v in sizes.items()},
    }
    out = ROOT / "results" / "bench_engine.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


if __name__ == "__main__":
    main()
