"""A long fuzzing campaign against the readers: mutated real fixtures, in both modes.

Each input is a seeded mutation of one real fixture (``quicsm.testing.mutate``: byte flips,
truncation, JSON type swaps, huge numbers, deep nesting, times going backwards, BOM and trailing
empty events, gzip/zstd recompression with skippable frames and cuts, and bombs). A fresh worker
process (forked for each input and mode from a parent that imported everything, so that each
read's memory is measured alone) reads it with every reader and ``inspect``, strict and
lenient. The parent watches the worker: over ``--timeout`` CPU seconds (or 120 s of wall
clock) is a hang, a resident set over ``--rss-mb`` a memory failure; either kills the worker.
Outcomes are counted by class:

- ``read`` (rows), ``QlogError``, ``InputError``: the contract holds;
- ``defect``: another exception, a leaked Python warning, or an error only the last-resort
  boundary caught; ``hang``; ``rss``: the contract is broken (the first few are printed).

::

    .venv/bin/python benchmarks/fuzz_campaign.py --inputs 100000 --seed 1
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from multiprocessing.connection import Connection
from pathlib import Path

import psutil

from quicsm.testing import mutate as m

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from read_outcome import read_everything  # noqa: E402

import quicsm.extract.read  # noqa: E402, F401 - imported once, before the workers fork
import quicsm.qlog.inspect  # noqa: E402, F401


def _case(i: int, seed: int) -> tuple[int, int, list[str]]:
    rng = random.Random(seed * 1_000_003 + i)
    kinds = rng.sample(sorted(m.MUTATIONS), rng.randint(1, 3))
    return rng.randrange(len(SEEDS)), rng.getrandbits(32), kinds


SEEDS = m.seed_files()


def _worker(conn: Connection, workdir: str) -> None:
    """One job in a fresh process (forked from a parent that imported everything), so that an
    input's memory is measured alone."""
    path = Path(workdir) / "input"
    for _ in range(1):
        job = conn.recv()
        if job is None:
            return
        index, rng_seed, kinds, lenient = job
        try:
            if lenient is None:  # write the input (not timed)
                data = m.mutate(SEEDS[index][1], random.Random(rng_seed), kinds=kinds)
                path.write_bytes(data)
                del data
                conn.send(("ok", "written"))
                continue
            conn.send(("ok", read_everything(path, lenient=lenient)[0]))
        except BaseException:  # noqa: BLE001 - a defect, reported to the parent
            conn.send(("defect", traceback.format_exc(limit=4)))


class Worker:
    def __init__(self, workdir: str) -> None:
        self.workdir = workdir

    def start(self) -> None:
        self.conn, child = mp.Pipe()
        self.proc = mp.get_context("fork").Process(
            target=_worker, args=(child, self.workdir), daemon=True
        )
        self.proc.start()
        self.ps = psutil.Process(self.proc.pid)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join()

    def cpu(self) -> float:
        with contextlib.suppress(psutil.Error):
            times = self.ps.cpu_times()
            return float(times.user + times.system)
        return 0.0

    def run(
        self,
        job: tuple[int, int, list[str], bool | None],
        timeout: float,
        rss_mb: float,
        wall_timeout: float = 120.0,
    ) -> tuple[str, object, float]:
        """``(kind, payload, CPU seconds)``; a hang is over ``timeout`` CPU seconds (the
        machine may be shared: wall-clock time mostly measures other jobs) or over
        ``wall_timeout`` wall-clock seconds."""
        self.start()
        start_cpu = self.cpu()
        self.conn.send(job)
        wall_deadline = time.monotonic() + wall_timeout
        peak = 0.0
        while not self.conn.poll(0.05):
            with contextlib.suppress(psutil.Error):
                peak = max(peak, self.ps.memory_info().rss / 2**20)
            used = self.cpu() - start_cpu
            if peak > rss_mb:
                self.kill()
                return "rss", f"{peak:.0f} MB", used
            if used > timeout or time.monotonic() > wall_deadline:
                self.kill()
                return "hang", f"{used:.1f} s CPU", used
        kind, payload = self.conn.recv()
        used = self.cpu() - start_cpu
        with contextlib.suppress(psutil.Error):
            peak = max(peak, self.ps.memory_info().rss / 2**20)
        self.proc.join()
        if peak > rss_mb:
            return "rss", f"{peak:.0f} MB", used
        if used > timeout:
            return "hang", f"{used:.1f} s CPU", used
        return kind, payload, used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--inputs", type=int, default=1000, help="mutated files (each read in both modes)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--timeout", type=float, default=10.0, help="CPU seconds per input and mode"
    )
    parser.add_argument("--rss-mb", type=float, default=600.0)
    parser.add_argument("--minutes", type=float, default=None, help="stop after this long")
    args = parser.parse_args(argv)
    counts: dict[str, Counter[str]] = {"strict": Counter(), "lenient": Counter()}
    broken: Counter[str] = Counter()
    slowest = {"strict": 0.0, "lenient": 0.0}
    shown = 0
    started = time.monotonic()
    done = 0
    with tempfile.TemporaryDirectory() as workdir:
        worker = Worker(workdir)
        for i in range(args.inputs):
            if args.minutes is not None and time.monotonic() - started > args.minutes * 60:
                break
            case = _case(i, args.seed)
            worker.run((*case, None), 600.0, float("inf"), 600.0)
            for mode, lenient in (("strict", False), ("lenient", True)):
                kind, payload, used = worker.run((*case, lenient), args.timeout, args.rss_mb)
                slowest[mode] = max(slowest[mode], used)
                if kind == "ok":
                    counts[mode][str(payload)] += 1
                    continue
                broken[f"{mode} {kind}"] += 1
                if shown < 5:
                    shown += 1
                    print(f"input {i} {case} {mode}: {kind}: {payload}", file=sys.stderr)
            done += 1
            if done % 1000 == 0:
                print(f"{done} inputs, {time.monotonic() - started:.0f} s", file=sys.stderr)
    print(f"inputs: {done} (seed {args.seed}), each read strict and lenient by read_transitions,")
    print("read_metrics, read_traces and inspect")
    for mode, c in counts.items():
        parts = ", ".join(f"{k} {c[k]}" for k in ("read", "QlogError", "InputError"))
        print(f"  {mode}: {parts}")
    for mode in counts:
        parts = ", ".join(f"{k} {broken[f'{mode} {k}']}" for k in ("defect", "hang", "rss"))
        print(f"  {mode}, contract broken: {parts}; slowest input {slowest[mode]:.2f} s CPU")
    print(f"wall clock: {time.monotonic() - started:.0f} s")
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
