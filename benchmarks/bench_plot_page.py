#!/usr/bin/env python3
"""One connection's ``quicsm plot`` page: its size and how long Chromium takes to draw it (the
data reduced per pixel column at zoom levels, the specification compiled to Vega when the page
is made) against the same page shipping its Vega-Lite specification for the browser to compile
at each load (the baseline: how pages were made before), both built and drawn in the same run.

    .venv/bin/python benchmarks/bench_plot_page.py [--runs 3]    (--runs 0: page sizes only)

Draw time is ``performance.now()`` when the page reports itself drawn (the libraries and data
unpacked, the chart drawn: its first complete render), median of ``--runs`` loads in a fresh
headless Chromium tab; "libs" is the part of it spent unpacking and running the libraries
(the same for every page), "CPU" the renderer processes' CPU time from navigation to drawn
(less sensitive than wall time to other work on a shared machine). The machine's load
average is printed with each row: wall times grow with it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

#: one connection of each shipped producer (the random-loss runs of the cross-stack pack), and
#: the guide's first example
CONNECTIONS = {
    "quic-go v0.65.0 (traces/quic-go-v0.65.0.qlog#0)": ("traces/quic-go-v0.65.0.qlog", 0),
    "quic-go (stacks#14)": ("traces/stacks/stacks.qlog", 14),
    "quiche (stacks#32)": ("traces/stacks/stacks.qlog", 32),
    "aioquic (stacks#2)": ("traces/stacks/stacks.qlog", 2),
    "quinn (stacks#50)": ("traces/stacks/stacks.qlog", 50),
    "quinn, the longest connection (stacks#55, 32.5 s)": ("traces/stacks/stacks.qlog", 55),
}


def _series(path: str, index: int):  # type: ignore[no-untyped-def]
    from quicsm.extract.packets import read_packet_timelines
    from quicsm.extract.raw_events import trace_records
    from quicsm.extract.read import read_metrics, read_transitions
    from quicsm.render.connection import connection_series

    trace = f"{path}#{index:04d}"
    transitions = read_transitions([path])
    metrics = read_metrics([path])
    packets = read_packet_timelines([path], [trace])
    # the records a click on a mark shows travel in the page, as `quicsm plot` makes it
    return connection_series(transitions, metrics, trace, packets=packets.get(trace),
                             records=trace_records(path, index))  # fmt: skip


def _renderer_cpu_s(browser) -> dict[int, float]:  # type: ignore[no-untyped-def]
    """CPU seconds of each live renderer process, by process id."""
    info = browser.send("SystemInfo.getProcessInfo")["processInfo"]
    return {int(p["id"]): float(p["cpuTime"]) for p in info if p["type"] == "renderer"}


def _draw_ms(browser, page: Path, runs: int) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """Median (drawn, libraries run, renderer CPU) in ms over ``runs`` loads."""
    drawn, libs, cpu = [], [], []
    for _ in range(runs):
        before = _renderer_cpu_s(browser)
        session, load = browser.load(page.as_uri(), width=1400)
        for _ in range(1200):
            if browser.evaluate(session, "document.body.dataset.drawn || ''"):
                break
            time.sleep(0.02)
        after = _renderer_cpu_s(browser)  # a new tab may run in a new renderer process
        cpu.append(sum(t - before.get(pid, 0.0) for pid, t in after.items()) * 1e3)
        assert browser.evaluate(session, "document.body.dataset.drawn") == "yes", load.errors
        drawn.append(float(browser.evaluate(session, "document.body.dataset.drawnMs")))
        libs.append(float(browser.evaluate(session, "document.body.dataset.libMs")))
        browser.send("Target.closeTarget", {"targetId": _target(browser, session)})
    return statistics.median(drawn), statistics.median(libs), statistics.median(cpu)


def _target(browser, session: str) -> str:  # type: ignore[no-untyped-def]
    info = browser.send("Target.getTargetInfo", session=session)
    return str(info["targetInfo"]["targetId"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="loads per page (0: sizes only)")
    args = parser.parse_args()
    from cdp import Browser, find_chromium

    from quicsm.render import charts

    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("chromium is missing: scripts/setup installs it")
    print(f"{'connection':<48} {'page':>9} {'baseline':>9} {'draw ms':>8} {'libs':>5} "
          f"{'CPU ms':>7} {'baseline':>9} {'CPU ms':>7} {'ratio':>6} {'load':>5}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, Browser(chromium, timeout_s=300) as browser:
        for name, (path, index) in CONNECTIONS.items():
            series = _series(str(ROOT / path) if not Path(path).exists() else path, index)
            reduced = Path(tmp) / "page.html"
            full = Path(tmp) / "baseline.html"
            reduced.write_text(charts.connection_page([series]))
            compile_ = charts.to_vega
            charts.to_vega = lambda spec: spec  # type: ignore[assignment]
            try:  # the baseline: Vega-Lite, compiled by the page
                full.write_text(charts.connection_page([series]))
            finally:
                charts.to_vega = compile_
            nan = float("nan")
            (r_ms, r_libs, r_cpu), (f_ms, _, f_cpu) = (nan, nan, nan), (nan, nan, nan)
            if args.runs:
                r_ms, r_libs, r_cpu = _draw_ms(browser, reduced, args.runs)
                f_ms, _, f_cpu = _draw_ms(browser, full, args.runs)
            print(f"{name:<48} {reduced.stat().st_size / 1e3:>7.0f}KB "
                  f"{full.stat().st_size / 1e3:>7.0f}KB {r_ms:>8.0f} {r_libs:>5.0f} {r_cpu:>7.0f} "
                  f"{f_ms:>9.0f} {f_cpu:>7.0f} {f_ms / r_ms:>5.2f}x "
                  f"{os.getloadavg()[0]:>5.1f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
