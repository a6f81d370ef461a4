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
too, and, on the same null data, by a permutation test of the transition written here from the
rows (not quicsm's): where the two agree, the rate is the data's, not a defect of the test.
Every setting runs at the CLI's default α = 0.05 (and at α = 0.01 when asked, ``--alpha
0.05,0.01``).

**Long traces against short ones.** A third design puts the same change beside a change in
length: A has ``n`` long traces (about 30 CongestionAvoidance visits each, as above), B has
``3n`` short ones (1 + Poisson(4) visits, about 5, each), B's CongestionAvoidance -> Recovery
0.5 -> 0.7 as in the change above, homogeneous traces; at 5 v 5 and 10 v 10 (``n``: the long
traces; "5 vs 5" is 5 long against 15 short). Its power rows are the exploratory and the named
ones above. (Its false-positive rates, with no change, are diff_calibration.py's.)

**Predicted power.** Beside each power row, the power the comparison itself predicts for the
change (0.2), from what its row reports (:func:`quicsm.stats.overdispersion.power_at`): the
difference's standard error (``se``) and the degrees of freedom of the test's reference
(``df``): for a permutation over ``N`` traces, the fitted model's standard error (each group's
probability, the intra-trace correlation's unbiased pooled estimate, shrunk per transition)
on Student's t with ``N - 2`` degrees of freedom; for the beta-binomial z when it is not
permuted (long-vs-short), the null standard error it is divided by, on its Satterthwaite t; at the
level a single discovery of its family faces (its share of α over the tests of its family, as
the ``mde`` column), averaged over the repetitions, and how far the observed power is from it.

Every repetition's outcome is stored in the results file (a run writes
``build/benchmarks/diff_power.json`` unless ``--results`` names one; the published one is
``docs/diff_power.json``) so that a part of the run can be checked to reproduce exactly
(``--check``); ``--markdown`` prints the docs table. A run can be split between processes
(``--first``, each part its own results file; ``--designs`` for some designs only) and the
parts joined (``--combine``, laid over each other in the order given: where two hold the same
repetitions of a setting, the later one's stand): every repetition is seeded by its number,
so the joined file is the one a single process makes::

    nice .venv/bin/python benchmarks/diff_power.py --repetitions 300 --alpha 0.05 \\
        --results docs/diff_power.json
    .venv/bin/python benchmarks/diff_power.py --markdown
    .venv/bin/python benchmarks/diff_power.py --check 2
"""

from __future__ import annotations

import argparse
import math
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
from quicsm.compare.families.policy import levels
from quicsm.stats import overdispersion as od
from quicsm.stats.intervals import wilson

ROOT = Path(__file__).resolve().parent.parent
#: the published results, which the docs quote (written only when named with --results)
RESULTS = ROOT / "docs" / "diff_power.json"
#: where a run writes by default: a trial never overwrites the published numbers
SCRATCH = ROOT / "build" / "benchmarks" / "diff_power.json"
SIZES = (3, 5, 10, 30)
VARIANTS = ("homogeneous", "heterogeneous")
#: the design whose groups differ in length as well as in the transition, and its sizes
LONG_SHORT = "long-vs-short"
LONG_SHORT_SIZES = (5, 10)
DESIGNS = (*VARIANTS, LONG_SHORT)
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
#: CongestionAvoidance visits of a short trace (long-vs-short design), on average
SHORT_VISITS = 5
#: the pre-named primary family of the "named in advance" settings: the one transition
NAMED = ("edges:CongestionAvoidance->Recovery",)
#: the levels the table is made at by default: the CLI's default
ALPHAS = (0.05,)


def traces(
    n: int,
    rng: np.random.Generator,
    chain: dict[str, dict[str, float]],
    *,
    mixed: bool,
    tag: str,
    visits: int = VISITS,
) -> pl.DataFrame:
    """``n`` traces of the chain as a transitions frame (``trace, time_ms, state``), each
    ending after 1 + Poisson(``visits`` - 1) CongestionAvoidance visits."""
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
        budget = 1 + int(rng.poisson(visits - 1))  # the transfer's size, in CA visits
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


#: the change of the named transition, CongestionAvoidance -> Recovery 0.5 -> 0.7
EFFECT = 0.2
#: random splits of the reference permutation test
REFERENCE_SPLITS = 999


def predicted_power(r: DiffResult, source: str, target: str, effect: float = EFFECT) -> float:
    """The power the comparison itself predicts for a change of ``effect`` in the transition,
    from its row alone: the difference's standard error under the fitted model (``se``) and
    the degrees of freedom of the test's reference (``df``), at the level a single discovery
    of its family faces (``level``: the family's share of α over its tests, as the ``mde``
    column); 0 when its traces cannot reach significance."""
    e = r.edges.filter((pl.col("source") == source) & (pl.col("target") == target))
    if e.height == 0 or e["p_unadjusted"][0] is None:
        return 0.0
    row = e.row(0, named=True)
    if "cannot reach" in (row["note"] or "") or not row["se"] or row["se"] != row["se"]:
        return 0.0
    df = math.inf if row["df"] is None else float(row["df"])
    return od.power_at(effect, float(row["se"]), alpha=float(row["level"]), df=df)


def exits(df: pl.DataFrame, source: str, target: str) -> np.ndarray:
    """Per trace (sorted by id): the transitions ``source -> target`` and the exits of
    ``source`` (a trace's end is not an exit), counted here from the rows."""
    nxt = df.sort("trace", "time_ms").with_columns(
        pl.col("state").shift(-1).over("trace").alias("next")
    )
    out = (
        nxt.filter(pl.col("next").is_not_null())
        .group_by("trace")
        .agg(
            ((pl.col("state") == source) & (pl.col("next") == target)).sum().alias("y"),
            (pl.col("state") == source).sum().alias("m"),
        )
        .sort("trace")
    )
    return out.select("y", "m").to_numpy().astype(float)


def reference_rejects(a: pl.DataFrame, b: pl.DataFrame, level: float, seed: int) -> bool:
    """A permutation test written here, independently of quicsm's: the pooled two-proportion
    |z| of CongestionAvoidance -> Recovery per exit, referred to random splits of the traces
    (exact under the null for traces that are exchangeable, as in the homogeneous null)."""
    ua, ub = (
        exits(a, "CongestionAvoidance", "Recovery"),
        exits(b, "CongestionAvoidance", "Recovery"),
    )
    ua, ub = ua[ua[:, 1] > 0], ub[ub[:, 1] > 0]
    y, m = np.r_[ua[:, 0], ub[:, 0]], np.r_[ua[:, 1], ub[:, 1]]
    n = len(y)
    rng = np.random.default_rng(seed)
    masks = np.array([rng.permutation(n) < len(ua) for _ in range(REFERENCE_SPLITS)])
    masks = np.vstack([np.arange(n) < len(ua), masks]).astype(float)
    y1, m1 = masks @ y, masks @ m
    y2, m2 = y.sum() - y1, m.sum() - m1
    p0 = y.sum() / m.sum()
    ok = (m1 > 0) & (m2 > 0)
    z = np.where(
        ok,
        np.abs(y2 / np.where(ok, m2, 1) - y1 / np.where(ok, m1, 1))
        / np.sqrt(max(p0 * (1 - p0), 1e-12) * (1 / np.where(ok, m1, 1) + 1 / np.where(ok, m2, 1))),
        0.0,
    )
    p = float(np.count_nonzero(z >= z[0] - 1e-9)) / len(z)
    return p < level


def _exploratory(r: DiffResult) -> bool:
    return any(
        f.height and bool(f.filter(pl.col("family") == "exploratory")["significant"].any())
        for f in r.frames()
    )


def repetition(
    rep: int,
    *,
    alpha: float,
    seed: int,
    sizes: tuple[int, ...] = SIZES,
    predicted: dict[str, float] | None = None,
    designs: tuple[str, ...] = DESIGNS,
) -> dict[str, str]:
    """One repetition of every setting of ``designs``: setting name -> outcome bits;
    ``predicted`` (when given) receives the power each change's comparison predicts for the
    transition."""
    out: dict[str, str] = {}
    guess: dict[str, float] = {} if predicted is None else predicted
    for v, variant in enumerate(VARIANTS):
        if variant not in designs:
            continue
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
            guess[f"{variant}/power/{n}"] = predicted_power(r1, "CongestionAvoidance", "Recovery")
            r0 = diff(a, b0, alpha=alpha, seed=rep, primary=NAMED, invariants=False)
            out[f"{variant}/null-named/{n}"] = str(int(r0.primary_significant))
            level = levels(alpha)["primary"]
            out[f"{variant}/null-reference/{n}"] = str(int(reference_rejects(a, b0, level, rep)))
            r1 = diff(a, b1, alpha=alpha, seed=rep, primary=NAMED, invariants=False)
            out[f"{variant}/power-named/{n}"] = str(
                int(_edge_flagged(r1, "CongestionAvoidance", "Recovery"))
            )
            guess[f"{variant}/power-named/{n}"] = predicted_power(
                r1, "CongestionAvoidance", "Recovery"
            )
    for n in (n for n in sizes if n in LONG_SHORT_SIZES and LONG_SHORT in designs):
        rng = np.random.default_rng([seed, rep, len(VARIANTS), n])
        a = traces(n, rng, CHAIN, mixed=False, tag="a")
        b1 = traces(3 * n, rng, CHANGED, mixed=False, tag="c", visits=SHORT_VISITS)
        for key, named in (("power", False), ("power-named", True)):
            if named:
                r1 = diff(a, b1, alpha=alpha, seed=rep, primary=NAMED, invariants=False)
            else:
                r1 = diff(a, b1, alpha=alpha, seed=rep)
            name = f"{LONG_SHORT}/{key}/{n}"
            out[name] = str(int(_edge_flagged(r1, "CongestionAvoidance", "Recovery")))
            guess[name] = predicted_power(r1, "CongestionAvoidance", "Recovery")
    return out


def run(
    repetitions: int,
    *,
    alpha: float,
    seed: int,
    progress: bool = False,
    sizes: tuple[int, ...] = SIZES,
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
    first: int = 0,
    designs: tuple[str, ...] = DESIGNS,
) -> dict[str, Any]:
    """Repetitions ``first`` to ``first + repetitions - 1`` at one level; ``checkpoint``
    receives the results so far after each."""
    bits: dict[str, list[str]] = {}
    predicted: dict[str, list[float]] = {}
    start = time.perf_counter()
    for i, rep in enumerate(range(first, first + repetitions)):
        guess: dict[str, float] = {}
        for key, b in repetition(
            rep, alpha=alpha, seed=seed, sizes=sizes, predicted=guess, designs=designs
        ).items():
            bits.setdefault(key, []).append(b)
        for key, x in guess.items():
            predicted.setdefault(key, []).append(round(x, 4))
        if checkpoint is not None:
            checkpoint(_results(bits, predicted, i + 1, alpha, seed, sizes, start, first, designs))
        if progress:
            print(f"{i + 1}/{repetitions}", file=sys.stderr, end="\r")
    return _results(bits, predicted, repetitions, alpha, seed, sizes, start, first, designs)


def _results(
    bits: dict[str, list[str]],
    predicted: dict[str, list[float]],
    done: int,
    alpha: float,
    seed: int,
    sizes: tuple[int, ...],
    start: float,
    first: int = 0,
    designs: tuple[str, ...] = DESIGNS,
) -> dict[str, Any]:
    return {
        "settings": {
            **({"first": first} if first else {}),
            **({"designs": list(designs)} if designs != DESIGNS else {}),
            "repetitions": done,
            "alpha": alpha,
            "seed": seed,
            "sizes": list(sizes),
        },
        "seconds": round(time.perf_counter() - start, 1),
        "outcomes": {k: "".join(v) for k, v in bits.items()},
        "predicted": predicted,
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
    (
        "null-reference",
        "the same null data, a permutation test written here (not quicsm's) at the primary "
        "family's level",
    ),
    ("power-named", "power: the same change, the transition named in advance (primary)"),
)
#: the power rows whose prediction (from the comparison's own test) is shown beside them
PREDICTED = {"power", "power-named"}


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
    for variant in (*VARIANTS, LONG_SHORT):
        for key, label in ROWS:
            if variant == LONG_SHORT and key not in PREDICTED:
                continue  # no null here: diff_calibration.py measures it
            keys = [f"{variant}/{key}/{n}" for n in sizes]
            if not any(k in results["outcomes"] for k in keys):
                continue
            got = results["outcomes"]
            cells = [_rate(got[k]) if k in got else "–" for k in keys]
            lines.append(f"| {variant} | {label} | " + " | ".join(cells) + " |")
            if key in PREDICTED and "predicted" in results:
                cells = [_predicted(results, k) if k in got else "–" for k in keys]
                lines.append(
                    f"| {variant} | predicted by the comparison itself (mean; observed − "
                    "predicted) | " + " | ".join(cells) + " |"
                )
    if any(k.startswith(f"{LONG_SHORT}/") for k in results["outcomes"]):
        lines += [
            "",
            f"{LONG_SHORT}: A has n long traces (about {VISITS} CongestionAvoidance visits "
            f"each), B 3n short ones (about {SHORT_VISITS}), B's transition changed; "
            '"5 vs 5" is 5 long against 15 short.',
        ]
    return "\n".join(lines) + "\n"


def _predicted(results: dict[str, Any], key: str) -> str:
    """The mean predicted power of a setting and how far the observed one is from it."""
    guess = results["predicted"][key]
    bits = results["outcomes"][key]
    mean = float(np.mean(guess))
    gap = bits.count("1") / len(bits) - mean
    return f"{100 * mean:.1f}% ({100 * gap:+.1f} points)"


def combine(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Results files made into one, level by level, in the order given: each part's
    repetitions (from its ``--first``) are laid over what the parts before it made, setting by
    setting, so that a run split between processes (``--first``) or between designs
    (``--designs``) is the run one process makes of everything (every repetition is seeded by
    its number). Where two parts hold the same repetitions of a setting, the later one's
    stand. Every setting must end with the same repetitions, none missing."""
    levels_: dict[float, list[dict[str, Any]]] = {}
    for part in parts:
        for r in part["runs"]:
            levels_.setdefault(r["settings"]["alpha"], []).append(r)
    runs = []
    for alpha, pieces in levels_.items():
        bits: dict[str, str] = {}
        guess: dict[str, list[float]] = {}
        for r in pieces:
            first = r["settings"].get("first", 0)
            for k, new in r["outcomes"].items():
                where = f"α {alpha:g}, {k}: "
                bits[k] = "".join(laid_over(bits.get(k, ""), new, first, where=where))
            for k, values in r["predicted"].items():
                guess[k] = laid_over(guess.get(k, []), values, first, where=f"α {alpha:g}, {k}: ")
        counts = {len(b) for b in bits.values()}
        if len(counts) != 1:
            raise SystemExit(
                f"α {alpha:g}: the settings hold different repetitions {sorted(counts)}"
            )
        head = pieces[0]["settings"]
        runs.append(
            {
                "settings": {
                    **{k: v for k, v in head.items() if k not in ("first", "designs")},
                    "repetitions": counts.pop(),
                },
                "seconds": seconds_of(pieces),
                "outcomes": bits,
                "predicted": guess,
            }
        )
    return {"runs": runs}


def check(results: dict[str, Any], count: int) -> list[str]:
    """Re-run the first ``count`` repetitions of every level; the differences from the stored
    outcomes."""
    problems = []
    for run_ in results["runs"]:
        s = run_["settings"]
        for rep in range(count):
            got = repetition(
                rep,
                alpha=s["alpha"],
                seed=s["seed"],
                sizes=tuple(s["sizes"]),
                designs=tuple(s.get("designs", DESIGNS)),
            )
            for key, bit in got.items():
                stored = run_["outcomes"][key][rep]
                if stored != bit:
                    problems.append(
                        f"α {s['alpha']:g}, repetition {rep}, {key}: stored {stored}, now {bit}"
                    )
    return problems


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_options(ap, unit="cell", root=ROOT, scratch=SCRATCH, published=RESULTS)
    ap.add_argument(
        "--alpha",
        type=str,
        default=",".join(map(str, ALPHAS)),
        help="family-wise levels, separated by commas",
    )
    ap.add_argument(
        "--sizes",
        type=str,
        default=",".join(map(str, SIZES)),
        help="traces per group, separated by commas",
    )
    ap.add_argument(
        "--designs",
        type=str,
        default=",".join(DESIGNS),
        help="the designs to run, separated by commas (to split a run between processes by "
        "design; --combine joins the parts)",
    )
    args = ap.parse_args()
    if answered_from_results(args, published=RESULTS, markdown=markdown, check=check):
        return
    sizes = tuple(int(x) for x in args.sizes.split(","))
    designs = tuple(d.strip() for d in args.designs.split(",") if d.strip())
    if unknown := [d for d in designs if d not in DESIGNS]:
        ap.error(f"unknown design {', '.join(unknown)}; the designs are {', '.join(DESIGNS)}")
    if args.combine:
        results = combine(parts_named(args))
        print(f"written: {write_results(args, results, scratch=SCRATCH)}", file=sys.stderr)
        sys.stdout.write(markdown(results))
        return
    runs: list[dict[str, Any]] = []

    def write(latest: dict[str, Any]) -> None:
        write_results(args, {"runs": [*runs, latest]}, scratch=SCRATCH)

    for a in args.alpha.split(","):
        runs.append(
            run(
                args.repetitions,
                alpha=float(a),
                seed=args.seed,
                progress=args.progress,
                sizes=sizes,
                checkpoint=write if args.checkpoint else None,
                first=args.first,
                designs=designs,
            )
        )
    results = {"runs": runs}
    print(f"written: {write_results(args, results, scratch=SCRATCH)}", file=sys.stderr)
    sys.stdout.write(markdown(results))


if __name__ == "__main__":
    main()
