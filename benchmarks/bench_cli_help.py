"""What ``--help`` costs: ``quicsm --help`` and every subcommand's ``--help``, each in a fresh
process, against the interpreter starting and importing click (the least a click program can
cost), measured in the same run.

Target (issue "Fast on every path"): ``--help`` imports neither polars, numpy nor the engine,
so it costs little more than the baseline. CPU = user + system time of the child process
(interpreter start-up included); the median of ``--repeat`` runs per command.

    .venv/bin/python benchmarks/bench_cli_help.py
    .venv/bin/python benchmarks/bench_cli_help.py --repeat 3    # quick
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

from quicsm.cli import COMMANDS
from quicsm.testing.bench import compile_package

BASELINE = [sys.executable, "-c", "import click"]


def cpu_seconds(cmd: list[str]) -> float:
    """User + system CPU seconds of one run of ``cmd`` (its output discarded)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed")
    return usage.ru_utime + usage.ru_stime


def median_cpu(cmd: list[str], repeat: int) -> float:
    return statistics.median(cpu_seconds(cmd) for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs per command (median)")
    args = parser.parse_args()
    compile_package()  # the bytecode users have (quicsm.testing.bench)
    base = median_cpu(BASELINE, args.repeat)
    print(f"baseline (python -c 'import click'): {base * 1000:.0f} ms CPU")
    print("| command | CPU (median) | ratio to the baseline |")
    print("|---|---|---|")
    for name in ["", *sorted(COMMANDS)]:
        cmd = [sys.executable, "-m", "quicsm", *([name] if name else []), "--help"]
        cpu = median_cpu(cmd, args.repeat)
        shown = f"quicsm {name} --help".replace("  ", " ")
        print(f"| `{shown}` | {cpu * 1000:.0f} ms | {cpu / base:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
