"""A long fuzzing campaign against the readers: mutated real fixtures, in both modes.

Each input is a seeded mutation of one real fixture (its records up to 2 MiB: the 28 MB stock
quic-go trace is cut to its first three traces, a 14th of its bytes, which hold the same
structures; reading large files is tested in ``tests/test_read_large.py`` and
measured by ``bench_ingest.py``) (``quicsm.testing.mutate``: byte flips,
truncation, JSON type swaps, huge numbers, deep nesting, times going backwards, BOM and trailing
empty events, gzip/zstd recompression with skippable frames and cuts; and, in 2 % of the inputs,
bombs: a bomb costs about 20 times the CPU time of another input, and the memory bound on far
larger ones, 1 GiB, is tested in ``tests/test_read_large.py``). Worker
processes (``--workers``, forked from a parent that imported everything) read the inputs the
parent writes for them (so that making an input does not count against reading it) with every
reader and ``inspect``, strict and then lenient. Outcomes are
counted by class:

- ``read`` (rows), ``QlogError``, ``InputError``: the contract holds;
- ``defect``: another exception, a leaked Python warning, or an error only the last-resort
  boundary caught; ``hang``: one reader call (``read_transitions``, ``read_metrics``,
  ``read_traces`` or ``inspect_file``) over ``--timeout`` CPU seconds (or no answer within
  ``--wall-timeout`` seconds of wall clock: the parent kills the worker); ``rss``: the worker's
  resident set went over ``--rss-mb``. The first few broken inputs are printed.

Memory is checked without a process per input: a worker's peak resident set
(``getrusage().ru_maxrss``) only grows, so when it is under the limit after an input, that
input stayed under it; when it passes the limit the input that did it is counted and the worker
is replaced. Workers are also replaced once their peak passes ``--fresh-mb``, so what earlier
inputs left behind does not add up; the parent samples each worker's RSS and kills one that
passes the limit mid-read. Counts are written to ``--out`` (JSON) as the campaign goes, so a
campaign cut short still leaves its numbers.

::

    .venv/bin/python benchmarks/fuzz_campaign.py --inputs 100000 --seed 1
    .venv/bin/python benchmarks/fuzz_campaign.py --inputs 2000 --seed 7 --workers 1  # a quick look
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import random
import resource
import sys
import tempfile
import time
import traceback
from collections import Counter
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import psutil

from quicsm.testing import mutate as m

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from read_outcome import read_everything  # noqa: E402

import quicsm.extract.read  # noqa: E402, F401 - imported once, before the workers fork
import quicsm.qlog.inspect  # noqa: E402, F401

ROOT = Path(__file__).resolve().parent
#: fixtures larger than this are cut to their records up to it
SEED_BYTES = 2 << 20
SEEDS = m.seed_files(SEED_BYTES)
MODES = (("strict", False), ("lenient", True))


#: share of inputs that are bombs (one costs about 20 times the CPU of another input)
BOMB_SHARE = 0.02


def case(i: int, seed: int) -> tuple[int, int, list[str]]:
    """Input ``i`` of campaign ``seed``: (fixture index, mutation seed, mutation kinds): one to
    three kinds, plus a bomb in ``BOMB_SHARE`` of the inputs."""
    rng = random.Random(seed * 1_000_003 + i)
    kinds = rng.sample(sorted(set(m.MUTATIONS) - {"bomb"}), rng.randint(1, 3))
    if rng.random() < BOMB_SHARE:
        kinds.append("bomb")
    return rng.randrange(len(SEEDS)), rng.getrandbits(32), kinds


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_input(i: int, seed: int, path: Path) -> None:
    """Write input ``i`` of campaign ``seed`` to ``path``."""
    index, rng_seed, kinds = case(i, seed)
    path.write_bytes(m.mutate(SEEDS[index][1], random.Random(rng_seed), kinds=kinds))


def _worker(conn: Connection) -> None:
    """Read inputs until told to stop; per input, per mode: (outcome or defect, CPU s, peak MB).
    The parent writes each input before handing over its path, so the memory the mutation takes
    (a 28 MB fixture mutated costs hundreds of MB) is not counted against the readers."""
    while True:
        task = conn.recv()
        if task is None:
            return
        path = Path(task)
        results = []
        for _mode, lenient in MODES:
            cpu: dict[str, float] = {}
            try:
                kind, payload = "ok", read_everything(path, lenient=lenient, cpu=cpu)[0]
            except BaseException:  # noqa: BLE001 - a defect, reported to the parent
                kind, payload = "defect", traceback.format_exc(limit=4)
            results.append((kind, payload, max(cpu.values(), default=0.0), _peak_mb()))
        conn.send(results)


class Worker:
    """One persistent reading process, and the input it is on."""

    def __init__(self, workdir: str, seed: int) -> None:
        self.conn, child = mp.Pipe()
        self.proc = mp.get_context("fork").Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.ps = psutil.Process(self.proc.pid)
        self.path = Path(workdir) / f"input-{self.proc.pid}"
        self.seed = seed
        self.current: int | None = None
        self.since = 0.0

    def give(self, i: int) -> None:
        make_input(i, self.seed, self.path)
        self.current, self.since = i, time.monotonic()
        self.conn.send(str(self.path))

    def rss_mb(self) -> float:
        with contextlib.suppress(psutil.Error):
            return float(self.ps.memory_info().rss) / 2**20
        return 0.0

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.proc.kill()
        else:
            with contextlib.suppress(OSError):
                self.conn.send(None)
        self.proc.join()


class Tally:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.counts: dict[str, Counter[str]] = {mode: Counter() for mode, _ in MODES}
        self.broken: Counter[str] = Counter()
        self.broken_inputs: list[list[Any]] = []  # the first 1000: input, mode, kind, detail
        self.slowest = {mode: 0.0 for mode, _ in MODES}
        self.peak = 0.0
        self.done = 0
        self.shown = 0
        self.started = time.monotonic()
        self.replaced = 0

    def broke(self, i: int, mode: str, kind: str, detail: str) -> None:
        self.broken[f"{mode} {kind}"] += 1
        if len(self.broken_inputs) < 1000:
            self.broken_inputs.append([i, mode, kind, detail[:200]])
        if self.shown < 5:
            self.shown += 1
            print(f"input {i} {case(i, self.args.seed)} {mode}: {kind}: {detail}", file=sys.stderr)

    def add(self, i: int, results: list[tuple[str, Any, float, float]]) -> bool:
        """Count one input's answers; whether its worker must be replaced (memory)."""
        replace = False
        for (mode, _), (kind, payload, cpu, peak) in zip(MODES, results, strict=True):
            self.slowest[mode] = max(self.slowest[mode], cpu)
            if peak > self.args.rss_mb and not replace:
                self.broke(i, mode, "rss", f"{peak:.0f} MB")
                replace = True
            elif peak > self.args.rss_mb:  # the earlier mode's peak: unknown for this one
                self.broke(i, mode, "rss", f"{peak:.0f} MB (after the mode before it)")
            elif kind == "defect":
                self.broke(i, mode, "defect", str(payload))
            elif cpu > self.args.timeout:
                self.broke(i, mode, "hang", f"{cpu:.1f} s CPU")
            else:
                self.counts[mode][str(payload)] += 1
            if not replace:
                self.peak = max(self.peak, peak)
        self.done += 1
        return replace or results[-1][3] > self.args.fresh_mb

    def summary(self) -> dict[str, Any]:
        return {
            "seed": self.args.seed,
            "inputs": self.done,
            "workers": self.args.workers,
            "outcomes": {mode: dict(c) for mode, c in self.counts.items()},
            "broken": dict(self.broken),
            "broken_inputs": self.broken_inputs,
            "slowest_cpu_s": {k: round(v, 2) for k, v in self.slowest.items()},
            "peak_rss_mb": round(self.peak),
            "workers_replaced": self.replaced,
            "wall_s": round(time.monotonic() - self.started),
            "load_average": os.getloadavg()[0],
        }

    def save(self) -> None:
        out = Path(self.args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(self.summary(), indent=1, sort_keys=True) + "\n")


def run(args: argparse.Namespace) -> Tally:
    tally = Tally(args)
    todo = iter(range(args.start, args.start + args.inputs))
    deadline = None if args.minutes is None else tally.started + args.minutes * 60
    with tempfile.TemporaryDirectory() as workdir:
        workers = [Worker(workdir, args.seed) for _ in range(args.workers)]
        idle = list(workers)
        busy: list[Worker] = []
        exhausted = False
        while True:
            while idle and not exhausted and (deadline is None or time.monotonic() < deadline):
                nxt = next(todo, None)
                if nxt is None:
                    exhausted = True
                    break
                w = idle.pop()
                w.give(nxt)
                busy.append(w)
            if not busy:
                break
            ready = wait([w.conn for w in busy], timeout=0.1)
            for w in list(busy):
                i = w.current
                assert i is not None
                replace = False
                if w.conn in ready:
                    try:
                        replace = tally.add(i, w.conn.recv())
                    except EOFError:  # the worker died (killed by the system)
                        tally.broke(i, "input", "defect", "the worker process died")
                        tally.done += 1
                        replace = True
                else:
                    rss, waited = w.rss_mb(), time.monotonic() - w.since
                    if rss > args.rss_mb:
                        tally.broke(i, "input", "rss", f"{rss:.0f} MB (killed mid-read)")
                    elif waited > args.wall_timeout:
                        tally.broke(i, "input", "hang", f"no answer in {waited:.0f} s")
                    else:
                        continue
                    tally.done += 1
                    w.stop(kill=True)
                    busy.remove(w)
                    w = Worker(workdir, args.seed)
                    tally.replaced += 1
                    idle.append(w)
                    continue
                busy.remove(w)
                if replace:
                    w.stop()
                    w = Worker(workdir, args.seed)
                    tally.replaced += 1
                idle.append(w)
                if tally.done % 1000 == 0:
                    tally.save()
                    print(
                        f"{tally.done} inputs, {time.monotonic() - tally.started:.0f} s",
                        file=sys.stderr,
                    )
        for w in idle:
            w.stop()
    tally.save()
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--inputs", type=int, default=1000, help="mutated files (each read in both modes)"
    )
    parser.add_argument("--start", type=int, default=0, help="index of the first input")
    parser.add_argument("--seed", type=int, default=1, help="seed of the mutations")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--timeout", type=float, default=10.0, help="CPU seconds per reader call")
    parser.add_argument(
        "--wall-timeout", type=float, default=120.0, help="wall-clock seconds per input"
    )
    parser.add_argument(
        "--rss-mb", type=float, default=600.0, help="a reader call's memory limit (peak RSS), in MB"
    )
    parser.add_argument(
        "--fresh-mb",
        type=float,
        default=200.0,
        help="replace a worker once its peak RSS passes this",
    )
    parser.add_argument("--minutes", type=float, default=None, help="stop after this long")
    parser.add_argument(
        "--out", default=str(ROOT / "results" / "fuzz_campaign.json"), help="the summary file"
    )
    args = parser.parse_args(argv)
    tally = run(args)
    s = tally.summary()
    print(
        f"inputs: {s['inputs']} (seed {args.seed}, from {args.start}), each read strict and "
        "lenient by read_transitions, read_metrics, read_traces and inspect"
    )
    for mode, c in tally.counts.items():
        parts = ", ".join(f"{k} {c[k]}" for k in ("read", "QlogError", "InputError"))
        print(f"  {mode}: {parts}")
    for mode in ("strict", "lenient", "input"):
        parts = ", ".join(f"{k} {tally.broken[f'{mode} {k}']}" for k in ("defect", "hang", "rss"))
        slowest = ""
        if mode in tally.slowest:
            slowest = f"; slowest reader call {tally.slowest[mode]:.2f} s CPU"
        print(f"  {mode}, contract broken: {parts}{slowest}")
    print(
        f"peak RSS of a worker: {s['peak_rss_mb']} MB (workers replaced: {s['workers_replaced']})"
    )
    print(f"wall clock: {s['wall_s']} s with {args.workers} workers")
    return 1 if tally.broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
