"""Does sampling TCP_INFO see every episode the kernel counts?

Every kernel TCP trace ends with ``quicsm:tcp_summary``: the network namespace's own counts of
fast recoveries (``TCPSackRecovery`` + ``TCPRenoRecovery``), tail loss probes
(``TCPLossProbes``) and retransmission timeouts (``TCPTimeouts``) during the connection. This
compares them with the episodes the trace shows (entries into ``Recovery``, ``TailLossProbe``,
``RetransmissionTimeout``), per controller, as Markdown::

    .venv/bin/python benchmarks/tcp_sampling.py        # benchmarks/corpora/linux-tcp.qlog
    .venv/bin/python benchmarks/tcp_sampling.py more-runs.qlog

Consecutive timeouts are one ``RetransmissionTimeout`` entry (the socket stays in Loss), so for
timeouts the runs are compared on whether any occurred.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

import orjson
import polars as pl
import zstandard

from quicsm.extract.read import read_traces, read_transitions

CORPUS = Path(__file__).resolve().parent / "corpora" / "linux-tcp.qlog"
EPISODES = {"Recovery": ("TCPSackRecovery", "TCPRenoRecovery"), "TailLossProbe": ("TCPLossProbes",)}


def summaries(path: str) -> list[dict[str, int]]:
    """The summary of every trace of ``path`` (kernel counters and samples), in trace order."""
    raw = Path(path).read_bytes()
    if raw[:4] == b"\x28\xb5\x2f\xfd":
        raw = zstandard.ZstdDecompressor().stream_reader(raw).read()
    out = []
    for record in raw.split(b"\x1e"):
        if b"quicsm:tcp_summary" in record:
            out.append(orjson.loads(record)["data"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "paths", nargs="*", default=[str(CORPUS)], help="kernel TCP qlog files (default: corpus)"
    )
    args = ap.parse_args()
    rows: dict[str, Counter[str]] = defaultdict(Counter)
    intervals: list[float] = []
    for path in args.paths:
        traces = read_traces([path])
        kernel = summaries(path)
        assert len(kernel) == traces.height, (path, len(kernel), traces.height)
        states = read_transitions([path]).select(pl.col("trace").cast(pl.String), "state")
        for (trace, labels, duration_ms), summary in zip(
            traces.select(pl.col("trace").cast(pl.String), "labels", "duration_ms").iter_rows(),
            kernel,
            strict=True,
        ):
            counts = summary["kernel_counters"]
            intervals.append(1e3 * duration_ms / max(1, summary["samples"]))
            cc = json.loads(labels)["cc_algorithm"]
            seen = Counter(states.filter(pl.col("trace") == trace)["state"].cast(pl.String))
            r = rows[cc]
            r["runs"] += 1
            for state, keys in EPISODES.items():
                k = sum(counts[key] for key in keys)
                r[f"{state} kernel"] += k
                r[f"{state} seen"] += seen[state]
                r[f"{state} runs exact"] += seen[state] == k
            r["RTO runs kernel"] += counts["TCPTimeouts"] > 0
            r["RTO runs agree"] += (seen["RetransmissionTimeout"] > 0) == (
                counts["TCPTimeouts"] > 0
            )
    print(
        "| controller | runs | Recovery: kernel / seen (runs exact) | TailLossProbe: kernel / seen "
        "(runs exact) | runs with an RTO: kernel (runs agreeing) |"
    )
    print("|---|---:|---:|---:|---:|")
    total: Counter[str] = Counter()
    for cc in sorted(rows):
        r = rows[cc]
        total.update(r)
        print(_row(cc, r))
    print(_row("all", total))
    intervals.sort()
    print(
        f"\nsampling interval per connection (duration / samples): median "
        f"{intervals[len(intervals) // 2]:.0f} µs, largest {intervals[-1]:.0f} µs"
    )


def _row(name: str, r: Counter[str]) -> str:
    return (
        f"| {name} | {r['runs']} | {r['Recovery kernel']} / {r['Recovery seen']} "
        f"({r['Recovery runs exact']}) | {r['TailLossProbe kernel']} / {r['TailLossProbe seen']} "
        f"({r['TailLossProbe runs exact']}) | {r['RTO runs kernel']} ({r['RTO runs agree']}) |"
    )


if __name__ == "__main__":
    main()
