"""Synoptic-equivalent inference speed and memory, as ratios measured in the same run.

Targets (issue: "Inference ... Speed"): on 100,000 synthetic traces (~1M events) quicsm's
``synoptic`` inference is >= 50x faster than Synoptic (Java) and peaks below 1.5 GB; on
1,000,000 traces it takes < 60 s. Every measured program runs in its own process so wall
time and peak memory (max RSS, from ``wait4``) are measured alike:

- ``quicsm``: read the transitions (Parquet), build the deduplicated log, mine invariants,
  refine + coarsen (the whole of ``EventLog.from_transitions`` + ``mine_invariants`` +
  ``infer_graph``);
- ``dfg``: a plain polars baseline on the same file, the directly-follows graph
  (count of each state -> next state pair), i.e. the least work any model needs;
- ``synoptic``: the real Synoptic on the same traces in its text format, when a build is given
  by ``--synoptic-classpath`` / ``QUICSM_SYNOPTIC_CLASSPATH`` (nothing of it is built here).
  It gets ``--synoptic-timeout`` seconds; if it does not finish, the speed-up is reported as a
  lower bound ("> x").

    .venv/bin/python benchmarks/bench_infer.py                    # 100k and 1M traces
    .venv/bin/python benchmarks/bench_infer.py --traces 10000 --large 0   # quick

Results are printed and written to ``benchmarks/results/bench_infer.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from quicsm.testing.bench import compile_package

RESULTS = Path(__file__).parent / "results" / "bench_infer.json"
GB = 2**30


def _tree_hwm(pid: int) -> int:
    """Largest peak RSS (VmHWM, bytes) among ``pid`` and its descendants, read from /proc."""
    best, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                best = max(best, int(line.split()[1]) * 1024)
        todo.extend(int(k) for k in kids)
    return best


def measured(cmd: list[str], *, timeout: float | None = None) -> dict[str, Any]:
    """Run ``cmd``; wall seconds, peak RSS bytes, whether it finished, its stdout.

    The peak RSS comes from GNU time's report when it is installed (a child forked from this
    Python process would otherwise count the parent's pages in its ``ru_maxrss``) and from
    sampling the process tree's VmHWM every 0.25 s (the only number left for a program killed
    at its timeout).
    """
    gnu_time = "/usr/bin/time" if Path("/usr/bin/time").exists() else None
    if timeout is not None and shutil.which("timeout"):
        # coreutils' timeout kills the program; GNU time still reports its peak RSS
        cmd = ["timeout", "-s", "KILL", f"{timeout:.0f}", *cmd]
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as report:
        wrapped = [gnu_time, "-f", "%M", "-o", report.name, *cmd] if gnu_time else cmd
        start = time.perf_counter()
        proc = subprocess.Popen(
            wrapped, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = None if timeout is None else start + timeout + 60
        sampled, next_sample = 0, start
        while True:
            if time.perf_counter() >= next_sample:
                sampled = max(sampled, _tree_hwm(proc.pid))
                next_sample = time.perf_counter() + 0.25
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if deadline is not None and time.perf_counter() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)  # last resort
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        wall = time.perf_counter() - start
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
        fields = report.read().split()
        reported = int(fields[-1]) * 1024 if gnu_time and fields and fields[-1].isdigit() else 0
        # a killed program leaves no report: fall back on the peak sampled from /proc
        rss = max(reported, sampled) if reported or sampled else usage.ru_maxrss * 1024
    finished = timeout is None or wall < timeout
    code = os.waitstatus_to_exitcode(status)
    if finished and code != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({code}):\n{text[-3000:]}")
    return {"wall_s": wall, "rss_bytes": rss, "finished": finished, "output": text}


def child_quicsm(parquet: str) -> None:
    import polars as pl

    from quicsm.model.synoptic import EventLog, infer_graph, mine_invariants

    t0 = time.perf_counter()
    df = pl.read_parquet(parquet)
    t1 = time.perf_counter()
    log = EventLog.from_transitions(df)
    t2 = time.perf_counter()
    invariants = mine_invariants(log)
    t3 = time.perf_counter()
    nodes, edges = infer_graph(log)
    t4 = time.perf_counter()
    print(
        json.dumps(
            {
                "read_s": t1 - t0,
                "log_s": t2 - t1,
                "mine_s": t3 - t2,
                "infer_s": t4 - t3,
                "inference_s": t4 - t1,
                "distinct_traces": log.n_unique,
                "events": log.n_events,
                "invariants": invariants.height,
                "nodes": nodes.height,
                "edges": edges.height,
            }
        )
    )


def child_dfg(parquet: str) -> None:
    import polars as pl

    t0 = time.perf_counter()
    df = pl.read_parquet(parquet, columns=["trace", "time_ms", "state"])
    t1 = time.perf_counter()
    dfg = (
        df.sort("trace", "time_ms", maintain_order=True)
        .with_columns(pl.col("state").shift(-1).over("trace").alias("next"))
        .group_by("state", "next")
        .len()
    )
    t2 = time.perf_counter()
    print(json.dumps({"read_s": t1 - t0, "inference_s": t2 - t1, "edges": dfg.height}))


def last_json(text: str) -> dict[str, Any]:
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            return dict(json.loads(line))
    raise RuntimeError(f"no result in output:\n{text[-2000:]}")


def bench_size(
    n: int, *, work: Path, classpath: str | None, timeout: float, java_heap: str, seed: int
) -> dict[str, Any]:
    from quicsm.testing.synthetic import generate_transitions, write_synoptic_log

    parquet = work / f"t{n}.parquet"
    transitions = generate_transitions(n, seed=seed)
    transitions.write_parquet(parquet)
    row: dict[str, Any] = {"traces": n, "rows": transitions.height}
    me = [sys.executable, __file__]
    q = measured([*me, "child-quicsm", str(parquet)])
    row["quicsm"] = {**last_json(q["output"]), "wall_s": q["wall_s"], "rss_bytes": q["rss_bytes"]}
    d = measured([*me, "child-dfg", str(parquet)])
    row["dfg"] = {**last_json(d["output"]), "wall_s": d["wall_s"], "rss_bytes": d["rss_bytes"]}
    if classpath:
        text_log = work / f"t{n}.txt"
        write_synoptic_log(transitions, text_log)
        del transitions
        s = measured(
            [
                "java",
                f"-Xmx{java_heap}",
                "-cp",
                classpath,
                "synoptic.main.SynopticMain",
                "-r",
                "^(?<TYPE>.+)$",
                "-s",
                "^--$",
                "-o",
                str(work / f"syn{n}"),
                "--randomSeed=0",
                str(text_log),
            ],
            timeout=timeout,
        )
        row["synoptic"] = {
            "wall_s": s["wall_s"],
            "rss_bytes": s["rss_bytes"],
            "finished": s["finished"],
        }
    return row


def report(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| traces | events | quicsm inference (s) | quicsm wall (s) | quicsm peak RSS (GB) | "
        "dfg baseline (s) | quicsm / dfg | Synoptic wall (s) | Synoptic peak RSS (GB) | "
        "speed-up vs Synoptic |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        q, d = r["quicsm"], r["dfg"]
        syn = r.get("synoptic")
        if syn:
            ratio = syn["wall_s"] / q["wall_s"]
            speed = f"{ratio:.0f}x" if syn["finished"] else f"> {ratio:.0f}x (killed)"
            syn_wall = f"{syn['wall_s']:.1f}" + ("" if syn["finished"] else "+")
            syn_rss = f"{syn['rss_bytes'] / GB:.2f}"
        else:
            speed = syn_wall = syn_rss = "—"
        lines.append(
            f"| {r['traces']} | {q['events']} | {q['inference_s']:.2f} | {q['wall_s']:.2f} | "
            f"{q['rss_bytes'] / GB:.2f} | {d['inference_s']:.2f} | "
            f"{q['inference_s'] / d['inference_s']:.1f} | {syn_wall} | {syn_rss} | {speed} |"
        )
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "child-quicsm":
        child_quicsm(sys.argv[2])
        return
    if len(sys.argv) == 3 and sys.argv[1] == "child-dfg":
        child_dfg(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=int, default=100_000, help="traces in the main comparison")
    ap.add_argument("--large", type=int, default=1_000_000, help="0 to skip")
    ap.add_argument("--seed", type=int, default=1, help="seed of the synthetic traces")
    ap.add_argument(
        "--synoptic-classpath",
        default=os.environ.get("QUICSM_SYNOPTIC_CLASSPATH"),
        help="a Synoptic build (default: $QUICSM_SYNOPTIC_CLASSPATH; none: no Synoptic row)",
    )
    ap.add_argument(
        "--synoptic-timeout", type=float, default=3600.0, help="wall seconds Synoptic may take"
    )
    ap.add_argument("--java-heap", default="14g", help="Synoptic's JVM heap (-Xmx)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="the results file")
    opts = ap.parse_args()
    compile_package()  # the bytecode users have (quicsm.testing.bench)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rows.append(
            bench_size(
                opts.traces,
                work=work,
                classpath=opts.synoptic_classpath,
                timeout=opts.synoptic_timeout,
                java_heap=opts.java_heap,
                seed=opts.seed,
            )
        )
        if opts.large:
            rows.append(
                bench_size(
                    opts.large,
                    work=work,
                    classpath=None,
                    timeout=opts.synoptic_timeout,
                    java_heap=opts.java_heap,
                    seed=opts.seed,
                )
            )
    checks = {}
    main_row = rows[0]
    if "synoptic" in main_row:
        checks["speed-up vs Synoptic >= 50x"] = (
            main_row["synoptic"]["wall_s"] / main_row["quicsm"]["wall_s"] >= 50
        )
    checks[f"peak RSS < 1.5 GB at {opts.traces} traces"] = (
        main_row["quicsm"]["rss_bytes"] < 1.5 * GB
    )
    if opts.large:
        checks[f"{opts.large} traces in < 60 s"] = rows[1]["quicsm"]["inference_s"] < 60
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps({"rows": rows, "checks": checks}, indent=1))
    print(report(rows))
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")


if __name__ == "__main__":
    main()
