"""CPU time of quicsm's Synoptic engine against the real Synoptic on Synoptic's own logs.

Target (issue "Fast on every path"): on Synoptic's strace logs (``ls`` and ``ping``: a few long
traces with many distinct events, where refinement dominates) quicsm needs at most the CPU time
of Synoptic (Java), with identical invariants. Both run on the same traces in their own
processes, ``--repeat`` times each, alternating; CPU = user + system time of the process (JVM
or Python start-up, parsing and output included), reported as medians, with peak RSS.

The logs are not part of quicsm: give the ``traces/strace`` directory of a Synoptic checkout
and a Synoptic build (``--synoptic-classpath`` or ``QUICSM_SYNOPTIC_CLASSPATH``; how to build
one is in docs/synoptic.md)::

    QUICSM_SYNOPTIC_CLASSPATH=... .venv/bin/python benchmarks/bench_synoptic_logs.py \\
        SYNOPTIC/traces/strace --logs ls ping --repeat 3

Synoptic reads the log with the directory's ``args.txt`` options; quicsm reads exactly the
traces Synoptic parsed (from Synoptic's trace-graph dump). Results go to
``benchmarks/results/bench_synoptic_logs.json``.
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

import compare_synoptic as cs  # the comparison's parsers (same directory)

from quicsm.testing.bench import compile_package

RESULTS = Path(__file__).parent / "results" / "bench_synoptic_logs.json"


def run_cpu(cmd: list[str], *, cwd: Path | None = None) -> dict[str, Any]:
    """Run ``cmd``; CPU seconds (user + system, children included), wall, peak RSS."""
    gnu_time = "/usr/bin/time" if Path("/usr/bin/time").exists() else None
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as report:
        wrapped = [gnu_time, "-f", "%M", "-o", report.name, *cmd] if gnu_time else cmd
        start = time.perf_counter()
        proc = subprocess.Popen(wrapped, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
        fields = report.read().split()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{cmd[:4]} failed ({code}):\n{text[-3000:]}")
    rss = int(fields[-1]) * 1024 if gnu_time and fields else usage.ru_maxrss * 1024
    return {
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "wall_s": wall,
        "rss_bytes": rss,
        "output": text,
    }


def bench_log(
    name: str, strace: Path, *, classpath: str, repeat: int, java_heap: str, work: Path
) -> dict[str, Any]:
    args = cs.read_args_file(strace / "args.txt")
    java = ["java", f"-Xmx{java_heap}", "-cp", classpath, "synoptic.main.SynopticMain", *args]
    prefix = work / name
    common = [
        "--outputSupportCount",
        "--outputInvariantsToFile",
        "--outputCountLabels",
        "--randomSeed=0",
    ]
    # one untimed run for the traces Synoptic parsed and its invariants
    run_cpu(
        [*java, "-o", str(prefix), *common, "--dumpTraceGraphDotFile", f"{name}.txt"], cwd=strace
    )
    traces = cs.traces_from_tracegraph(Path(f"{prefix}.tracegraph.dot"))
    syn_invs = set()
    for line in Path(f"{prefix}.invariants.txt").read_text().splitlines():
        if m := cs._INV.match(line):
            syn_invs.add((m[2], m[1], m[3], int(m[4])))
    plain = work / f"{name}.plain.txt"
    plain.write_text("--\n".join("".join(f"{e}\n" for e in t) for t in traces))
    out_json = work / f"{name}.quicsm.json"
    syn_runs, q_runs = [], []
    for _ in range(repeat):
        syn_runs.append(run_cpu([*java, "-o", str(prefix), *common, f"{name}.txt"], cwd=strace))
        q_runs.append(
            run_cpu([sys.executable, cs.__file__, "quicsm-run", str(plain), str(out_json)])
        )
    q = json.loads(out_json.read_text())
    q_invs = {(r["kind"], r["a"], r["b"], r["support"]) for r in q["invariants"]}
    syn_nodes, syn_edges = cs.synoptic_model(Path(f"{prefix}.dot"))

    def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "cpu_s": statistics.median(r["cpu_s"] for r in runs),
            "cpu_all_s": [round(r["cpu_s"], 3) for r in runs],
            "wall_s": statistics.median(r["wall_s"] for r in runs),
            "rss_mb": max(r["rss_bytes"] for r in runs) / 2**20,
        }

    return {
        "log": name,
        "traces": len(traces),
        "events": sum(len(t) for t in traces),
        "event_types": len({e for t in traces for e in t}),
        "invariants_identical": syn_invs == q_invs,
        "invariants": len(q_invs),
        "synoptic": {**summary(syn_runs), "nodes": syn_nodes.height, "edges": syn_edges.height},
        "quicsm": {
            **summary(q_runs),
            "nodes": len(q["nodes"]),
            "edges": len(q["edges"]),
            "seconds": q["seconds"],
        },
    }


def report(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| log | traces | events | event types | invariants identical | Synoptic CPU (s) | "
        "Synoptic RSS (MB) | Synoptic nodes / edges | quicsm CPU (s) | quicsm RSS (MB) | "
        "quicsm nodes / edges | quicsm / Synoptic CPU |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        s, q = r["synoptic"], r["quicsm"]
        lines.append(
            f"| {r['log']} | {r['traces']} | {r['events']} | {r['event_types']} | "
            f"{'yes' if r['invariants_identical'] else 'NO'} ({r['invariants']}) | "
            f"{s['cpu_s']:.2f} | {s['rss_mb']:.0f} | {s['nodes']} / {s['edges']} | "
            f"{q['cpu_s']:.2f} | {q['rss_mb']:.0f} | {q['nodes']} / {q['edges']} | "
            f"{q['cpu_s'] / s['cpu_s']:.2f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("strace", type=Path, help="the traces/strace directory of a Synoptic checkout")
    ap.add_argument(
        "--logs",
        nargs="+",
        default=["ls", "ping"],
        help="the strace logs to run (names under the directory)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="runs of each program (median)")
    cs.add_synoptic_options(ap)
    ap.add_argument("--out", type=Path, default=RESULTS, help="the results file")
    opts = ap.parse_args()
    compile_package()  # the bytecode users have (quicsm.testing.bench)
    cs.need_synoptic(opts)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in opts.logs:
            print(f"... {name}", file=sys.stderr, flush=True)
            rows.append(
                bench_log(
                    name,
                    opts.strace.resolve(),
                    classpath=opts.synoptic_classpath,
                    repeat=opts.repeat,
                    java_heap=opts.java_heap,
                    work=Path(tmp),
                )
            )
    checks = {
        f"{r['log']}: quicsm CPU <= Synoptic CPU, identical invariants": (
            r["invariants_identical"] and r["quicsm"]["cpu_s"] <= r["synoptic"]["cpu_s"]
        )
        for r in rows
    }
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps({"rows": rows, "checks": checks}, indent=1))
    print(report(rows))
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")


if __name__ == "__main__":
    main()
