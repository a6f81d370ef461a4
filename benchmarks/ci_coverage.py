"""Coverage of the 95 % transition-probability intervals on synthetic data with a known truth.

Two scenarios, each repeated ``--reps`` times with fresh seeds, 20 traces per replicate:

- **homogeneous** — every trace follows the default synthetic profile; SlowStart has no hidden
  phase, so P(SlowStart → Recovery) = 0.31 exactly and transitions are independent given the
  state (a first-order Markov chain);
- **heterogeneous** — half the traces come from a network where SlowStart → Recovery has
  probability 0.1, half from one where it is 0.6, and RTOs often send a trace back to
  SlowStart, so one trace contributes several correlated transitions. The truth is the pooled
  probability, estimated from 2 x 20,000 traces.

For each, the share of replicates whose interval contains the truth, for quicsm's
cluster-robust Wilson interval and for a plain Wilson interval over all transitions::

    .venv/bin/python benchmarks/ci_coverage.py            # 400 replicates, about a minute
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import polars as pl

from quicsm.stats.descriptive import transition_probabilities, wilson_interval
from quicsm.testing.synthetic import Profile, generate_transitions


def _edge(df: pl.DataFrame, source: str, target: str) -> tuple[float, float, float, float]:
    tp = transition_probabilities(df).filter(pl.col("source") == source)
    n = float(tp["count"].sum())
    row = tp.filter(pl.col("target") == target)
    if row.height == 0:
        lo, hi = wilson_interval(pl.lit(0.0), pl.lit(n))
        return 0.0, *pl.select(lo.alias("lo"), hi.alias("hi")).row(0), n  # type: ignore[return-value]
    p, lo, hi = row.select("probability", "ci_low", "ci_high").row(0)
    return p, lo, hi, n


def coverage(
    make: Callable[[int], pl.DataFrame], truth: float, *, reps: int, source: str, target: str
) -> tuple[float, float]:
    robust = plain = 0
    for rep in range(reps):
        p, lo, hi, n = _edge(make(rep), source, target)
        robust += lo <= truth <= hi
        plo, phi = wilson_interval(pl.lit(p), pl.lit(n))
        a, b = pl.select(plo.alias("a"), phi.alias("b")).row(0)
        plain += a <= truth <= b
    return robust / reps, plain / reps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=400, help="replicates per scenario")
    parser.add_argument("--traces", type=int, default=20, help="traces per replicate")
    args = parser.parse_args(argv)
    n = args.traces

    def homogeneous(rep: int) -> pl.DataFrame:
        return generate_transitions(n, seed=10_000 + rep)

    base = (
        Profile()
        .with_transition("Recovery", "RetransmissionTimeout", 0.35)
        .with_transition("CongestionAvoidance", "Recovery", 0.7)
    )
    low = base.with_transition("SlowStart", "Recovery", 0.1)
    high = base.with_transition("SlowStart", "Recovery", 0.6)

    def mixture(m: int, seed: int) -> pl.DataFrame:
        return pl.concat(
            [
                generate_transitions(m, seed=seed, profile=low),
                generate_transitions(m, seed=seed + 1_000_000, profile=high),
            ]
        )

    pooled = _edge(mixture(20_000, 7), "SlowStart", "Recovery")[0]
    rows = [
        ("homogeneous", 0.31, coverage(homogeneous, 0.31, reps=args.reps,
                                       source="SlowStart", target="Recovery")),
        ("heterogeneous", pooled, coverage(lambda r: mixture(n // 2, 20_000 + r), pooled,
                                           reps=args.reps, source="SlowStart",
                                           target="Recovery")),
    ]  # fmt: skip
    print(f"{args.reps} replicates of {n} traces; P(SlowStart -> Recovery)")
    print(f"{'scenario':15} {'truth':>7} {'cluster-robust':>15} {'plain Wilson':>13}")
    for name, truth, (robust, plain) in rows:
        print(f"{name:15} {truth:7.4f} {robust:15.3f} {plain:13.3f}")


if __name__ == "__main__":
    main()
