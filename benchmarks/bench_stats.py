"""Statistics over 10^7 transitions: quicsm.stats.descriptive against a plain polars group-by
baseline.

The data are synthetic QUIC-like state logs from :func:`quicsm.testing.synthetic.generate_sequences`
(seeded; about 10 states per trace, so 10^7 transitions are about 980,000 traces), written once
to ``benchmarks/data/stats-<n>-seed<seed>.parquet`` as a canonical transitions frame.

Measured in the same run, each in a fresh process that first loads the Parquet file:

- **baseline** — what one writes with plain polars for the same numbers without intervals,
  quantiles or zero-filling: dwell times with ``shift(-1).over("trace")`` (censored at
  ``end_ms``), time and visits per state with ``group_by("state")``, transition counts with
  ``group_by("state", "next")``;
- **quicsm** — :func:`quicsm.stats.descriptive.compute_stats`: time in state (pooled and mean
fractions),
  transition probabilities with cluster-robust Wilson intervals (per-trace counts), dwell-time
  mean/median/p10/p90 per state — everything a Model carries;
- **per-trace tables** — :func:`time_in_state` (zero-filled, traces x states),
  :func:`transition_counts`, :func:`dwell_times`, for information;
- **peak memory** — peak RSS of the process running ``compute_stats`` (data included), and of
  one that only loads the data.

::

    .venv/bin/python benchmarks/bench_stats.py                  # 10^7 transitions
    .venv/bin/python benchmarks/bench_stats.py --transitions 1e6   # a quick look

Targets (issue "Inference"): compute_stats < 3 s and < 2.5 GB peak on 10^7 transitions; the
ratio to the baseline is reported, not targeted. Results go to
``benchmarks/results/bench_stats.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parent


def generate(path: Path, n_transitions: int, *, seed: int) -> dict[str, int]:
    """Write a transitions frame with at least ``n_transitions`` rows (if not there yet)."""
    from quicsm.core.frames import TRANSITIONS_SCHEMA
    from quicsm.core.states import STATE_DTYPE
    from quicsm.testing.synthetic import generate_sequences, visible

    if path.exists():
        df = pl.read_parquet(path, columns=["trace"])
        return {"rows": df.height, "traces": df["trace"].n_unique()}
    pilot = generate_sequences(20_000, seed=seed)[1].size / 20_000
    n_traces = int(np.ceil(n_transitions / pilot * 1.02))
    keys, key, dwell, lengths = generate_sequences(n_traces, seed=seed)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ends = np.concatenate([[0.0], np.cumsum(dwell)])
    start = np.repeat(ends[offsets[:-1]], lengths)
    time_ms = np.round(ends[:-1] - start, 3)
    end_ms = np.round(np.repeat(ends[offsets[1:]] - ends[offsets[:-1]], lengths), 3)
    states = pl.Series([visible(k) for k in keys], dtype=STATE_DTYPE)
    width = len(str(n_traces))
    names = pl.Series(np.arange(n_traces)).cast(pl.String).str.zfill(width)
    tid = np.repeat(np.arange(n_traces), lengths)
    df = pl.DataFrame(
        {
            "file": pl.Series([None] * 0, dtype=pl.String).extend_constant(None, len(key)),
            "trace": ("bench-" + names).gather(tid),
            "vantage": pl.Series(["server"], dtype=TRANSITIONS_SCHEMA["vantage"]).extend_constant(
                "server", len(key) - 1
            ),
            "time_ms": time_ms,
            "state": states.gather(key),
            "raw_state": pl.Series([None] * 0, dtype=pl.String).extend_constant(None, len(key)),
            "trigger": pl.Series([None] * 0, dtype=pl.String).extend_constant(None, len(key)),
            "source": pl.Series(["derived"], dtype=TRANSITIONS_SCHEMA["source"]).extend_constant(
                "derived", len(key) - 1
            ),
            "end_ms": end_ms,
        }
    ).cast(TRANSITIONS_SCHEMA)  # type: ignore[arg-type]
    path.parent.mkdir(parents=True, exist_ok=True)
    df.write_parquet(path)
    return {"rows": df.height, "traces": n_traces}


_CHILD = r"""
import json, resource, sys, time
import polars as pl
path, what, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
df = pl.read_parquet(path)
loaded_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

def baseline():
    nxt = pl.col("state").shift(-1).over("trace")
    dwell = (pl.col("time_ms").shift(-1).over("trace").fill_null(pl.col("end_ms"))
             - pl.col("time_ms"))
    v = df.lazy().select("trace", "state", dwell.alias("dwell_ms"), nxt.alias("next"))
    per_state = v.group_by("state").agg(pl.len(), pl.col("dwell_ms").sum())
    pairs = v.group_by("state", "next").len()
    return pl.collect_all([per_state, pairs])

def quicsm_stats():
    from quicsm.stats.descriptive import compute_stats
    return compute_stats(df)

def per_trace():
    from quicsm.stats.descriptive import Visits, dwell_times, time_in_state, transition_counts
    v = Visits(df)
    return time_in_state(v), transition_counts(v), dwell_times(v)

fn = {"baseline": baseline, "quicsm": quicsm_stats, "per_trace": per_trace, "load": None}[what]
times, cpu = [], []
def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
if fn is not None:
    import quicsm.stats.descriptive  # import cost is not part of the measurement
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), cpu_s()
        fn()
        times.append(time.perf_counter() - t0)
        cpu.append(cpu_s() - c0)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
best = min(range(len(times)), key=times.__getitem__) if times else None
print(json.dumps({"seconds": times[best] if times else None, "all_seconds": times,
                  "cpu_seconds": cpu[best] if cpu else None,
                  "peak_rss": peak, "loaded_rss": loaded_rss}))
"""


def measure(path: Path, what: str, repeat: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), what, str(repeat)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--transitions", type=float, default=1e7, help="transitions in the generated table"
    )
    parser.add_argument("--seed", type=int, default=7, help="seed of the synthetic table")
    parser.add_argument("--repeat", type=int, default=3, help="best of N timings")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=ROOT / "data",
        help="where the table is generated (and reused)",
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "results" / "bench_stats.json", help="the results file"
    )
    args = parser.parse_args(argv)

    n = int(args.transitions)
    path = args.data_dir / f"stats-{n}-seed{args.seed}.parquet"
    t0 = time.perf_counter()
    shape = generate(path, n, seed=args.seed)
    print(
        f"data: {shape['rows']:,} transitions in {shape['traces']:,} traces ({path.name}, "
        f"{time.perf_counter() - t0:.1f} s to prepare)"
    )
    load = measure(path, "load", 1)
    base = measure(path, "baseline", args.repeat)
    ours = measure(path, "quicsm", args.repeat)
    per = measure(path, "per_trace", 1)
    result = {
        **shape,
        "baseline_s": base["seconds"],
        "baseline_cpu_s": base["cpu_seconds"],
        "compute_stats_s": ours["seconds"],
        "compute_stats_cpu_s": ours["cpu_seconds"],
        "load_average_1min": os.getloadavg()[0],
        "cpus": os.cpu_count(),
        "ratio_to_baseline": ours["seconds"] / base["seconds"],
        "per_trace_tables_s": per["seconds"],
        "compute_stats_peak_rss_bytes": ours["peak_rss"],
        "data_loaded_rss_bytes": load["peak_rss"],
        "baseline_peak_rss_bytes": base["peak_rss"],
        "targets": {"compute_stats_s": 3.0, "peak_rss_bytes": 2.5e9},
    }
    result["meets_targets"] = bool(
        result["compute_stats_s"] < 3.0 and result["compute_stats_peak_rss_bytes"] < 2.5e9
    )
    gb = 1e9
    lines = [
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} "
        "(wall times grow with the load; CPU times much less)",
        f"baseline (plain polars group-by): {base['seconds']:.2f} s "
        f"(CPU {base['cpu_seconds']:.2f} s), "
        f"peak {base['peak_rss'] / gb:.2f} GB",
        f"quicsm compute_stats:            {ours['seconds']:.2f} s "
        f"(CPU {ours['cpu_seconds']:.2f} s), "
        f"peak {ours['peak_rss'] / gb:.2f} GB (data alone {load['peak_rss'] / gb:.2f} GB)"
        f"  ->  {result['ratio_to_baseline']:.2f}x the baseline's time",
        f"per-trace tables (time_in_state, transition_counts, dwell_times): {per['seconds']:.2f} s",
        f"targets (< 3 s, < 2.5 GB): {'met' if result['meets_targets'] else 'NOT met'}",
    ]
    print("\n".join(lines))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
