"""Calibration of ``quicsm diff``: false-positive rate and power, over seeded repetitions.

Each repetition draws two groups of synthetic traces (:mod:`quicsm.testing.synthetic`) and runs
:func:`quicsm.diff`:

- **null**: both groups from the same profile. Any significant finding is a false positive.
  Reported per family (time in state, per-source transitions, per-edge transitions, dwell
  times, invariant breaks) and for "anything at all" (what ``--fail-on-significant`` acts on);
- **mixed null**: both groups from the same *mixture*: each trace follows the default profile
  or, with probability 1/2, a loss-heavy one that loops between CongestionAvoidance and
  Recovery (CongestionAvoidance → Recovery 0.9, Recovery → CongestionAvoidance 0.97), so a few
  long traces hold most transitions — as real traces from different network conditions do.
  That is what breaks tests that treat transitions as independent;
- **transition**: group B's Recovery → CongestionAvoidance probability 0.86 → 0.50;
- **dwell**: group B's mean Recovery dwell 60 → 120 ms.

For the last two, the power is the share of repetitions that flag the changed quantity.
Every rate comes with a 95% Wilson interval. Results go to stdout (Markdown) and to
``benchmarks/results/diff_calibration.json``::

    .venv/bin/python benchmarks/diff_calibration.py                      # 200 repetitions
    .venv/bin/python benchmarks/diff_calibration.py --repetitions 50 --traces 20
    .venv/bin/python benchmarks/diff_calibration.py --no-design-effect   # plain pooled G-test
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from quicsm.compare.diff import DiffResult, diff
from quicsm.stats.significance import wilson
from quicsm.testing.synthetic import Profile, generate_transitions

FAMILIES = ("states", "sources", "edges", "dwell", "invariants")


def _any(r: DiffResult, family: str) -> bool:
    return bool(getattr(r, family)["significant"].any())


def _flagged_transition(r: DiffResult) -> bool:
    e = r.edges.filter(
        (pl.col("source") == "Recovery") & (pl.col("target") == "CongestionAvoidance")
    )
    return bool(e["significant"].any())


def _flagged_dwell(r: DiffResult) -> bool:
    return bool(r.dwell.filter(pl.col("state") == "Recovery")["significant"].any())


def _mixture(n: int, seed: int, profiles: tuple[Profile, Profile]) -> pl.DataFrame:
    """``n`` traces, each from one of two profiles with probability 1/2."""
    k = int(np.random.default_rng(seed).binomial(n, 0.5))
    parts = [
        generate_transitions(k, seed=seed, profile=profiles[0]),
        generate_transitions(n - k, seed=seed + 500_000, profile=profiles[1]),
    ]
    return pl.concat([p for p in parts if p.height])


def _rate(k: int, n: int) -> dict[str, float]:
    lo, hi = wilson(k, n)
    return {"count": k, "n": n, "rate": k / n, "ci_low": lo, "ci_high": hi}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repetitions", type=int, default=200)
    ap.add_argument("--traces", type=int, default=12, help="traces per group")
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--permutations", type=int, default=999)
    ap.add_argument("--seed", type=int, default=0, help="base seed of the repetitions")
    ap.add_argument(
        "--no-design-effect",
        action="store_true",
        help="turn off the Rao-Scott correction of the G-test (to see what it buys)",
    )
    args = ap.parse_args()
    if args.no_design_effect:
        from quicsm.stats import significance

        significance.design_effect = lambda a, b: 1.0

    base = Profile()
    scenarios = {
        "null": base,
        "transition": base.with_transition("Recovery", "CongestionAvoidance", 0.5),
        "dwell": base.with_dwell("Recovery", 120.0),
    }
    lossy = base.with_transition("CongestionAvoidance", "Recovery", 0.9).with_transition(
        "Recovery", "CongestionAvoidance", 0.97
    )
    counts: dict[str, dict[str, int]] = {s: {} for s in [*scenarios, "mixed"]}
    start = time.perf_counter()
    for rep in range(args.repetitions):
        seed_a = args.seed + 10_000 + 2 * rep
        a = generate_transitions(args.traces, seed=seed_a)
        runs = [
            (name, a, generate_transitions(args.traces, seed=seed_a + 1, profile=profile))
            for name, profile in scenarios.items()
        ]
        runs.append(
            (
                "mixed",
                _mixture(args.traces, seed_a, (base, lossy)),
                _mixture(args.traces, seed_a + 1, (base, lossy)),
            )
        )
        for name, ga, gb in runs:
            r = diff(ga, gb, alpha=args.alpha, permutations=args.permutations, seed=rep)
            c = counts[name]
            for fam in FAMILIES:
                c[fam] = c.get(fam, 0) + _any(r, fam)
            c["anything"] = c.get("anything", 0) + r.any_significant
            c["transition_flagged"] = c.get("transition_flagged", 0) + _flagged_transition(r)
            c["dwell_flagged"] = c.get("dwell_flagged", 0) + _flagged_dwell(r)
    elapsed = time.perf_counter() - start
    n = args.repetitions
    results: dict[str, Any] = {
        "settings": vars(args),
        "seconds": round(elapsed, 1),
        "false_positive": {
            k: _rate(v, n)
            for k, v in counts["null"].items()
            if k not in ("transition_flagged", "dwell_flagged")
        },
        "false_positive_mixed": {
            k: _rate(v, n)
            for k, v in counts["mixed"].items()
            if k not in ("transition_flagged", "dwell_flagged")
        },
        "power": {
            "transition (Recovery→CongestionAvoidance 0.86→0.50)": _rate(
                counts["transition"]["transition_flagged"], n
            ),
            "dwell (Recovery mean 60→120 ms)": _rate(counts["dwell"]["dwell_flagged"], n),
        },
        "collateral": {
            "transition scenario, any dwell flagged": _rate(counts["transition"]["dwell"], n),
            "dwell scenario, any edge flagged": _rate(counts["dwell"]["edges"], n),
        },
    }
    out = Path(__file__).parent / "results" / "diff_calibration.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")

    def row(label: str, r: dict[str, float]) -> str:
        return (
            f"| {label} | {r['count']}/{r['n']} | {100 * r['rate']:.1f}% "
            f"[{100 * r['ci_low']:.1f}, {100 * r['ci_high']:.1f}] |"
        )

    print(
        f"{n} repetitions, {args.traces} vs {args.traces} traces, alpha = {args.alpha}, "
        f"{args.permutations} permutations ({elapsed:.0f} s)\n"
    )
    print("| quantity | repetitions | rate [95% CI] |\n|---|---|---|")
    for k, r in results["false_positive"].items():
        print(row(f"false positive: {k}", r))
    for k, r in results["false_positive_mixed"].items():
        print(row(f"false positive, mixed groups: {k}", r))
    for group in ("power", "collateral"):
        for k, r in results[group].items():
            print(row(f"{group}: {k}", r))


if __name__ == "__main__":
    main()
