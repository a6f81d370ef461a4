"""Contained-JSON reading: CPU time against one ``orjson.loads`` of the document, and peak
memory against the document's size.

The input is the real aioquic client trace of ``tests/fixtures/real`` with its events repeated
(``quicsm.testing.large.big_contained``) to ``--sizes-mb`` (default 30 and 120 MB), written to a
temporary directory. For each size, in fresh child processes:

- **baseline**: ``orjson.loads`` of the whole document (read from disk), CPU seconds;
- **quicsm**: ``read_qlog(file)`` (the streaming parser), CPU seconds;
- **peak RSS** of each child above its level after imports.

::

    .venv/bin/python benchmarks/bench_contained.py
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from quicsm.testing.large import big_contained

_CHILD = """
import resource, sys, time
from pathlib import Path
import orjson
from quicsm.qlog.source import read_qlog
path = Path(sys.argv[2])
def rss():
    return int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024
before = rss()
t = time.process_time()
if sys.argv[1] == "baseline":
    orjson.loads(path.read_bytes())
else:
    read_qlog(path)
print(time.process_time() - t, rss() - before)
"""


def _measure(kind: str, path: Path, repeat: int) -> tuple[float, float]:
    best_cpu, peak = float("inf"), 0.0
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, kind, str(path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        best_cpu = min(best_cpu, float(out[0]))
        peak = max(peak, float(out[1]))
    return best_cpu, peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[30, 120])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print("| document | baseline CPU | quicsm CPU | ratio | baseline peak RSS | quicsm peak RSS |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes_mb:
            path = Path(tmp) / f"big{size}.qlog"
            big_contained(path, size << 20)
            mb = path.stat().st_size / 1e6
            base_cpu, base_rss = _measure("baseline", path, args.repeat)
            ours_cpu, ours_rss = _measure("quicsm", path, args.repeat)
            print(
                f"| {mb:.1f} MB | {base_cpu:.2f} s | {ours_cpu:.2f} s | "
                f"{ours_cpu / base_cpu:.2f}x | +{base_rss:.0f} MB | +{ours_rss:.0f} MB |"
            )
            path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
