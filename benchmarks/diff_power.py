"""False-positive rate and power of ``quicsm diff`` at the group sizes people run (3-30 traces
per group), on designs drawn from a known Markov chain that is written here, independently of
the project's own generator (:mod:`quicsm.testing.synthetic`).

The chain (mean dwell per visit in brackets)::

    Init (10 ms) -> SlowStart (100 ms)
    SlowStart -> CongestionAvoidance 0.8, Recovery 0.2
    CongestionAvoidance (300 ms) -> Recovery 0.5, ApplicationLimited 0.5
    Recovery (50 ms) -> CongestionAvoidance 0.9, RetransmissionTimeout 0.1
    RetransmissionTimeout (200 ms) -> SlowStart
    ApplicationLimited (100 ms) -> CongestionAvoidance

A trace is a transfer of some size: it ends after its ``k``-th visit to CongestionAvoidance,
``k`` drawn per trace from 1 + Poisson(29), so that a trace visits CongestionAvoidance about
30 times. Two variants:

- **homogeneous**: every trace follows the chain;
- **heterogeneous**: every trace draws its own transition probabilities, row by row, from a
  Dirichlet centred on the chain's (concentration 20: an intra-trace correlation of about
  0.05, a design effect of about 2.4 at 30 visits) and its own mean dwell per state (the
  chain's times a log-normal factor, σ = 0.3).

Settings per variant and group size: **null** (both groups from the chain) and **change**
(group B's CongestionAvoidance -> Recovery 0.5 -> 0.7, ApplicationLimited 0.5 -> 0.3).
For each, per repetition: whether anything of the primary family (the time shares) is
significant (Holm; the family-wise error rate under the null; under the change, the power of
the default primary family), whether anything exploratory is (BH; under the null its
family-wise rate equals its false-discovery rate), whether anything at all is, and, for the
change, whether the CongestionAvoidance -> Recovery row is significant (power) with the
default families (the transition is exploratory, under BH with every other exploratory
test), and when it was named in advance as the one primary test (``primary=
["edges:CongestionAvoidance->Recovery"]``, i.e. ``--primary
edges:CongestionAvoidance->Recovery``). The null is checked with the same pre-named family
too. Every setting runs at the CLI's default α = 0.05 and at α = 0.01.

Every repetition's outcome is stored in the results file (a run writes
``build/benchmarks/diff_power.json`` unless ``--results`` names one; the published one is
``docs/diff_power.json``) so that a part of the run can be checked to reproduce exactly
(``--check``); ``--markdown`` prints the docs table::

    nice -n 10 .venv/bin/python benchmarks/diff_power.py --repetitions 200 --progress \\
        --results docs/diff_power.json
    .venv/bin/python benchmarks/diff_power.py --markdown
    .venv/bin/python benchmarks/diff_power.py --check 2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from quicsm.compare.diff import DiffResult, diff
from quicsm.stats.intervals import wilson

ROOT = Path(__file__).resolve().parent.parent
#: the published results, which the docs quote (written only when named with --results)
RESULTS = ROOT / "docs" / "diff_power.json"
#: where a run writes by default: a trial never overwrites the published numbers
SCRATCH = ROOT / "build" / "benchmarks" / "diff_power.json"
SIZES = (3, 5, 10, 30)
VARIANTS = ("homogeneous", "heterogeneous")
END = "END"

CHAIN: dict[str, dict[str, float]] = {
    "Init": {"SlowStart": 1.0},
    "SlowStart": {"CongestionAvoidance": 0.8, "Recovery": 0.2},
    "CongestionAvoidance": {"Recovery": 0.5, "ApplicationLimited": 0.5},
    "Recovery": {"CongestionAvoidance": 0.9, "RetransmissionTimeout": 0.1},
    "RetransmissionTimeout": {"SlowStart": 1.0},
    "ApplicationLimited": {"CongestionAvoidance": 1.0},
}
CHANGED = {
    **CHAIN,
    "CongestionAvoidance": {"Recovery": 0.7, "ApplicationLimited": 0.3},
}
DWELL_MS = {
    "Init": 10.0,
    "SlowStart": 100.0,
    "CongestionAvoidance": 300.0,
    "Recovery": 50.0,
    "RetransmissionTimeout": 200.0,
    "ApplicationLimited": 100.0,
}
CONCENTRATION = 20.0
DWELL_SIGMA = 0.3
MAX_STEPS = 2000
VISITS = 30
#: the pre-named primary family of the "named in advance" settings: the one transition
NAMED = ("edges:CongestionAvoidance->Recovery",)
#: the levels the table is made at: the CLI's default first
ALPHAS = (0.05, 0.01)


def traces(
    n: int, rng: np.random.Generator, chain: dict[str, dict[str, float]], *, mixed: bool, tag: str
) -> pl.DataFrame:
    """``n`` traces of the chain as a transitions frame (``trace, time_ms, state``)."""
    rows: list[tuple[str, float, str, float]] = []
    for i in range(n):
        table = {}
        for state, row in chain.items():
            targets = list(row)
            p = np.array([row[t] for t in targets])
            if mixed and len(targets) > 1:
                p = rng.dirichlet(CONCENTRATION * p)
            table[state] = (targets, p)
        scale = {
            s: m * (float(rng.lognormal(0.0, DWELL_SIGMA)) if mixed else 1.0)
            for s, m in DWELL_MS.items()
        }
        state, clock, start = "Init", 0.0, len(rows)
        budget = 1 + int(rng.poisson(VISITS - 1))  # the transfer's size, in CA visits
        for _ in range(MAX_STEPS):
            rows.append((f"{tag}-{i}", clock, state, 0.0))
            clock += float(rng.exponential(scale[state]))
            budget -= state == "CongestionAvoidance"
            if budget <= 0:
                break
            targets, p = table[state]
            state = targets[int(rng.choice(len(targets), p=p))]
        rows[start:] = [(t, x, s, clock) for t, x, s, _ in rows[start:]]
    return pl.DataFrame(rows, schema=["trace", "time_ms", "state", "end_ms"], orient="row")


def _edge_flagged(r: DiffResult, source: str, target: str) -> bool:
    e = r.edges.filter((pl.col("source") == source) & (pl.col("target") == target))
    return bool(e["significant"].any())


def _exploratory(r: DiffResult) -> bool:
    return any(
        f.height and bool(f.filter(pl.col("family") == "exploratory")["significant"].any())
        for f in r.frames()
    )


def repetition(
    rep: int, *, alpha: float, seed: int, sizes: tuple[int, ...] = SIZES
) -> dict[str, str]:
    """One repetition of every setting: setting name -> outcome bits."""
    out: dict[str, str] = {}
    for v, variant in enumerate(VARIANTS):
        for n in sizes:
            rng = np.random.default_rng([seed, rep, v, n])
            mixed = variant == "heterogeneous"
            a = traces(n, rng, CHAIN, mixed=mixed, tag="a")
            b0 = traces(n, rng, CHAIN, mixed=mixed, tag="b")
            b1 = traces(n, rng, CHANGED, mixed=mixed, tag="c")
            r0 = diff(a, b0, alpha=alpha, seed=rep)
            out[f"{variant}/null-primary/{n}"] = str(int(r0.primary_significant))
            out[f"{variant}/null-exploratory/{n}"] = str(int(_exploratory(r0)))
            out[f"{variant}/null-any/{n}"] = str(int(r0.any_significant))
            r1 = diff(a, b1, alpha=alpha, seed=rep)
            out[f"{variant}/power-primary/{n}"] = str(int(r1.primary_significant))
            out[f"{variant}/power/{n}"] = str(
                int(_edge_flagged(r1, "CongestionAvoidance", "Recovery"))
            )
            r0 = diff(a, b0, alpha=alpha, seed=rep, primary=NAMED, invariants=False)
            out[f"{variant}/null-named/{n}"] = str(int(r0.primary_significant))
            r1 = diff(a, b1, alpha=alpha, seed=rep, primary=NAMED, invariants=False)
            out[f"{variant}/power-named/{n}"] = str(
                int(_edge_flagged(r1, "CongestionAvoidance", "Recovery"))
            )
    return out


def run(
    repetitions: int,
    *,
    alpha: float,
    seed: int,
    progress: bool = False,
    sizes: tuple[int, ...] = SIZES,
) -> dict[str, Any]:
    bits: dict[str, list[str]] = {}
    start = time.perf_counter()
    for rep in range(repetitions):
        for key, b in repetition(rep, alpha=alpha, seed=seed, sizes=sizes).items():
            bits.setdefault(key, []).append(b)
        if progress:
            print(f"{rep + 1}/{repetitions}", file=sys.stderr, end="\r")
    return {
        "settings": {
            "repetitions": repetitions,
            "alpha": alpha,
            "seed": seed,
            "sizes": list(sizes),
        },
        "seconds": round(time.perf_counter() - start, 1),
        "outcomes": {k: "".join(v) for k, v in bits.items()},
    }


def _rate(bits: str) -> str:
    k, n = bits.count("1"), len(bits)
    lo, hi = wilson(k, n)
    return f"{100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


ROWS = (
    ("null-primary", "false positive, primary family (Holm)"),
    ("null-exploratory", "false positive, exploratory family (BH)"),
    ("null-any", "false positive, anything"),
    ("power-primary", "power: the change flagged by the default primary family (time shares)"),
    ("power", "power: CongestionAvoidance → Recovery 0.5 → 0.7 flagged (exploratory)"),
    ("null-named", "false positive, the transition named in advance as the primary test"),
    ("power-named", "power: the same change, the transition named in advance (primary)"),
)


def markdown(results: dict[str, Any]) -> str:
    """The docs table: one per level, the CLI's default first."""
    return "\n".join(_table(run) for run in results["runs"])


def _table(results: dict[str, Any]) -> str:
    s = results["settings"]
    sizes = s["sizes"]
    head = " | ".join(f"{n} vs {n}" for n in sizes)
    lines = [
        f"{s['repetitions']} repetitions per setting, α = {s['alpha']:g}; each rate with its "
        "95% Wilson interval.",
        "",
        f"| traces | setting | {head} |",
        "|---|---|" + "---|" * len(sizes),
    ]
    for variant in VARIANTS:
        for key, label in ROWS:
            cells = [_rate(results["outcomes"][f"{variant}/{key}/{n}"]) for n in sizes]
            lines.append(f"| {variant} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def check(results: dict[str, Any], count: int) -> list[str]:
    """Re-run the first ``count`` repetitions of every level; the differences from the stored
    outcomes."""
    problems = []
    for run_ in results["runs"]:
        s = run_["settings"]
        for rep in range(count):
            got = repetition(rep, alpha=s["alpha"], seed=s["seed"], sizes=tuple(s["sizes"]))
            for key, bit in got.items():
                stored = run_["outcomes"][key][rep]
                if stored != bit:
                    problems.append(
                        f"α {s['alpha']:g}, repetition {rep}, {key}: stored {stored}, now {bit}"
                    )
    return problems


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repetitions", type=int, default=200, help="simulated diffs per cell")
    ap.add_argument(
        "--alpha",
        type=str,
        default=",".join(map(str, ALPHAS)),
        help="family-wise levels, separated by commas",
    )
    ap.add_argument("--seed", type=int, default=0, help="base seed of the repetitions")
    ap.add_argument(
        "--sizes",
        type=str,
        default=",".join(map(str, SIZES)),
        help="traces per group, separated by commas",
    )
    ap.add_argument("--progress", action="store_true", help="print each cell as it finishes")
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
    sizes = tuple(int(x) for x in args.sizes.split(","))
    results = {
        "runs": [
            run(
                args.repetitions,
                alpha=float(a),
                seed=args.seed,
                progress=args.progress,
                sizes=sizes,
            )
            for a in args.alpha.split(",")
        ]
    }
    output = args.results or SCRATCH
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=1) + "\n")
    print(f"written: {output}", file=sys.stderr)
    sys.stdout.write(markdown(results))


if __name__ == "__main__":
    main()
