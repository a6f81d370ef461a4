"""Calibration of ``quicsm diff``: family-wise false-positive rate and power, over seeded
repetitions of synthetic comparisons (:mod:`quicsm.testing.synthetic`).

"Anything significant" is what ``--fail-on-significant`` and "What changed" act on: under the
one error-control policy (Holm over every test of a comparison) its rate on groups without a
difference is the family-wise error rate, and it should stay at most α. Settings, per number of
traces per group:

- **null**: both groups from the default profile;
- **heterogeneous null**: both groups from the same *mixture*: each trace follows the default
  profile or, with probability 1/2, a loss-heavy one that loops between CongestionAvoidance and
  Recovery, so that a few long traces hold most transitions, as in real corpora;
- **10-point shift**: B's Recovery → CongestionAvoidance probability 0.86 → 0.76; power is the
  share of repetitions that flag that transition;
- **confounded null** (10 and 30 traces): A ran 3/4 of its traces in a lossy condition and 1/4
  in a clean one, B the reverse, with identical behaviour inside each condition. Compared
  pooled, the mix shows up as differences; compared within the condition (the default when the
  mixes differ), it should not;
- **within-stratum effect**: the same mixes, B's Recovery episodes four times as long in both
  conditions; power is the share of stratified comparisons that flag anything about Recovery.

Every rate comes with its 95% Wilson interval. Results go to the results file (a run writes
``build/benchmarks/diff_calibration.json`` unless ``--results`` names one; the published one is
``docs/diff_calibration.json``) with every repetition's outcome, so that a part of
the run can be checked to reproduce exactly (``--check``, as the tests do), and ``--markdown``
prints the table of ``docs/diff.md`` from that file::

    .venv/bin/python benchmarks/diff_calibration.py --results docs/diff_calibration.json  # ~15 min
    .venv/bin/python benchmarks/diff_calibration.py --markdown      # the docs table
    .venv/bin/python benchmarks/diff_calibration.py --check 3       # re-run 3 repetitions
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from quicsm.compare.diff import DiffResult, diff
from quicsm.stats.intervals import wilson
from quicsm.testing.synthetic import (
    Profile,
    generate_transitions,
    lossy_profile,
    stratified_groups,
)

#: the stored results: the data behind the table of docs/diff.md
ROOT = Path(__file__).resolve().parent.parent
#: the published results, which the docs quote (written only when named with --results)
RESULTS = ROOT / "docs" / "diff_calibration.json"
#: where a run writes by default: a trial never overwrites the published numbers
SCRATCH = ROOT / "build" / "benchmarks" / "diff_calibration.json"
SIZES = (3, 5, 10, 30)
CONFOUNDED_SIZES = (10, 30)


def _flags_edge(source: str, target: str) -> Callable[[DiffResult], bool]:
    def flagged(r: DiffResult) -> bool:
        e = r.edges.filter((pl.col("source") == source) & (pl.col("target") == target))
        return bool(e["significant"].any())

    return flagged


def _flags_recovery(r: DiffResult) -> bool:
    return any("Recovery" in f.subject for f in r.findings() if f.p_value is not None)


def _mixture(n: int, seed: int, profiles: tuple[Profile, Profile]) -> pl.DataFrame:
    """``n`` traces, each from one of two profiles with probability 1/2."""
    k = int(np.random.default_rng(seed).binomial(n, 0.5))
    parts = [
        generate_transitions(k, seed=seed, profile=profiles[0]).with_columns(
            pl.lit("base.sqlog").alias("file")
        ),
        generate_transitions(n - k, seed=seed + 500_000, profile=profiles[1]).with_columns(
            pl.lit("lossy.sqlog").alias("file")
        ),
    ]
    return pl.concat([p for p in parts if p.height])


def repetition(rep: int, *, alpha: float, permutations: int, seed: int) -> dict[str, str]:
    """One repetition of every setting: setting name -> outcome bits ("1" = flagged)."""
    base = Profile()
    lossy = lossy_profile()
    shifted = base.with_transition("Recovery", "CongestionAvoidance", 0.76)
    opts = {"alpha": alpha, "permutations": permutations, "seed": rep}
    out: dict[str, str] = {}
    s = seed + 10_000 + 4 * rep
    for n in SIZES:
        a = generate_transitions(n, seed=s)
        r = diff(a, generate_transitions(n, seed=s + 1), **opts)  # type: ignore[arg-type]
        out[f"null/{n}"] = str(int(r.any_significant))
        r = diff(_mixture(n, s, (base, lossy)), _mixture(n, s + 1, (base, lossy)), **opts)  # type: ignore[arg-type]
        out[f"mixed/{n}"] = str(int(r.any_significant))
        r = diff(a, generate_transitions(n, seed=s + 1, profile=shifted), **opts)  # type: ignore[arg-type]
        out[f"shift/{n}"] = str(int(_flags_edge("Recovery", "CongestionAvoidance")(r)))
    clean = base.with_transition("CongestionAvoidance", "Recovery", 0.1)
    noisy = lossy.with_dwell("Recovery", 300.0)
    conditions = {"clean": clean, "lossy": noisy}
    longer = {
        "clean": clean.with_dwell("Recovery", 240.0),
        "lossy": noisy.with_dwell("Recovery", 1200.0),
    }
    for n in CONFOUNDED_SIZES:
        many, few = (3 * n) // 4, n - (3 * n) // 4
        mix_a, mix_b = {"lossy": many, "clean": few}, {"lossy": few, "clean": many}
        a, b, strata = stratified_groups(mix_a, mix_b, seed=s + 2, profiles=conditions)
        out[f"confounded-pooled/{n}"] = str(int(diff(a, b, **opts).any_significant))  # type: ignore[arg-type]
        r = diff(a, b, strata=strata, **opts)  # type: ignore[arg-type]
        out[f"confounded/{n}"] = str(int(r.any_significant))
        a, b, strata = stratified_groups(
            mix_a, mix_b, seed=s + 2, profiles=conditions, b_profiles=longer
        )
        r = diff(a, b, strata=strata, **opts)  # type: ignore[arg-type]
        out[f"within/{n}"] = str(int(_flags_recovery(r)))
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    bits: dict[str, list[str]] = {}
    start = time.perf_counter()
    for rep in range(args.repetitions):
        for key, b in repetition(
            rep, alpha=args.alpha, permutations=args.permutations, seed=args.seed
        ).items():
            bits.setdefault(key, []).append(b)
        if args.progress:
            print(f"{rep + 1}/{args.repetitions}", file=sys.stderr, end="\r")
    return {
        "settings": {
            "repetitions": args.repetitions,
            "alpha": args.alpha,
            "permutations": args.permutations,
            "seed": args.seed,
        },
        "seconds": round(time.perf_counter() - start, 1),
        "outcomes": {k: "".join(v) for k, v in bits.items()},
    }


def _rate(bits: str) -> str:
    k, n = bits.count("1"), len(bits)
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


ROWS = (
    ("null", "false positive (anything significant), same profile", SIZES),
    ("mixed", "false positive, heterogeneous groups", SIZES),
    ("shift", "power: Recovery → CongestionAvoidance 0.86 → 0.76 flagged", SIZES),
    (
        "confounded-pooled",
        "confounded mix, compared pooled: anything significant",
        CONFOUNDED_SIZES,
    ),
    (
        "confounded",
        "confounded mix, compared within strata: anything significant",
        CONFOUNDED_SIZES,
    ),
    ("within", "power: within-stratum Recovery change flagged (within strata)", CONFOUNDED_SIZES),
)


def markdown(results: dict[str, Any]) -> str:
    s = results["settings"]
    head = " | ".join(f"{n} vs {n} traces" for n in SIZES)
    lines = [
        f"{s['repetitions']} repetitions per setting, α = {s['alpha']:g}, "
        f"{s['permutations']} random permutations when the splits are many; "
        "each rate with its 95% Wilson interval.",
        "",
        f"| setting | {head} |",
        "|---|" + "---|" * len(SIZES),
    ]
    for key, label, sizes in ROWS:
        cells = [_rate(results["outcomes"][f"{key}/{n}"]) if n in sizes else "–" for n in SIZES]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def check(results: dict[str, Any], count: int) -> list[str]:
    """Re-run the first ``count`` repetitions; the differences from the stored outcomes."""
    s = results["settings"]
    problems = []
    for rep in range(count):
        got = repetition(rep, alpha=s["alpha"], permutations=s["permutations"], seed=s["seed"])
        for key, bit in got.items():
            stored = results["outcomes"][key][rep]
            if stored != bit:
                problems.append(f"repetition {rep}, {key}: stored {stored}, now {bit}")
    return problems


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repetitions", type=int, default=200, help="simulated diffs per setting")
    ap.add_argument("--alpha", type=float, default=0.05, help="family-wise level")
    ap.add_argument(
        "--permutations", type=int, default=999, help="permutations per permutation test"
    )
    ap.add_argument("--seed", type=int, default=0, help="base seed of the repetitions")
    ap.add_argument("--progress", action="store_true", help="print each setting as it finishes")
    ap.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"the results file to write (default: {SCRATCH.relative_to(ROOT)}; name "
        f"{RESULTS.relative_to(ROOT)} to publish) or, with --markdown and --check, to read "
        f"(default: {RESULTS.relative_to(ROOT)})",
    )
    ap.add_argument(
        "--markdown", action="store_true", help="print the docs table from the results file"
    )
    ap.add_argument(
        "--check", type=int, metavar="N", help="re-run the first N repetitions and compare"
    )
    args = ap.parse_args()
    if args.markdown:
        sys.stdout.write(markdown(json.loads((args.results or RESULTS).read_text())))
        return
    if args.check is not None:
        problems = check(json.loads((args.results or RESULTS).read_text()), args.check)
        print("\n".join(problems) or f"the first {args.check} repetitions reproduce exactly")
        sys.exit(1 if problems else 0)
    results = run(args)
    output = args.results or SCRATCH
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=1) + "\n")
    print(f"written: {output}", file=sys.stderr)
    sys.stdout.write(markdown(results))


if __name__ == "__main__":
    main()
