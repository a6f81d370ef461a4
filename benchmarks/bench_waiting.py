"""Speed where people wait: the commands run every day, each in a fresh process, against a
baseline measured in the same run.

- **plot**: ``quicsm plot traces/quic-go-v0.65.0.qlog#0`` (one connection of a 75-trace file),
  with an empty cache (the file is indexed, the script bundle built) and again with the cache
  it left (the index and the bundle kept);
- **report**: ``quicsm report`` of the shipped version comparison (quic-go v0.48.2 vs v0.65.0,
  150 traces in 7 MB of zstd), with an empty cache and again;
- **diff**: ``quicsm diff`` of the same two files, ``--where scenario=jitter --where
  vantage=server`` (10 of their 150 traces: the connection account counts only those), with an
  empty cache and again;
- **infer**: ``quicsm infer`` of one 2.8 MB trace (trace 34 of ``traces/notebooks.qlog``,
  written to a file of its own);

  the baseline of these four: a Python process that imports polars and decompresses the
  command's input files (what any reading of them costs at least);
- **read_metrics** and **inspect** of a 100 MiB metrics-only connection (the generator of
  ``bench_derive.py``), against a pysimdjson full parse of the same file (``bench_derive``'s
  baseline); both also with the cost of starting the process and importing subtracted (a
  process that only imports ``quicsm.extract.read`` / ``simdjson``);
- **many tiny traces** (``--tiny``): 2,500 and 10,000 one-event traces (JSON-SEQ, and contained
  JSON alternating a metrics event and a state: the hostile campaign's family) read by
  ``read_metrics``, ``read_transitions`` and ``read_traces``; CPU per trace.

CPU = user + system time of the child (``wait4``); each kind keeps the least of ``--repeat``
rounds, taken in turn. The package's bytecode is written first, as where users run it. "Cold"
is an empty quicsm cache (each round a cache directory of its own) with the inputs in the
operating system's page cache (the baseline, run just before, has read them); "warm" is the
same command again with the cache the cold run left.

    .venv/bin/python benchmarks/bench_waiting.py              # everything
    .venv/bin/python benchmarks/bench_waiting.py --only plot report diff infer
    .venv/bin/python benchmarks/bench_waiting.py --only tiny

Targets (issue 40): plot <= 1.5 s, report <= 4 s, infer <= 0.7 s CPU; read_metrics >= 1x and
inspect >= 2x a pysimdjson parse (issue 45: every reader <= 5 s and <= 0.3 ms per tiny trace).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from quicsm.testing.bench import compile_package

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

QUICSM = [sys.executable, "-c", "import sys; from quicsm.cli import main; sys.exit(main())"]

#: the least a command reading these files costs: polars imported, the files decompressed
DECOMPRESS = """
import sys
import polars
from quicsm.qlog.blocks import DecompressedFile
from pathlib import Path
n = 0
for name in sys.argv[1:]:
    for block in DecompressedFile(Path(name)).blocks():
        n += len(block)
print(n)
"""

READ_METRICS = """
import sys, warnings
warnings.simplefilter("ignore")
from quicsm.extract.read import read_metrics
print(read_metrics(sys.argv[1]).height)
"""

#: what ``quicsm inspect`` imports before it reads (its start-up)
INSPECT_IMPORTS = (
    "import quicsm.cli, quicsm.cli.inspect, quicsm.extract.capabilities, quicsm.qlog.inspect"
)

TINY = """
import sys, warnings
warnings.simplefilter("ignore")
from quicsm.extract import read
print(getattr(read, sys.argv[1])([sys.argv[2]]).height)
"""


def cpu(cmd: Sequence[str], env: dict[str, str] | None = None) -> float:
    """User + system CPU seconds of one run of ``cmd`` (output discarded); fails loudly."""
    proc = subprocess.Popen(
        list(cmd),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    _, status, usage = os.wait4(proc.pid, 0)
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err[-2000:]}")
    return usage.ru_utime + usage.ru_stime


def least(
    kinds: dict[str, tuple[list[str], dict[str, str] | None]], repeat: int
) -> dict[str, list[float]]:
    """Every kind measured ``repeat`` times, in turn; all times kept."""
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(repeat):
        for name, (cmd, env) in kinds.items():
            times[name].append(cpu(cmd, env))
    return times


def show(times: dict[str, list[float]], baseline: str) -> dict[str, float]:
    best = {k: min(v) for k, v in times.items()}
    for name, t in best.items():
        every = ", ".join(f"{x:.2f}" for x in times[name])
        ratio = "" if name == baseline else f"  ({t / best[baseline]:.2f}x the baseline's CPU)"
        print(f"  {name}: {t:.2f} s CPU (least of {every}){ratio}")
    return best


def one_trace(out: Path) -> Path:
    """Trace 34 of traces/notebooks.qlog (2.8 MB of JSON-SEQ) as a file of its own."""
    from quicsm.qlog.blocks import DecompressedFile

    data = b"".join(DecompressedFile(ROOT / "traces" / "notebooks.qlog").blocks())
    traces: list[list[bytes]] = []
    for record in data.split(b"\x1e")[1:]:
        if b'"qlog_format"' in record[:300]:  # a trace's header
            traces.append([])
        traces[-1].append(record)
    path = out / "trace-2.8mb.sqlog"
    path.write_bytes(b"".join(b"\x1e" + r for r in traces[34]))
    return path


BASE = "baseline (import polars, decompress the inputs)"
#: the diff measured: the jitter scenario's server traces of both versions
JITTER = ["--where", "scenario=jitter", "--where", "vantage=server"]


def commands(repeat: int, work: Path, only: set[str]) -> dict[str, object]:
    results: dict[str, object] = {}
    plot_file = "traces/quic-go-v0.65.0.qlog"
    a, b = "traces/quic-go-v0.48.2.qlog", "traces/quic-go-v0.65.0.qlog"
    single = one_trace(work)
    print(f"one trace: {single.stat().st_size / 1e6:.2f} MB")
    for name, cmd, inputs in (
        ("plot", [*QUICSM, "plot", f"{plot_file}#0", "-o", str(work / "plot.html")], [plot_file]),
        ("report", [*QUICSM, "report", a, "--vs", b, "-o", str(work / "report.html")], [a, b]),
        ("diff", [*QUICSM, "diff", a, "--vs", b, *JITTER], [a, b]),
        ("infer", [*QUICSM, "infer", str(single), "-o", str(work / "out")], [str(single)]),
    ):
        if name not in only:
            continue
        print(f"{name}: {' '.join(cmd[3:])}")
        times: dict[str, list[float]] = {BASE: [], "cold cache": [], "warm cache": []}
        for round_ in range(repeat):  # in turn; each cold round with a cache of its own
            times[BASE].append(cpu([sys.executable, "-c", DECOMPRESS, *inputs]))
            cache = {"QUICSM_CACHE_DIR": str(work / f"cache-{name}-{round_}")}
            times["cold cache"].append(cpu(cmd, cache))
            times["warm cache"].append(cpu(cmd, cache))
        results[name] = show(times, BASE)
    return results


def long_connection(repeat: int, work: Path, size_mb: float) -> dict[str, object]:
    from bench_derive import BASELINE, generate

    path = work / f"metrics-{size_mb:g}mib.sqlog"
    generate(path, size_mb)
    print(f"read_metrics and inspect, {path.stat().st_size / 2**20:.0f} MiB metrics only:")
    kinds: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "pysimdjson full parse": ([sys.executable, "-c", BASELINE, str(path)], None),
        "read_metrics": ([sys.executable, "-c", READ_METRICS, str(path)], None),
        "inspect": ([*QUICSM, "inspect", str(path)], None),
        "import simdjson": ([sys.executable, "-c", "import simdjson"], None),
        "import quicsm.extract.read": ([sys.executable, "-c", "import quicsm.extract.read"], None),
        "import the CLI's inspect": (
            [sys.executable, "-c", INSPECT_IMPORTS],
            None,
        ),
    }
    best = show(least(kinds, repeat), "pysimdjson full parse")
    base = best["pysimdjson full parse"]
    base_work = base - best["import simdjson"]
    for name, start in (
        ("read_metrics", "import quicsm.extract.read"),
        ("inspect", "import the CLI's inspect"),
    ):
        work_s = best[name] - best[start]
        print(
            f"  ratio {name} / pysimdjson: {base / best[name]:.2f}x whole process, "
            f"{base_work / work_s:.2f}x after start-up and imports"
        )
    path.unlink()
    return {"cpu_s": best}


def tiny(repeat: int, work: Path) -> dict[str, object]:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_read_many_traces import tiny_traces

    out: dict[str, object] = {}
    for n in (2500, 10000):
        for kind in ("seq", "contained"):
            path = tiny_traces(work, n, kind)
            print(f"{n:,} one-event traces, {kind} ({path.stat().st_size / 1e6:.2f} MB):")
            kinds: dict[str, tuple[list[str], dict[str, str] | None]] = {
                "start-up (import quicsm.extract.read)": (
                    [sys.executable, "-c", "import quicsm.extract.read"],
                    None,
                ),
                **{
                    reader: ([sys.executable, "-c", TINY, reader, str(path)], None)
                    for reader in ("read_metrics", "read_transitions", "read_traces")
                },
            }
            best = show(least(kinds, repeat), "start-up (import quicsm.extract.read)")
            start = best["start-up (import quicsm.extract.read)"]
            for reader in ("read_metrics", "read_transitions", "read_traces"):
                per = (best[reader] - start) / n * 1e3
                print(f"  {reader}: {per:.3f} ms per trace after start-up")
            out[f"{n}-{kind}"] = best
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only",
        nargs="+",
        choices=("plot", "report", "diff", "infer", "long", "tiny"),
        default=None,
        help="measure only these (default: all)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="rounds; each kind's least CPU")
    parser.add_argument("--size-mb", type=float, default=100, help="the long connection (MiB)")
    args = parser.parse_args(argv)
    compile_package()
    only = set(args.only or ("plot", "report", "diff", "infer", "long", "tiny"))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="quicsm-bench-") as tmp:
        work = Path(tmp)
        if only & {"plot", "report", "diff", "infer"}:
            results["commands"] = commands(args.repeat, work, only)
        if "long" in only:
            results["long"] = long_connection(args.repeat, work, args.size_mb)
        if "tiny" in only:
            results["tiny"] = tiny(args.repeat, work)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(exist_ok=True)
    (out / "bench_waiting.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
