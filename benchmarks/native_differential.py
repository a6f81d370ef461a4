"""Differential campaign: the native core against the Python reference on mutated real files.

Each input is a real fixture (cut to 2 MiB, as in ``fuzz_campaign.py``) with one to three
mutations of ``quicsm.testing.mutate`` (no bombs: they test decompression, which both paths
share). Every input is read four times with the native core and four times without
(``QUICSM_NATIVE=0``): derived states strict, derived states lenient, hybrid lenient, and
explicit states strict (no deriver, but contained JSON is read by the native core in every
mode). The two must give the same rows and diagnostics, or the same error. A difference is a
defect; the summary counts inputs, outcomes and differences, and lists the first differing inputs.

::

    .venv/bin/python benchmarks/native_differential.py --inputs 5000 --seed 1 --workers 2

Results: ``benchmarks/results/native_differential.json``; docs/derive.md quotes the summary.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from native_outcome import compare  # noqa: E402

from quicsm.testing import mutate as m  # noqa: E402

ROOT = Path(__file__).resolve().parent
SEEDS = m.seed_files(2 << 20)
READS = (("derived", False), ("derived", True), ("hybrid", True), ("explicit", False))
_WORKDIR = ""


def case(i: int, seed: int) -> tuple[int, int, list[str]]:
    """Input ``i`` of campaign ``seed``: (fixture index, mutation seed, mutation kinds)."""
    rng = random.Random(seed * 1_000_003 + i)
    kinds = rng.sample(sorted(set(m.MUTATIONS) - {"bomb"}), rng.randint(1, 3))
    return rng.randrange(len(SEEDS)), rng.getrandbits(32), kinds


def run_one(args: tuple[int, int]) -> tuple[int, list[str], list[str]]:
    """(input, outcome per read, differences)."""
    i, seed = args
    index, rng_seed, kinds = case(i, seed)
    path = Path(_WORKDIR) / f"input-{i}"
    path.write_bytes(m.mutate(SEEDS[index][1], random.Random(rng_seed), kinds=kinds))
    outcomes, diffs = [], []
    try:
        for states, lenient in READS:
            found, result = compare(path, states=states, lenient=lenient)
            mode = f"{states} {'lenient' if lenient else 'strict'}"
            if found is not None:
                diffs.append(f"{mode}: {found[:300]}")
            outcomes.append(f"{mode}: {result[0] if result[0] == 'rows' else result[1]}")
    finally:
        path.unlink()
    return i, outcomes, diffs


def _init(workdir: str) -> None:
    global _WORKDIR
    _WORKDIR = workdir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--inputs", type=int, default=2000, help="mutated files (each read natively and in Python)"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the mutations")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    args = parser.parse_args(argv)
    from quicsm import _native  # noqa: F401  (the campaign compares it: it must exist)

    started = time.monotonic()
    counts: Counter[str] = Counter()
    differing: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as workdir:
        ctx = mp.get_context("fork")
        with ctx.Pool(args.workers, initializer=_init, initargs=(workdir,)) as pool:
            tasks = ((i, args.seed) for i in range(args.inputs))
            for done, (i, outcomes, diffs) in enumerate(pool.imap_unordered(run_one, tasks), 1):
                counts.update(outcomes)
                if diffs:
                    differing.append({"input": i, "case": case(i, args.seed), "diffs": diffs})
                    print(f"input {i} {case(i, args.seed)}: {diffs[0]}", file=sys.stderr)
                if done % 500 == 0:
                    print(f"{done} inputs, {len(differing)} differing", file=sys.stderr)
    summary = {
        "seed": args.seed,
        "inputs": args.inputs,
        "reads_per_input": 2 * len(READS),
        "outcomes": dict(sorted(counts.items())),
        "differing_inputs": len(differing),
        "first_differing": differing[:50],
        "wall_s": round(time.monotonic() - started),
    }
    results = ROOT / "results"
    results.mkdir(exist_ok=True)
    (results / "native_differential.json").write_text(json.dumps(summary, indent=2))
    print(
        f"seed {args.seed}, inputs 0-{args.inputs - 1}: {len(differing)} differing between the "
        f"native core and the Python readers ({2 * len(READS)} reads per input, "
        f"{summary['wall_s']} s wall on {args.workers} workers)"
    )
    for name, n in summary["outcomes"].items():  # type: ignore[union-attr]
        print(f"  {name}: {n}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
