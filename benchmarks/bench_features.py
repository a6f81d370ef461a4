"""CPU of identify's features per trace: every trace at once
(:func:`quicsm.controllers.batch_features.compute_features`) against the per-trace path
(:func:`quicsm.controllers.features.compute_features_per_trace`, the baseline), both measured in
the same run on the same frames, and whether their features are the same to the last bit.

- **report**: the version report's traces (``traces/quic-go-v0.48.2.qlog`` and
  ``traces/quic-go-v0.65.0.qlog``, 150 traces), the families ``quicsm report`` names;
- **shipped**: every file of ``traces/`` and ``traces/stacks/`` read together;
- **corpora** (``--corpora``): each identification corpus of ``benchmarks/corpora/`` apart.

The frames are read first (not timed). CPU = the process's user + system time
(``time.process_time``) of one call; each path keeps the least of ``--repeat`` calls, the two
taken in turn. Prints a Markdown table::

    .venv/bin/python benchmarks/bench_features.py
    .venv/bin/python benchmarks/bench_features.py --corpora --repeat 3

Target (issue 40): <= 0.5 ms of CPU per trace on the report's traces.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from quicsm.controllers.batch_features import compute_features
from quicsm.controllers.features import compute_features_per_trace
from quicsm.extract.read import read_metrics, read_transitions

ROOT = Path(__file__).resolve().parent.parent
REPORT = [ROOT / "traces" / "quic-go-v0.48.2.qlog", ROOT / "traces" / "quic-go-v0.65.0.qlog"]
SHIPPED = sorted((ROOT / "traces").glob("*.qlog")) + sorted(
    (ROOT / "traces" / "stacks").glob("*.qlog")
)
CORPORA = sorted((ROOT / "benchmarks" / "corpora").glob("*.qlog"))


def _least(
    function: Callable[[pl.DataFrame, pl.DataFrame], pl.DataFrame],
    frames: tuple[pl.DataFrame, pl.DataFrame],
    times: list[float],
) -> pl.DataFrame:
    start = time.process_time()
    out = function(*frames)
    times.append(time.process_time() - start)
    return out


def _bits(value: Any) -> Any:
    return struct.pack("<d", value) if isinstance(value, float) else value


def identical(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    """The same rows, every float with the same 64 bits."""
    return a.columns == b.columns and all(
        [_bits(v) for v in x] == [_bits(v) for v in y]
        for x, y in zip(a.iter_rows(), b.iter_rows(), strict=True)
    ) and a.height == b.height  # fmt: skip


def measure(name: str, files: list[Path], repeat: int) -> dict[str, Any]:
    paths = [str(f) for f in files]
    frames = (read_metrics(paths), read_transitions(paths))
    batch: list[float] = []
    per_trace: list[float] = []
    got = want = None
    for _ in range(repeat):
        got = _least(compute_features, frames, batch)
        want = _least(compute_features_per_trace, frames, per_trace)
    assert got is not None and want is not None
    n = got.height
    return {
        "inputs": name,
        "traces": n,
        "metric rows": frames[0].height,
        "all at once (ms)": min(batch) * 1000,
        "per trace (ms)": min(per_trace) * 1000,
        "all at once, ms per trace": min(batch) * 1000 / max(n, 1),
        "per trace, ms per trace": min(per_trace) * 1000 / max(n, 1),
        "speed-up": min(per_trace) / min(batch),
        "identical": "yes" if identical(got, want) else "NO",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="calls of each path (least kept)")
    parser.add_argument("--corpora", action="store_true", help="each corpus apart as well")
    args = parser.parse_args(argv)
    rows = [measure("report", REPORT, args.repeat), measure("shipped", SHIPPED, args.repeat)]
    if args.corpora:
        rows += [measure(path.name, [path], args.repeat) for path in CORPORA]
    header = list(rows[0])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print(
            "| "
            + " | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in row.values())
            + " |"
        )
    if args.corpora:
        total = sum(r["traces"] for r in rows[2:])
        fast = sum(r["all at once (ms)"] for r in rows[2:])
        slow = sum(r["per trace (ms)"] for r in rows[2:])
        print(
            f"\ncorpora: {total} traces, {fast / total:.2f} ms per trace all at once, "
            f"{slow / total:.2f} ms per trace one at a time ({slow / fast:.2f}x)"
        )
    return 0 if all(r["identical"] == "yes" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
