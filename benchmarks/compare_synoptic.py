"""Compare quicsm's Synoptic engine with the real Synoptic, log by log.

Runs an externally built Synoptic (its class path comes from ``--synoptic-classpath`` or the
``QUICSM_SYNOPTIC_CLASSPATH`` environment variable; nothing of Synoptic is built or shipped
here) and quicsm on the same logs, each in its own process so that wall time and peak memory
(max RSS) are measured the same way, then compares

- the mined invariant sets (kind, a, b, support) — must be identical;
- the final models: node counts per label, and edge probabilities (per source/target label
  pair, sorted, compared elementwise);
- that each model accepts every input trace and satisfies every mined invariant.

Logs: Synoptic's own totally ordered examples (``--examples`` = the ``traces/`` directory of a
Synoptic checkout; quicsm reads the traces Synoptic parsed, from its ``--dumpTraceGraphDotFile``
output) and synthetic QUIC-like state logs from :mod:`quicsm.testing.synthetic`::

    QUICSM_SYNOPTIC_CLASSPATH=... .venv/bin/python benchmarks/compare_synoptic.py \\
        --examples SYNOPTIC/traces --sizes 100 1000 10000 --seeds 0 1 2

Synoptic's result depends on its random seed on small logs, so each log is run with every
``--seeds`` value and the report says which seeds produced exactly quicsm's model. Results go
to ``benchmarks/results/compare_synoptic.json`` and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl

from quicsm.model.synoptic import EventLog, infer_graph, mine_invariants
from quicsm.model.synoptic.verify import rejected_traces, violated_invariants
from quicsm.testing.bench import compile_package
from quicsm.testing.synthetic import generate_transitions, write_synoptic_log

RESULTS = Path(__file__).parent / "results" / "compare_synoptic.json"

# (name, directory under traces/, args file, trace files): the totally ordered examples
EXAMPLES: list[tuple[str, str, str, list[str]]] = [
    ("TwoPhaseCommit 5tx", "TwoPhaseCommit", "twopc-synoptic.args", ["2pc_3nodes_5tx.log"]),
    ("TwoPhaseCommit 100tx", "TwoPhaseCommit", "twopc-synoptic.args", ["2pc_3nodes_100tx.log"]),
    ("ABP receiver simple", "AlternatingBitProtocol", "args_r.txt", ["trace_r_simple.txt"]),
    ("ABP receiver complete", "AlternatingBitProtocol", "args_r.txt", ["trace_r_complete.txt"]),
    ("ABP sender simple", "AlternatingBitProtocol", "args_s.txt", ["trace_s_simple.txt"]),
    ("StackAr equal", "StackAr/CallAndReturnStatesEqual", "args.txt", ["trace.txt"]),
    ("StackAr merged", "StackAr/CallAndReturnStatesMerged", "args.txt", ["trace.txt"]),
    ("QueueAr equal", "QueueAr/CallAndReturnStatesEqual", "args.txt", ["trace.txt"]),
    ("QueueAr merged", "QueueAr/CallAndReturnStatesMerged", "args.txt", ["trace.txt"]),
    ("shopping-cart", "abstract/shopping-cart-example", "args.txt", ["trace.txt"]),
    ("simple-email", "abstract/simple-email", "args_synoptic.txt", ["trace.txt"]),
    ("osx-login", "abstract/osx-login-example", "args.txt", ["trace.txt"]),
    ("mid_branching", "abstract/mid_branching", "args.txt", ["trace.txt"]),
    ("connection-tester", "abstract/connection-tester", "args.txt", ["traces.txt"]),
    (
        "client-server client",
        "abstract/client-server-send-recv",
        "args-client.txt",
        ["trace-client.txt"],
    ),
    (
        "client-server server",
        "abstract/client-server-send-recv",
        "args-server.txt",
        ["trace-server.txt"],
    ),
    ("perfume-example", "abstract/perfume-example", "args.txt", ["traces.txt"]),
    ("performance-caching", "abstract/performance-caching", "args.txt", ["traces.txt"]),
    # few long traces with many distinct events (strace of ls / ping), where refinement dominates
    ("strace ls", "strace", "args.txt", ["ls.txt"]),
    ("strace ping", "strace", "args.txt", ["ping.txt"]),
]

# options of other tools (InvariMint, CSight) or of output that we replace
_DROP = (
    "-o",
    "-q",
    "-i",
    "--mcPath",
    "--invMint",
    "--kTailLength",
    "--minimizeIntersections",
    "--compareToStandardAlg",
    "--output",
    "--dump",
)

_INV = re.compile(
    r"^(.*) (AlwaysFollowedBy|NeverFollowedBy|AlwaysPrecedes)\(t\) (.*)\t"
    r"support count (\d+)$"
)
_NODE = re.compile(r'^\s*(\d+) \[label="(.*?)"(?:,shape=\w+)?\];$')
_EDGE = re.compile(r'^\s*(\d+)->(\d+) \[(?:label="P: ([\d.]+), Cnt: (\d+)")?\];$')
_TOOK = re.compile(r"INFO: (Mining|Creating partition graph|Splitting|Merging) took (\d+)ms")


def read_args_file(path: Path) -> list[str]:
    """Synoptic options from an args file (one option per line), minus output options."""
    out: list[str] = []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(_DROP):
            continue
        opt, _, value = line.partition(" ")
        out.append(opt)
        if value:
            out.append(value.strip().replace("\\\\", "\\"))  # Java properties escaping
    return out


def run_measured(cmd: list[str], *, cwd: Path | None = None) -> tuple[float, int, str]:
    """Run ``cmd``; returns (wall seconds, peak RSS in bytes, combined output).

    The peak RSS comes from GNU time's report when it is installed: a child forked from this
    (large) Python process would otherwise count the parent's pages in its ``ru_maxrss``.
    """
    gnu_time = shutil.which("time") if Path("/usr/bin/time").exists() else None
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as report:
        wrapped = [gnu_time, "-f", "%M", "-o", report.name, *cmd] if gnu_time else cmd
        start = time.perf_counter()
        proc = subprocess.Popen(wrapped, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
        lines = report.read().split()
        rss = int(lines[-1]) * 1024 if gnu_time and lines else usage.ru_maxrss * 1024
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({proc.returncode}):\n{text[-3000:]}")
    return wall, rss, text


def parse_dot(path: Path) -> tuple[dict[int, str], list[tuple[int, int, float, int]]]:
    nodes: dict[int, str] = {}
    edges: list[tuple[int, int, float, int]] = []
    for line in path.read_text().splitlines():
        if m := _NODE.match(line):
            nodes[int(m[1])] = m[2]
        elif m := _EDGE.match(line):
            edges.append((int(m[1]), int(m[2]), float(m[3] or "nan"), int(m[4] or 0)))
    return nodes, edges


def traces_from_tracegraph(path: Path) -> list[list[str]]:
    """The traces Synoptic parsed: the chains from INITIAL to TERMINAL of its trace graph."""
    nodes, edges = parse_dot(path)
    succ: dict[int, list[int]] = {}
    for s, t, _, _ in edges:
        succ.setdefault(s, []).append(t)
    initial = next(i for i, lab in nodes.items() if lab == "INITIAL")
    traces = []
    for first in succ.get(initial, []):
        seq, cur = [], first
        while nodes[cur] != "TERMINAL":
            seq.append(nodes[cur])
            (cur,) = succ[cur]
        traces.append(seq)
    return traces


def synoptic_model(path: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Synoptic's final model (DOT with counts) as quicsm node/edge tables."""
    nodes, edges = parse_dot(path)
    out_count: Counter[int] = Counter()
    in_count: Counter[int] = Counter()
    for s, t, _, c in edges:
        out_count[s] += c
        in_count[t] += c
    special = {"INITIAL": 0, "TERMINAL": 1}
    order = sorted(nodes, key=lambda i: (special.get(nodes[i], 2), nodes[i], i))
    ids = {old: new for new, old in enumerate(order)}
    events = {i: out_count[i] if nodes[i] != "TERMINAL" else in_count[i] for i in nodes}
    ndf = pl.DataFrame(
        {
            "id": [ids[i] for i in order],
            "state": [nodes[i] for i in order],
            "events": [events[i] for i in order],
        },
        schema={"id": pl.Int64, "state": pl.String, "events": pl.Int64},
    )
    edf = pl.DataFrame(
        {
            "source": [ids[s] for s, _, _, _ in edges],
            "target": [ids[t] for _, t, _, _ in edges],
            "count": [c for _, _, _, c in edges],
            "probability": [c / out_count[s] for s, _, _, c in edges],
        },
        schema={
            "source": pl.Int64,
            "target": pl.Int64,
            "count": pl.Int64,
            "probability": pl.Float64,
        },
    )
    return ndf, edf


def signature(nodes: pl.DataFrame, edges: pl.DataFrame) -> list[tuple[Any, ...]]:
    """Isomorphism-insensitive fingerprint: sorted (src label, src events, dst label, dst
    events, count) rows."""
    info = {i: (s, e) for i, s, e in nodes.select("id", "state", "events").iter_rows()}
    return sorted(
        (*info[s], *info[t], c) for s, t, c in edges.select("source", "target", "count").iter_rows()
    )


def compare_models(
    a: tuple[pl.DataFrame, pl.DataFrame], b: tuple[pl.DataFrame, pl.DataFrame]
) -> dict[str, Any]:
    per_label_a = Counter(a[0].get_column("state").to_list())
    per_label_b = Counter(b[0].get_column("state").to_list())

    def grouped(m: tuple[pl.DataFrame, pl.DataFrame]) -> dict[tuple[str, str], list[float]]:
        names = dict(m[0].select("id", "state").iter_rows())
        out: dict[tuple[str, str], list[float]] = {}
        for s, t, p in m[1].select("source", "target", "probability").iter_rows():
            out.setdefault((names[s], names[t]), []).append(p)
        return {k: sorted(v) for k, v in out.items()}

    ga, gb = grouped(a), grouped(b)
    diff: float | None = 0.0
    if set(ga) != set(gb) or any(len(ga[k]) != len(gb[k]) for k in ga):
        diff = None
    else:
        diff = max((abs(x - y) for k in ga for x, y in zip(ga[k], gb[k], strict=True)), default=0.0)
    return {
        "nodes_per_label_equal": per_label_a == per_label_b,
        "max_probability_diff": diff,
        "identical": signature(*a) == signature(*b),
    }


def quicsm_run(log_path: str, out_path: str) -> None:
    """Child-process mode: read a plain Synoptic text log, mine and infer, write JSON."""
    t0 = time.perf_counter()
    traces: list[list[str]] = [[]]
    with open(log_path, encoding="utf-8") as fh:
        for line in fh:
            name = line.rstrip("\n")
            if name == "--":
                traces.append([])
            elif name:
                traces[-1].append(name)
    traces = [t for t in traces if t]
    t1 = time.perf_counter()
    log = EventLog.from_sequences(traces)
    invariants = mine_invariants(log)
    t2 = time.perf_counter()
    nodes, edges = infer_graph(log)
    t3 = time.perf_counter()
    Path(out_path).write_text(
        json.dumps(
            {
                "labels": list(log.labels),
                "nodes": nodes.to_dicts(),
                "edges": edges.to_dicts(),
                "invariants": invariants.to_dicts(),
                "seconds": {"parse": t1 - t0, "mine": t2 - t1, "infer": t3 - t2, "total": t3 - t0},
            }
        )
    )


def run_case(
    name: str,
    cwd: Path,
    args: list[str],
    files: list[str],
    *,
    classpath: str,
    seeds: list[int],
    java_heap: str,
    work: Path,
) -> dict[str, Any]:
    java = ["java", f"-Xmx{java_heap}", "-cp", classpath, "synoptic.main.SynopticMain"]
    slug = re.sub(r"\W+", "_", name)
    runs = []
    for i, seed in enumerate(seeds):
        prefix = work / f"{slug}.s{seed}"
        extra = ["--dumpTraceGraphDotFile"] if i == 0 else []
        cmd = [
            *java,
            *args,
            "-o",
            str(prefix),
            "--outputSupportCount",
            "--outputInvariantsToFile",
            "--outputCountLabels",
            f"--randomSeed={seed}",
            *extra,
            *files,
        ]
        wall, rss, text = run_measured(cmd, cwd=cwd)
        took = {k: int(v) for k, v in _TOOK.findall(text)}
        runs.append(
            {
                "seed": seed,
                "wall_s": wall,
                "rss_bytes": rss,
                "phases_ms": took,
                "model": synoptic_model(Path(f"{prefix}.dot")),
            }
        )
        if i == 0:
            syn_invs = set()
            for line in Path(f"{prefix}.invariants.txt").read_text().splitlines():
                if m := _INV.match(line):
                    syn_invs.add((m[2], m[1], m[3], int(m[4])))
            traces = traces_from_tracegraph(Path(f"{prefix}.tracegraph.dot"))
    plain = work / f"{slug}.plain.txt"
    plain.write_text("--\n".join("".join(f"{e}\n" for e in t) for t in traces))
    out_json = work / f"{slug}.quicsm.json"
    q_wall, q_rss, _ = run_measured(
        [sys.executable, __file__, "quicsm-run", str(plain), str(out_json)]
    )
    q = json.loads(out_json.read_text())
    q_nodes = pl.DataFrame(
        q["nodes"], schema={"id": pl.Int64, "state": pl.String, "events": pl.Int64}
    )
    q_edges = pl.DataFrame(
        q["edges"],
        schema={
            "source": pl.Int64,
            "target": pl.Int64,
            "count": pl.Int64,
            "probability": pl.Float64,
        },
    )
    q_invs = {(r["kind"], r["a"], r["b"], r["support"]) for r in q["invariants"]}
    log = EventLog.from_sequences(traces)
    inv_df = pl.DataFrame(
        q["invariants"],
        schema={"kind": pl.String, "a": pl.String, "b": pl.String, "support": pl.Int64},
    )
    ours = (q_nodes, q_edges)
    per_seed = [compare_models(r["model"], ours) for r in runs]
    distinct = {json.dumps(signature(*r["model"])) for r in runs}
    # quicsm's own seeds (computed here, untimed): which of its possible models Synoptic gave
    ours_by_seed = {json.dumps(signature(*infer_graph(log, seed=s))) for s in seeds}
    common = distinct & ours_by_seed
    first = runs[0]
    syn_model = first["model"]
    return {
        "log": name,
        "traces": log.n_traces,
        "events": log.n_events,
        "invariants_identical": syn_invs == q_invs,
        "n_invariants": len(q_invs),
        "invariants_only_synoptic": sorted(syn_invs - q_invs)[:5],
        "invariants_only_quicsm": sorted(q_invs - syn_invs)[:5],
        "synoptic_nodes": syn_model[0].height,
        "synoptic_edges": syn_model[1].height,
        "synoptic_wall_s": first["wall_s"],
        "synoptic_rss_mb": first["rss_bytes"] / 2**20,
        "synoptic_phases_ms": first["phases_ms"],
        "synoptic_distinct_models": len(distinct),
        "quicsm_distinct_models": len(ours_by_seed),
        "models_in_common": len(common),
        "synoptic_seeds_identical_to_quicsm": [
            r["seed"] for r, c in zip(runs, per_seed, strict=True) if c["identical"]
        ],
        "synoptic_model_violations": violated_invariants(*syn_model, inv_df, log.labels).height,
        "synoptic_model_rejects": len(rejected_traces(*syn_model, log)),
        "quicsm_nodes": q_nodes.height,
        "quicsm_edges": q_edges.height,
        "quicsm_wall_s": q_wall,
        "quicsm_rss_mb": q_rss / 2**20,
        "quicsm_seconds": q["seconds"],
        "quicsm_model_violations": violated_invariants(q_nodes, q_edges, inv_df, log.labels).height,
        "quicsm_model_rejects": len(rejected_traces(q_nodes, q_edges, log)),
        "vs_seed": per_seed,
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    head = (
        "| log | traces | events | invariants identical | Synoptic nodes / edges | "
        "Synoptic time (s) / RSS (MB) | quicsm nodes / edges | quicsm time (s) / RSS (MB) | "
        "nodes per label equal | max Δp | Synoptic seeds = quicsm seed 0 | "
        "models in common (distinct: Synoptic / quicsm) |\n"
        "|---|---:|---:|---|---:|---:|---:|---:|---|---:|---|---|\n"
    )
    lines = []
    for r in rows:
        eq = [c["nodes_per_label_equal"] for c in r["vs_seed"]]
        diffs = [c["max_probability_diff"] for c in r["vs_seed"]]
        best = min((d for d in diffs if d is not None), default=None)
        n_seeds = len(r["vs_seed"])
        lines.append(
            f"| {r['log']} | {r['traces']} | {r['events']} | "
            f"{'yes' if r['invariants_identical'] else 'NO'} ({r['n_invariants']}) | "
            f"{r['synoptic_nodes']} / {r['synoptic_edges']} | "
            f"{r['synoptic_wall_s']:.2f} / {r['synoptic_rss_mb']:.0f} | "
            f"{r['quicsm_nodes']} / {r['quicsm_edges']} | "
            f"{r['quicsm_wall_s']:.2f} / {r['quicsm_rss_mb']:.0f} | "
            f"{sum(eq)}/{len(eq)} seeds | {'—' if best is None else f'{best:.4f}'} | "
            f"{len(r['synoptic_seeds_identical_to_quicsm'])}/{n_seeds} | "
            f"{r['models_in_common']} ({r['synoptic_distinct_models']} / "
            f"{r['quicsm_distinct_models']}) |"
        )
    return head + "\n".join(lines) + "\n"


def add_synoptic_options(ap: argparse.ArgumentParser) -> None:
    """The options of every benchmark that runs Synoptic itself (this one and
    bench_synoptic_logs.py): where its build is and the JVM's heap."""
    ap.add_argument(
        "--synoptic-classpath",
        default=os.environ.get("QUICSM_SYNOPTIC_CLASSPATH"),
        help="a Synoptic build (default: $QUICSM_SYNOPTIC_CLASSPATH)",
    )
    ap.add_argument("--java-heap", default="8g", help="Synoptic's JVM heap (-Xmx)")


def need_synoptic(opts: argparse.Namespace) -> None:
    """Stop with one line unless a Synoptic build and java are there."""
    if not opts.synoptic_classpath:
        sys.exit(
            "give the Synoptic class path with --synoptic-classpath or QUICSM_SYNOPTIC_CLASSPATH"
        )
    if not shutil.which("java"):
        sys.exit("java is needed to run Synoptic")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "quicsm-run":
        quicsm_run(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_synoptic_options(ap)
    ap.add_argument("--examples", type=Path, help="the traces/ directory of a Synoptic checkout")
    ap.add_argument("--only", nargs="+", help="run only the examples with these names")
    ap.add_argument(
        "--sizes",
        type=int,
        nargs="*",
        default=[100, 1000, 10000],
        help="traces in each synthetic log",
    )
    ap.add_argument(
        "--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds of the runs compared"
    )
    ap.add_argument("--log-seed", type=int, default=1, help="seed of the synthetic logs")
    ap.add_argument("--out", type=Path, default=RESULTS, help="the results file")
    opts = ap.parse_args()
    compile_package()  # the bytecode users have (quicsm.testing.bench)
    need_synoptic(opts)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cases: list[tuple[str, Path, list[str], list[str]]] = []
        if opts.examples:
            for name, sub, args_file, files in EXAMPLES:
                if opts.only and name not in opts.only:
                    continue
                d = opts.examples / sub
                cases.append((name, d, read_args_file(d / args_file), files))
        for n in opts.sizes:
            path = work / f"synthetic-{n}.txt"
            write_synoptic_log(generate_transitions(n, seed=opts.log_seed), path)
            cases.append(
                (f"synthetic QUIC {n}", work, ["-r", "^(?<TYPE>.+)$", "-s", "^--$"], [path.name])
            )
        for name, cwd, args, files in cases:
            print(f"... {name}", file=sys.stderr, flush=True)
            rows.append(
                run_case(
                    name,
                    cwd,
                    args,
                    files,
                    classpath=opts.synoptic_classpath,
                    seeds=opts.seeds,
                    java_heap=opts.java_heap,
                    work=work,
                )
            )
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(rows, indent=1, default=str))
    print(markdown(rows))


if __name__ == "__main__":
    main()
