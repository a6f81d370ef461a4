"""``quicsm infer`` on a large CSV against the API and a plain polars pipeline, in one run.

Targets (issue "Fast on every path"): on a 1,000,000-trace CSV (~11M rows) ``quicsm infer``
needs at most 2x the CPU time and 1.5x the peak memory of a plain polars pipeline that reads
the same file, sorts it, counts the directly-follows pairs and sums the time in each state (the
least any model of the file needs); at 100,000 traces the CLI is within 20 % of the API
(``read_transitions`` + ``infer``, no outputs written). Each program runs in its own process;
CPU = user + system time (start-up and imports included), memory = peak RSS.

    .venv/bin/python benchmarks/bench_cli_infer.py                       # 100k and 1M traces
    .venv/bin/python benchmarks/bench_cli_infer.py --traces 100000       # quick

The CSVs (trace, time_ms, state; synthetic QUIC-like traces from
:mod:`quicsm.testing.synthetic`) are written to a temporary directory, or kept in
``--csv-dir``. Results go to ``benchmarks/results/bench_cli_infer.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from quicsm.testing.bench import compile_package

RESULTS = Path(__file__).parent / "results" / "bench_cli_infer.json"
MB = 2**20


def run_cpu(cmd: list[str]) -> dict[str, Any]:
    """Run ``cmd``; CPU seconds (user + system, children included), wall, peak RSS."""
    gnu_time = "/usr/bin/time" if Path("/usr/bin/time").exists() else None
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as report:
        wrapped = [gnu_time, "-f", "%M", "-o", report.name, *cmd] if gnu_time else cmd
        start = time.perf_counter()
        proc = subprocess.Popen(wrapped, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
        fields = report.read().split()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{cmd[:4]} failed ({code}):\n{text[-3000:]}")
    rss = int(fields[-1]) * 1024 if gnu_time and fields else usage.ru_maxrss * 1024
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": wall, "rss_bytes": rss}


def child_polars(csv: str) -> None:
    """The baseline: read, sort, directly-follows counts and time in state."""
    import polars as pl

    df = pl.read_csv(csv, columns=["trace", "time_ms", "state"])
    df = df.sort("trace", "time_ms", maintain_order=True)
    nxt = pl.col("state").shift(-1).over("trace")
    dwell = (pl.col("time_ms").shift(-1).over("trace") - pl.col("time_ms")).fill_null(0.0)
    df = df.with_columns(nxt.alias("next"), dwell.alias("dwell"))
    pairs = df.group_by("state", "next").len()
    time_in_state = df.group_by("state").agg(pl.col("dwell").sum())
    print(pairs.height, time_in_state.height)


def child_api(csv: str) -> None:
    import quicsm

    model = quicsm.infer(quicsm.read_transitions([csv]))
    print(model.nodes.height, model.edges.height)


def write_csv(n: int, path: Path, seed: int) -> int:
    import polars as pl

    from quicsm.testing.synthetic import generate_transitions

    df = generate_transitions(n, seed=seed)
    df.select("trace", pl.col("time_ms").round(3), "state").write_csv(path)
    return df.height


def bench_size(n: int, *, csv_dir: Path, seed: int, repeat: int) -> dict[str, Any]:
    csv = csv_dir / f"transitions-{n}-s{seed}.csv"
    if not csv.exists():
        write_csv(n, csv, seed)
    me = [sys.executable, __file__]
    programs = {
        "polars": [*me, "child-polars", str(csv)],
        "api": [*me, "child-api", str(csv)],
        "cli": [
            sys.executable,
            "-m",
            "quicsm",
            "infer",
            str(csv),
            "-o",
            str(csv_dir / f"out-{n}"),
            "-q",
        ],
    }
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in programs}
    for _ in range(repeat):  # alternating, so load changes hit every program alike
        for name, cmd in programs.items():
            runs[name].append(run_cpu(cmd))
    row: dict[str, Any] = {"traces": n, "csv_mb": csv.stat().st_size / MB}
    for name, rs in runs.items():
        row[name] = {
            "cpu_s": statistics.median(r["cpu_s"] for r in rs),
            "cpu_all_s": [round(r["cpu_s"], 2) for r in rs],
            "wall_s": statistics.median(r["wall_s"] for r in rs),
            "rss_mb": max(r["rss_bytes"] for r in rs) / MB,
        }
    return row


def report(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| traces | CSV (MB) | polars CPU (s) / RSS (MB) | API CPU (s) / RSS (MB) | "
        "CLI CPU (s) / RSS (MB) | CLI / polars CPU | CLI / polars RSS | CLI / API CPU |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        p, a, c = r["polars"], r["api"], r["cli"]
        lines.append(
            f"| {r['traces']} | {r['csv_mb']:.0f} | {p['cpu_s']:.2f} / {p['rss_mb']:.0f} | "
            f"{a['cpu_s']:.2f} / {a['rss_mb']:.0f} | {c['cpu_s']:.2f} / {c['rss_mb']:.0f} | "
            f"{c['cpu_s'] / p['cpu_s']:.2f}x | {c['rss_mb'] / p['rss_mb']:.2f}x | "
            f"{c['cpu_s'] / a['cpu_s']:.2f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "child-polars":
        child_polars(sys.argv[2])
        return
    if len(sys.argv) == 3 and sys.argv[1] == "child-api":
        child_api(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--traces",
        type=int,
        nargs="+",
        default=[100_000, 1_000_000],
        help="traces in each generated CSV, one measurement per size",
    )
    ap.add_argument("--seed", type=int, default=1, help="seed of the synthetic traces")
    ap.add_argument("--repeat", type=int, default=1, help="runs per program (median)")
    ap.add_argument("--csv-dir", type=Path, help="keep (and reuse) the generated CSVs here")
    ap.add_argument("--out", type=Path, default=RESULTS, help="the results file")
    opts = ap.parse_args()
    compile_package()  # the bytecode users have (quicsm.testing.bench)
    with tempfile.TemporaryDirectory() as tmp:
        csv_dir = opts.csv_dir or Path(tmp)
        csv_dir.mkdir(parents=True, exist_ok=True)
        rows = [
            bench_size(n, csv_dir=csv_dir, seed=opts.seed, repeat=opts.repeat) for n in opts.traces
        ]
    checks: dict[str, bool] = {}
    for r in rows:
        if r["traces"] >= 1_000_000:
            checks[f"{r['traces']} traces: CLI CPU <= 2x polars"] = (
                r["cli"]["cpu_s"] <= 2 * r["polars"]["cpu_s"]
            )
            checks[f"{r['traces']} traces: CLI peak RSS <= 1.5x polars"] = (
                r["cli"]["rss_mb"] <= 1.5 * r["polars"]["rss_mb"]
            )
        if r["traces"] == 100_000:
            checks["100000 traces: CLI CPU within 20% of the API"] = (
                r["cli"]["cpu_s"] <= 1.2 * r["api"]["cpu_s"]
            )
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps({"rows": rows, "checks": checks}, indent=1))
    print(report(rows))
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")


if __name__ == "__main__":
    main()
