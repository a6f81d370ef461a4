"""What the comparison report's four static charts cost to draw, against the whole report.

Builds the shipped version report (quic-go v0.48.2 vs v0.65.0, ``quicsm report A --vs B`` as
``bench_waiting.py`` runs it) in this process and times each chart as the report draws it
(:mod:`quicsm.render.svg_charts`): CPU seconds of each, the least of ``--repeat`` draws of the
same data, and their sum against the CPU of building the report (reading both files once
included; the baseline, measured in the same run).

    .venv/bin/python benchmarks/bench_report_charts.py --repeat 5
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHARTS = ("time_in_state_svg", "dwell_svg", "traces_svg", "heatmap_svg")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="draws of each chart; the least")
    args = parser.parse_args(argv)

    from quicsm.compare.load import compare_paths
    from quicsm.render import svg_charts
    from quicsm.report import build_report

    best: dict[str, float] = {}

    def timed(name: str, draw: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(draw)
        def run(*a: Any, **k: Any) -> Any:
            out = None
            for _ in range(args.repeat):
                start = time.process_time()
                out = draw(*a, **k)
                best[name] = min(best.get(name, float("inf")), time.process_time() - start)
            return out

        return run

    for name in CHARTS:
        setattr(svg_charts, name, timed(name, getattr(svg_charts, name)))
    a, b = (str(ROOT / "traces" / f"quic-go-{v}.qlog") for v in ("v0.48.2", "v0.65.0"))
    start = time.process_time()
    comps = [compare_paths([a], [b])]
    html = build_report(comps, generated_at="2026-01-01 00:00 UTC")
    total = time.process_time() - start
    drawn = sum(best.values())
    charts = sum(1 for name in CHARTS if name in best)
    # the report drew each chart --repeat times: its own CPU less the extra draws
    report = total - (args.repeat - 1) * drawn
    print(f"report of {Path(a).name} vs {Path(b).name}: {len(html):,} bytes, {charts} charts")
    for name in CHARTS:
        if name in best:
            print(f"  {name}: {1000 * best[name]:.1f} ms CPU (least of {args.repeat})")
    print(
        f"  the four charts: {1000 * drawn:.1f} ms CPU = {100 * drawn / report:.1f}% of "
        f"building the report in this process ({report:.2f} s CPU, reading included)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
