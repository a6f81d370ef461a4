#!/usr/bin/env python3
"""One connection's ``quicsm plot`` page: its size and how long Chromium takes to draw it, with
the data reduced per pixel column (zoom levels: first, lowest, highest and last point of each
column, finer levels drawn as the view narrows) against the same page carrying every point at
one level (the baseline), both built and drawn in the same run.

    .venv/bin/python benchmarks/bench_plot_page.py [--runs 3]    (--runs 0: page sizes only)

Draw time is ``performance.now()`` when the page reports itself drawn (the libraries and data
unpacked, the chart drawn), median of ``--runs`` loads in a fresh headless Chromium tab.
"""

from __future__ import annotations

import argparse
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
    from quicsm.extract.read import read_metrics, read_transitions
    from quicsm.render.connection import connection_series

    trace = f"{path}#{index:04d}"
    transitions = read_transitions([path])
    metrics = read_metrics([path])
    packets = read_packet_timelines([path], [trace])
    return connection_series(transitions, metrics, trace, packets=packets.get(trace))


def _draw_ms(browser, page: Path, runs: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        session, load = browser.load(page.as_uri(), width=1400)
        for _ in range(1200):
            if browser.evaluate(session, "document.body.dataset.drawn || ''"):
                break
            time.sleep(0.05)
        assert browser.evaluate(session, "document.body.dataset.drawn") == "yes", load.errors
        times.append(float(browser.evaluate(session, "document.body.dataset.drawnMs")))
        browser.send("Target.closeTarget", {"targetId": _target(browser, session)})
    return statistics.median(times)


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
    print(f"{'connection':<48} {'reduced':>9} {'every pt':>9} {'draw ms':>8} {'every pt':>9} "
          f"{'ratio':>6}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, Browser(chromium, timeout_s=300) as browser:
        for name, (path, index) in CONNECTIONS.items():
            series = _series(str(ROOT / path) if not Path(path).exists() else path, index)
            reduced = Path(tmp) / "reduced.html"
            full = Path(tmp) / "full.html"
            reduced.write_text(charts.connection_page([series]))
            full.write_text(charts.connection_page([series], points=10**9))
            r_ms = f_ms = float("nan")
            if args.runs:
                r_ms = _draw_ms(browser, reduced, args.runs)
                f_ms = _draw_ms(browser, full, args.runs)
            print(f"{name:<48} {reduced.stat().st_size / 1e3:>7.0f}KB "
                  f"{full.stat().st_size / 1e3:>7.0f}KB {r_ms:>8.0f} {f_ms:>9.0f} "
                  f"{f_ms / r_ms:>5.2f}x", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
