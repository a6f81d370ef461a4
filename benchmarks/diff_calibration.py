"""Calibration of ``quicsm diff``: family-wise false-positive rate and power, over seeded
repetitions of synthetic comparisons (:mod:`quicsm.testing.synthetic`).

"Anything significant" is what ``--fail-on-significant`` and "What changed" act on: α is split
between the primary family (Holm) and the exploratory one (Benjamini-Hochberg), so its rate on
groups without a difference is the family-wise error rate of the whole verdict, and it should
stay at most α. Settings, per number of
traces per group:

- **per family, three null designs** written here for this (a chain of the eight states that
  never ends by itself: a trace is cut after a number of transitions, whatever state it is in,
  as a recording stops): *homogeneous* (every trace follows the chain, 10 + Poisson(50)
  transitions), *heterogeneous* (every trace draws its own transition rows from a Dirichlet
  centred on the chain's, concentration 15, and its own mean dwells, log-normal σ = 0.4) and
  *long-vs-short* (A: n traces of 300 transitions, B: 3n traces of 15, the same chain) and
  *long-vs-short, mixed* (A: n traces, a third of them (at least one) of 15 transitions, the
  rest of 300; B: n of 300 and 2n of 15: the medians differ, but each length is in both
  groups, so that the tests exchange traces within length strata): the rate at which each
  family (time shares, transitions, dwell times, invariants), and their union, has anything
  significant. Each should stay at most α + 0.02;
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

    nice .venv/bin/python benchmarks/diff_calibration.py --results docs/diff_calibration.json
    .venv/bin/python benchmarks/diff_calibration.py --markdown      # the docs table
    .venv/bin/python benchmarks/diff_calibration.py --check 3       # re-run 3 repetitions

A run may be split between processes (``--first 150 --repetitions 150 --results part2.json``
beside ``--repetitions 150 --results part1.json``) and joined (``--combine part1.json
part2.json --results docs/diff_calibration.json``): the same outcomes as one run.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from _repeated_runs import (
    add_run_options,
    answered_from_results,
    laid_over,
    parts_named,
    seconds_of,
    write_results,
)

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


# -- designs written for the per-family calibration (not the project's generator) -------------

#: a chain of the eight states without an end: a trace is *cut* after a fixed number of
#: transitions (its length), whatever state it is in, as a recording stops
LENGTH_CHAIN: dict[str, dict[str, float]] = {
    "Init": {"SlowStart": 1.0},
    "SlowStart": {"CongestionAvoidance": 0.6, "Recovery": 0.3, "TailLossProbe": 0.1},
    "CongestionAvoidance": {"Recovery": 0.45, "ApplicationLimited": 0.35, "TailLossProbe": 0.2},
    "Recovery": {"CongestionAvoidance": 0.8, "RetransmissionTimeout": 0.05, "SlowStart": 0.15},
    "TailLossProbe": {"Recovery": 0.6, "CongestionAvoidance": 0.4},
    "RetransmissionTimeout": {"SlowStart": 1.0},
    "ApplicationLimited": {"CongestionAvoidance": 0.7, "SlowStart": 0.3},
}
LENGTH_DWELL_MS = {
    "Init": 15.0,
    "SlowStart": 80.0,
    "CongestionAvoidance": 250.0,
    "Recovery": 40.0,
    "TailLossProbe": 30.0,
    "RetransmissionTimeout": 150.0,
    "ApplicationLimited": 120.0,
}
#: transitions in a long and in a short trace of the long-vs-short design
LONG, SHORT = 300, 15
#: the per-trace variation of the heterogeneous design: Dirichlet concentration of every row
#: of the chain, log-normal σ of every mean dwell
HETERO_CONCENTRATION, HETERO_SIGMA = 15.0, 0.4
DESIGNS = ("homogeneous", "heterogeneous", "long-vs-short", "long-vs-short, mixed")
#: the families counted separately, and their union
CALIBRATED = ("states", "edges", "dwell", "invariants")


def chain_traces(
    lengths: list[int], rng: np.random.Generator, *, mixed: bool, tag: str
) -> pl.DataFrame:
    """One trace of :data:`LENGTH_CHAIN` per entry of ``lengths`` (its number of transitions),
    cut there; ``mixed``: each trace draws its own transition rows and mean dwells."""
    rows: list[tuple[str, float, str, float]] = []
    for i, length in enumerate(lengths):
        table = {}
        for state, row in LENGTH_CHAIN.items():
            targets = list(row)
            p = np.array([row[t] for t in targets])
            if mixed and len(targets) > 1:
                p = rng.dirichlet(HETERO_CONCENTRATION * p)
            table[state] = (targets, np.cumsum(p))
        scale = {
            s: m * (float(rng.lognormal(0.0, HETERO_SIGMA)) if mixed else 1.0)
            for s, m in LENGTH_DWELL_MS.items()
        }
        state, clock, start = "Init", 0.0, len(rows)
        draws = rng.random(length)
        for k in range(length + 1):
            rows.append((f"{tag}-{i}", clock, state, 0.0))
            clock += float(rng.exponential(scale[state]))
            if k == length:
                break
            targets, cum = table[state]
            state = targets[min(int(np.searchsorted(cum, draws[k], side="right")), len(cum) - 1)]
        rows[start:] = [(t, x, s, clock) for t, x, s, _ in rows[start:]]
    return pl.DataFrame(rows, schema=["trace", "time_ms", "state", "end_ms"], orient="row")


def design_groups(
    design: str, n: int, rng: np.random.Generator
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Group A and group B of one null comparison of ``design`` at ``n`` traces (per group;
    long-vs-short: A has ``n`` long traces, B ``3n`` short ones; mixed: A has ``n`` traces of
    which ``max(1, n // 3)`` short, the rest long, B ``n`` long and ``2n`` short), the same
    chain in both."""
    if design == "long-vs-short":
        a = chain_traces([LONG] * n, rng, mixed=False, tag="a")
        return a, chain_traces([SHORT] * (3 * n), rng, mixed=False, tag="b")
    if design == "long-vs-short, mixed":
        # lengths differ, but both groups hold traces of both lengths: the tests that exchange
        # traces do it within length strata, and those strata hold both groups
        few = max(1, n // 3)
        a = chain_traces([SHORT] * few + [LONG] * (n - few), rng, mixed=False, tag="a")
        return a, chain_traces([LONG] * n + [SHORT] * (2 * n), rng, mixed=False, tag="b")
    mixed = design == "heterogeneous"
    lengths = [int(x) for x in 10 + rng.poisson(50, size=2 * n)]
    return (
        chain_traces(lengths[:n], rng, mixed=mixed, tag="a"),
        chain_traces(lengths[n:], rng, mixed=mixed, tag="b"),
    )


def family_bits(r: DiffResult) -> dict[str, str]:
    """Per family (and ``any``): "1" when a row of it is significant."""
    out = {}
    for name in CALIBRATED:
        f = getattr(r, name)
        out[name] = str(int(f.height > 0 and bool(f["significant"].any())))
    out["any"] = str(int(r.any_significant))
    return out


def repetition(
    rep: int, *, alpha: float, permutations: int, seed: int, earlier: bool = False
) -> dict[str, str]:
    """One repetition of every setting: setting name -> outcome bits ("1" = flagged); the
    earlier settings (the project's generator, confounded mixes) with ``earlier``."""
    base = Profile()
    lossy = lossy_profile()
    shifted = base.with_transition("Recovery", "CongestionAvoidance", 0.76)
    opts = {"alpha": alpha, "permutations": permutations, "seed": rep}
    out: dict[str, str] = {}
    s = seed + 10_000 + 4 * rep
    for d, design in enumerate(DESIGNS):
        for n in SIZES:
            rng = np.random.default_rng([seed, rep, d, n])
            a, b = design_groups(design, n, rng)
            for family, bit in family_bits(diff(a, b, **opts)).items():  # type: ignore[arg-type]
                out[f"{design}/{family}/{n}"] = bit
    if not earlier:
        return out
    for n in SIZES:
        a = generate_transitions(n, seed=s)
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
    for rep in range(args.first, args.first + args.repetitions):
        for key, b in repetition(
            rep,
            alpha=args.alpha,
            permutations=args.permutations,
            seed=args.seed,
            earlier=args.earlier,
        ).items():
            bits.setdefault(key, []).append(b)
        done = rep + 1 - args.first
        if args.progress:
            print(f"{done}/{args.repetitions}", file=sys.stderr, end="\r")
        if args.checkpoint:
            _write(args, _results(args, bits, done, start))
    return _results(args, bits, args.repetitions, start)


def _write(args: argparse.Namespace, results: dict[str, Any]) -> Path:
    return write_results(args, results, scratch=SCRATCH)


def _results(
    args: argparse.Namespace, bits: dict[str, list[str]], done: int, start: float
) -> dict[str, Any]:
    """The results file's content after ``done`` repetitions (a run stopped early says how
    many it made)."""
    return {
        "settings": {
            "repetitions": done,
            "alpha": args.alpha,
            "permutations": args.permutations,
            "seed": args.seed,
            "earlier": args.earlier,
            **({"first": args.first} if args.first else {}),
        },
        "seconds": round(time.perf_counter() - start, 1),
        "outcomes": {k: "".join(v) for k, v in bits.items()},
    }


def combine(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Results files of consecutive repetitions (``--first``) made into one: a run split
    between processes is the same run as one made in a single process (every repetition is
    seeded by its number; where two parts overlap, the later part's repetitions stand)."""
    parts = sorted(parts, key=lambda r: r["settings"].get("first", 0))
    head = parts[0]
    keep = ("alpha", "permutations", "seed", "earlier")
    bits: dict[str, str] = {k: "" for k in head["outcomes"]}
    for part in parts:
        if any(part["settings"][k] != head["settings"][k] for k in keep):
            raise SystemExit("--combine: the parts were run with different settings")
        first = part["settings"].get("first", 0)
        for k in bits:
            bits[k] = "".join(laid_over(bits[k], part["outcomes"][k], first, where="--combine: "))
    return {
        "settings": {
            **{k: v for k, v in head["settings"].items() if k != "first"},
            "repetitions": len(next(iter(bits.values()))),
        },
        "seconds": seconds_of(parts),
        "outcomes": bits,
    }


def _rate(bits: str) -> str:
    k, n = bits.count("1"), len(bits)
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


ROWS = (
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


FAMILY_LABELS = {
    "states": "time shares",
    "edges": "transitions",
    "dwell": "dwell times",
    "invariants": "invariants",
    "any": "any family (their union)",
}


def markdown(results: dict[str, Any]) -> str:
    """Two tables: the false-positive rate of every family and of their union per design, then
    the earlier settings (power on the project's generator, confounded mixes)."""
    s = results["settings"]
    head = " | ".join(f"{n} vs {n} traces" for n in SIZES)
    lines = [
        f"{s['repetitions']} repetitions per setting, α = {s['alpha']:g}, "
        f"{s['permutations']} random permutations when the splits are many; "
        "each rate with its 95% Wilson interval. Long-vs-short: A has n traces of "
        f'{LONG} transitions, B 3n traces of {SHORT} ("5 vs 5" is 5 long vs 15 short); '
        f"mixed: A has n traces, a third of them (at least one) of {SHORT} transitions and the "
        f"rest of {LONG}, B n traces of {LONG} and 2n of {SHORT}.",
        "",
        f"| design | false positives of | {head} |",
        "|---|---|" + "---|" * len(SIZES),
    ]
    for design in DESIGNS:
        for family, label in FAMILY_LABELS.items():
            cells = [_rate(results["outcomes"][f"{design}/{family}/{n}"]) for n in SIZES]
            lines.append(f"| {design} | {label} | " + " | ".join(cells) + " |")
    if not s.get("earlier"):
        return "\n".join(lines) + "\n"
    lines += ["", f"| setting | {head} |", "|---|" + "---|" * len(SIZES)]
    for key, label, sizes in ROWS:
        cells = [_rate(results["outcomes"][f"{key}/{n}"]) if n in sizes else "–" for n in SIZES]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def worst(results: dict[str, Any]) -> float:
    """The largest false-positive rate of any family or union, design and size."""
    return max(
        results["outcomes"][f"{d}/{f}/{n}"].count("1") / len(results["outcomes"][f"{d}/{f}/{n}"])
        for d in DESIGNS
        for f in FAMILY_LABELS
        for n in SIZES
    )


def check(results: dict[str, Any], count: int) -> list[str]:
    """Re-run the first ``count`` repetitions; the differences from the stored outcomes."""
    s = results["settings"]
    problems = []
    for rep in range(count):
        got = repetition(
            rep,
            alpha=s["alpha"],
            permutations=s["permutations"],
            seed=s["seed"],
            earlier=bool(s.get("earlier")),
        )
        for key, bit in got.items():
            stored = results["outcomes"][key][rep]
            if stored != bit:
                problems.append(f"repetition {rep}, {key}: stored {stored}, now {bit}")
    return problems


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_options(ap, unit="setting", root=ROOT, scratch=SCRATCH, published=RESULTS)
    ap.add_argument("--alpha", type=float, default=0.05, help="family-wise level")
    ap.add_argument(
        "--permutations", type=int, default=999, help="permutations per permutation test"
    )
    ap.add_argument(
        "--earlier",
        action="store_true",
        help="also the earlier settings (the project's generator: a shifted transition, "
        "confounded mixes within and across strata)",
    )
    args = ap.parse_args()
    if answered_from_results(args, published=RESULTS, markdown=markdown, check=check):
        return
    results = combine(parts_named(args)) if args.combine else run(args)
    print(f"written: {_write(args, results)}", file=sys.stderr)
    sys.stdout.write(markdown(results))


if __name__ == "__main__":
    main()
