"""The sequential A/B procedure of ``quicsm lab ab`` (:mod:`quicsm.stats.sequential`) by
simulation: its family-wise false-positive rate under the null, and the pairs it needs to a
decision against the fixed-n design with the same power.

The runs come from a generator written here (not the project's): the verdict benchmark's chain
(``benchmarks/diff_power.py``; the verdict issue's effect), simulated for thousands of runs at
once with numpy::

    Init (10 ms) -> SlowStart (100 ms)
    SlowStart -> CongestionAvoidance 0.8, Recovery 0.2
    CongestionAvoidance (300 ms) -> Recovery 0.5, ApplicationLimited 0.5
    Recovery (50 ms) -> CongestionAvoidance 0.9, RetransmissionTimeout 0.1
    RetransmissionTimeout (200 ms) -> SlowStart
    ApplicationLimited (100 ms) -> CongestionAvoidance

A run ends after its ``k``-th visit to CongestionAvoidance, ``k`` = 1 + Poisson(29). The
**change** is B's CongestionAvoidance -> Recovery 0.5 -> 0.7 (ApplicationLimited 0.5 -> 0.3);
**half change** 0.5 -> 0.6. **Heterogeneous** runs draw their own two-way split per state
(Beta with concentration 20 around the chain's) and their own dwell scale per state (log-normal,
σ = 0.3). **Drift**: the machine slows down over the experiment (every dwell × (1 + 0.5 i / n)
in pair i) and whichever run of a pair goes first is 20% slower (a warm-up effect); the order
within a pair is random, as ``quicsm lab ab`` draws it.

A scenario's quantities are those ``quicsm lab ab`` tests: the time share of each of the eight
paper states (margin ±0.05) and the log completion-time ratio (margin ±10%). An experiment has
``--scenarios`` scenarios (Bonferroni over all their quantities: K = 9 per scenario), all under
the same setting; it stops each scenario at its decision or at ``--max-pairs``.

Per setting: the family-wise rate of a false claim (under the null: a change claimed in any
scenario; in the change settings: an equivalence claimed in any scenario — which would miss the
change, although the change moves each single quantity by less than its margin: the largest
shift is ApplicationLimited's share, −4.8 points), the power (the changed scenario decided as
a change) and the pairs to a decision (mean, median, 90th percentile).

Savings are compared at stated powers, 90% and 95% (:data:`POWERS`): the fixed-n design is a
paired t-test per quantity at α / K (Bonferroni), its n the smallest whose simulated power
reaches the stated one; the sequential procedure is run to the smallest budget at which its
simulated power reaches it (each experiment stopping at its decision or at that budget: valid,
as the tests hold at any stopping time), and its mean pairs are set against the fixed n.
(Comparing against a fixed design sized for the sequential procedure's own power, near 100%
at a budget of 100 pairs, measures the budget, not the procedure.) Equivalence is compared the
same way on A-against-A experiments (``--equivalence-repetitions`` of them, a budget of
``--equivalence-pairs``, the null settings without drift), the fixed design being two one-sided
t-tests per quantity at α / K (TOST), equivalence claimed when every quantity passes.

A run writes ``build/benchmarks/ab_sequential.json``; the published results are written only
when named (``--output docs/ab_sequential.json``), and ``--markdown`` prints the docs table
from them::

    nice -n 10 .venv/bin/python benchmarks/ab_sequential.py --repetitions 2000 \\
        --output docs/ab_sequential.json
    .venv/bin/python benchmarks/ab_sequential.py --markdown
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps

from quicsm.stats.intervals import wilson
from quicsm.stats.sequential import stopping_pairs

ROOT = Path(__file__).resolve().parent.parent
#: the published results, which docs/lab.md quotes (written only when named with --output)
RESULTS = ROOT / "docs" / "ab_sequential.json"
#: where a run writes by default: a trial never overwrites the published numbers
SCRATCH = ROOT / "build" / "benchmarks" / "ab_sequential.json"

# the generator's states; the last two never occur in this chain (their shares are 0, as in
# runs without a window cap or a tail-loss probe) but are among the tested quantities
STATES = (
    "Init",
    "SlowStart",
    "CongestionAvoidance",
    "Recovery",
    "RetransmissionTimeout",
    "ApplicationLimited",
    "CongestionAvoidanceMaxed",
    "TailLossProbe",
)
INIT, SS, CA, REC, RTO, AL = range(6)
DWELL_MS = np.array([10.0, 100.0, 300.0, 50.0, 200.0, 100.0])
VISITS = 30
CONCENTRATION = 20.0
DWELL_SIGMA = 0.3
SHARE_MARGIN = 0.05
TIME_MARGIN = float(np.log(1.10))
MARGINS = [SHARE_MARGIN] * len(STATES) + [TIME_MARGIN]
SETTINGS = (
    # name, heterogeneous, CA -> Recovery probability of B, drift
    ("homogeneous, null", False, 0.5, False),
    ("homogeneous, null, drift", False, 0.5, True),
    ("homogeneous, change 0.5 → 0.7", False, 0.7, False),
    ("homogeneous, half change 0.5 → 0.6", False, 0.6, False),
    ("heterogeneous, null", True, 0.5, False),
    ("heterogeneous, null, drift", True, 0.5, True),
    ("heterogeneous, change 0.5 → 0.7", True, 0.7, False),
    ("heterogeneous, half change 0.5 → 0.6", True, 0.6, False),
)


def runs(
    rng: np.random.Generator, shape: tuple[int, ...], *, p_rec: float, mixed: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Simulate ``prod(shape)`` runs of the chain at once: (time shares of :data:`STATES`,
    shape + (8,)) and the completion time (ms, shape)."""
    r = int(np.prod(shape))
    # per-run two-way splits: SlowStart -> CA, CA -> Recovery, Recovery -> CA
    base = np.array([0.8, p_rec, 0.9])
    if mixed:
        split = rng.beta(CONCENTRATION * base, CONCENTRATION * (1 - base), size=(r, 3))
        scale = DWELL_MS * rng.lognormal(0.0, DWELL_SIGMA, size=(r, 6))
    else:
        split = np.broadcast_to(base, (r, 3))
        scale = np.broadcast_to(DWELL_MS, (r, 6))
    state = np.full(r, INIT)
    budget = 1 + rng.poisson(VISITS - 1, size=r)
    spent = np.zeros((r, 6))
    alive = np.ones(r, dtype=bool)
    rows = np.arange(r)
    while alive.any():
        idx = rows[alive]
        s = state[idx]
        spent[idx, s] += rng.exponential(1.0, size=idx.size) * scale[idx, s]
        budget[idx] -= s == CA
        alive[idx[budget[idx] <= 0]] = False
        u = rng.random(idx.size)
        nxt = np.empty_like(s)
        nxt[s == INIT] = SS
        nxt[s == RTO] = SS
        nxt[s == AL] = CA
        m = s == SS
        nxt[m] = np.where(u[m] < split[idx[m], 0], CA, REC)
        m = s == CA
        nxt[m] = np.where(u[m] < split[idx[m], 1], REC, AL)
        m = s == REC
        nxt[m] = np.where(u[m] < split[idx[m], 2], CA, RTO)
        state[idx] = nxt
    total = spent.sum(axis=1)
    shares = np.zeros((r, len(STATES)))
    shares[:, :6] = spent / total[:, None]
    return shares.reshape(*shape, len(STATES)), total.reshape(shape)


def differences(
    rng: np.random.Generator,
    reps: int,
    pairs: int,
    *,
    mixed: bool,
    p_rec_b: float,
    drift: bool,
) -> np.ndarray:
    """(reps, 9, pairs) differences B − A: eight time shares and the log completion ratio."""
    sa, ta = runs(rng, (reps, pairs), p_rec=0.5, mixed=mixed)
    sb, tb = runs(rng, (reps, pairs), p_rec=p_rec_b, mixed=mixed)
    if drift:
        # slower over time (both runs of a pair alike) and 20% slower for the first of a pair:
        # the order is random within the pair, so the warm-up falls on A or B by a coin flip
        trend = 1.0 + 0.5 * np.arange(pairs) / pairs
        a_first = rng.random((reps, pairs)) < 0.5
        ta = ta * trend * np.where(a_first, 1.2, 1.0)
        tb = tb * trend * np.where(a_first, 1.0, 1.2)
    d = np.concatenate([sb - sa, np.log(tb / ta)[..., None]], axis=-1)
    return np.moveaxis(d, -1, 1)


def fixed_power(d: np.ndarray, n: int, *, alpha: float, hypotheses: int) -> float:
    """Power of the fixed-n design on the first ``n`` pairs: a paired t-test per quantity at
    α / K, any quantity significant."""
    x = d[:, :, :n]
    mean = x.mean(axis=-1)
    sd = x.std(axis=-1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(sd > 0, mean / (sd / np.sqrt(n)), 0.0)
    crit = sps.t.ppf(1 - alpha / hypotheses / 2, n - 1)
    return float((np.abs(t) > crit).any(axis=1).mean())


def fixed_n_for(d: np.ndarray, target: float, *, alpha: float, hypotheses: int) -> int | None:
    """The smallest n whose fixed design reaches ``target`` power (None: not within the
    pairs simulated)."""
    lo, hi = 2, d.shape[-1]
    if fixed_power(d, hi, alpha=alpha, hypotheses=hypotheses) < target:
        return None
    while lo < hi:  # power is non-decreasing in n up to simulation noise
        mid = (lo + hi) // 2
        if fixed_power(d, mid, alpha=alpha, hypotheses=hypotheses) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


#: the powers at which the sequential procedure and the fixed designs are compared
POWERS = (0.90, 0.95)


def fixed_equivalence_power(d: np.ndarray, n: int, *, alpha: float, hypotheses: int) -> float:
    """Power of the fixed-n equivalence design on the first ``n`` pairs: two one-sided paired
    t-tests (TOST) per quantity at α / K, equivalence claimed when every quantity passes (a
    quantity that never varies passes when its mean is inside the margin)."""
    x = d[:, :, :n]
    mean = x.mean(axis=-1)
    se = x.std(axis=-1, ddof=1) / np.sqrt(n)
    margin = np.array(MARGINS)[None, :]
    crit = sps.t.ppf(1 - alpha / hypotheses, n - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(se > 0, (mean + margin) / se, np.where(mean > -margin, np.inf, -np.inf))
        upper = np.where(se > 0, (margin - mean) / se, np.where(mean < margin, np.inf, -np.inf))
    passed = (lower > crit) & (upper > crit)
    return float(passed.all(axis=1).mean())


def smallest_n(power: Any, target: float, *, lo: int, hi: int) -> int | None:
    """The smallest n in [lo, hi] whose ``power(n)`` reaches ``target`` (None: not within hi);
    power is non-decreasing in n up to simulation noise."""
    if power(hi) < target:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if power(mid) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def matched(
    n: np.ndarray, v: np.ndarray, verdict: int, target: float
) -> tuple[int, float, float] | None:
    """The sequential procedure run to the smallest budget B at which it reaches ``target``
    power for ``verdict`` (1 change, 2 equivalent): (B, its power there, the mean pairs it
    uses, each experiment stopping at its decision or at B). None: not within the budget
    simulated. Stopping earlier than planned is valid for these tests at any time, so the
    truncated procedure keeps its error rate."""
    for budget in range(1, int(n.max()) + 1):
        power = float(((v == verdict) & (n <= budget)).mean())
        if power >= target:
            return budget, power, float(np.minimum(n, budget).mean())
    return None


def comparison(
    seq: tuple[int, float, float] | None, fixed_n: int | None, fixed_p: float | None
) -> dict[str, Any]:
    """One matched-power cell: the sequential design's budget, power and mean pairs, the
    fixed design's n and power, and the saving (1 - sequential mean / fixed n)."""
    out: dict[str, Any] = {"fixed_n": fixed_n, "fixed_power": fixed_p}
    if seq is not None:
        out |= {"budget": seq[0], "power": round(seq[1], 4), "pairs_mean": round(seq[2], 2)}
    if seq is not None and fixed_n:
        out["saving"] = round(1 - seq[2] / fixed_n, 4)
    return out


def setting(
    name: str,
    mixed: bool,
    p_rec_b: float,
    drift: bool,
    *,
    reps: int,
    scenarios: int,
    max_pairs: int,
    alpha: float,
    seed: int,
    fixed_pairs: int,
) -> dict[str, Any]:
    rng = np.random.default_rng([seed, SETTINGS.index((name, mixed, p_rec_b, drift))])
    k = 9 * scenarios
    # every scenario of an experiment under the same setting: a false claim in any is a
    # family-wise error; the decision counts of the first scenario give power and pairs
    claims = np.zeros(reps, dtype=bool)
    first_n = first_v = np.zeros(0)
    for s in range(scenarios):
        d = differences(rng, reps, max_pairs, mixed=mixed, p_rec_b=p_rec_b, drift=drift)
        n, v = stopping_pairs(d, MARGINS, alpha=alpha, hypotheses=k)
        if s == 0:
            first_n, first_v = n, v
        claims |= (v == 1) if p_rec_b == 0.5 else (v == 2)
    out: dict[str, Any] = {
        "setting": name,
        "null": p_rec_b == 0.5,
        "false_claims": int(claims.sum()),
        "change": int((first_v == 1).sum()),
        "equivalent": int((first_v == 2).sum()),
        "budget": int((first_v == 0).sum()),
        "pairs_mean": round(float(first_n.mean()), 2),
        "pairs_median": float(np.median(first_n)),
        "pairs_p90": float(np.percentile(first_n, 90)),
    }
    if p_rec_b != 0.5:
        dfix = differences(rng, reps, fixed_pairs, mixed=mixed, p_rec_b=p_rec_b, drift=drift)
        out["matched"] = {}
        for target in POWERS:
            nf = fixed_n_for(dfix, target, alpha=alpha, hypotheses=k)
            pf = round(fixed_power(dfix, nf, alpha=alpha, hypotheses=k), 4) if nf else None
            seq = matched(first_n, first_v, 1, target)
            out["matched"][f"{target:.2f}"] = comparison(seq, nf, pf)
        # what an oracle sequential probability ratio test, knowing the largest standardised
        # effect δ (over quantities) and its variance, would need: about 2 ln(K/α) / δ²
        sd = dfix.std(axis=(0, 2))
        delta = np.abs(dfix.mean(axis=(0, 2))) / np.where(sd > 0, sd, np.inf)
        out["largest_effect"] = round(float(delta.max()), 3)
        out["oracle_pairs"] = round(2 * np.log(k / alpha) / float(delta.max()) ** 2, 1)
    return out


#: the null settings where equivalence is measured (A against A; drift left out)
EQUIVALENCE_SETTINGS = ("homogeneous, null", "heterogeneous, null")


def equivalence(
    name: str,
    mixed: bool,
    *,
    reps: int,
    pairs: int,
    scenarios: int,
    alpha: float,
    seed: int,
) -> dict[str, Any]:
    """A against A with a budget of ``pairs``: how often and after how many pairs the
    sequential procedure shows equivalence (its first scenario, K = 9 x scenarios), against
    the fixed equivalence design (TOST per quantity) matched at each power of
    :data:`POWERS`, on the same simulated experiments."""
    rng = np.random.default_rng([seed, 7, SETTINGS.index((name, mixed, 0.5, False))])
    k = 9 * scenarios
    d = differences(rng, reps, pairs, mixed=mixed, p_rec_b=0.5, drift=False)
    n, v = stopping_pairs(d, MARGINS, alpha=alpha, hypotheses=k)
    eq = v == 2
    out: dict[str, Any] = {
        "setting": name,
        "repetitions": reps,
        "budget": pairs,
        "equivalent": int(eq.sum()),
        "change": int((v == 1).sum()),
        "pairs_median": float(np.median(n[eq])) if eq.any() else None,
        "matched": {},
    }

    def power(m: int) -> float:
        return fixed_equivalence_power(d, m, alpha=alpha, hypotheses=k)

    for target in POWERS:
        nf = smallest_n(power, target, lo=2, hi=pairs)
        pf = round(power(nf), 4) if nf else None
        out["matched"][f"{target:.2f}"] = comparison(matched(n, v, 2, target), nf, pf)
    return out


def run(
    *,
    reps: int,
    scenarios: int,
    max_pairs: int,
    alpha: float,
    seed: int,
    fixed_pairs: int,
    only: tuple[str, ...] = (),
    equivalence_reps: int = 0,
    equivalence_pairs: int = 600,
) -> dict[str, Any]:
    start = time.perf_counter()
    rows = [
        setting(
            *s,
            reps=reps,
            scenarios=scenarios,
            max_pairs=max_pairs,
            alpha=alpha,
            seed=seed,
            fixed_pairs=fixed_pairs,
        )
        for s in SETTINGS
        if not only or s[0] in only
    ]
    equivalent = [
        equivalence(
            name,
            mixed,
            reps=equivalence_reps,
            pairs=equivalence_pairs,
            scenarios=scenarios,
            alpha=alpha,
            seed=seed,
        )
        for name, mixed, p_rec_b, drift in SETTINGS
        if equivalence_reps > 0 and name in EQUIVALENCE_SETTINGS and (not only or name in only)
    ]
    return {
        "settings": {
            "repetitions": reps,
            "scenarios": scenarios,
            "hypotheses": 9 * scenarios,
            "max_pairs": max_pairs,
            "alpha": alpha,
            "seed": seed,
            "fixed_pairs": fixed_pairs,
            "equivalence_repetitions": equivalence_reps,
            "equivalence_pairs": equivalence_pairs,
            "powers": list(POWERS),
            "share_margin": SHARE_MARGIN,
            "time_margin": "10%",
        },
        "seconds": round(time.perf_counter() - start, 1),
        "rows": rows,
        "equivalence": equivalent,
    }


def _rate(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def _matched_cell(cell: dict[str, Any] | None, fixed_limit: int) -> str:
    """``21.3 pairs (budget 33) vs 28: 24% fewer`` for one matched-power comparison (``more``
    when the sequential design needs more pairs on average than the fixed one)."""
    if not cell:
        return "-"
    if "pairs_mean" not in cell:
        seq = "not reached in the budget"
    else:
        seq = f"{cell['pairs_mean']:.1f} pairs (budget {cell['budget']})"
    fixed = f"{cell['fixed_n']}" if cell.get("fixed_n") else f"> {fixed_limit}"
    saving = ""
    if "saving" in cell:
        pct = round(100 * cell["saving"])
        saving = f": {pct}% fewer" if pct >= 0 else f": {-pct}% more"
    return f"{seq} vs {fixed}{saving}"


def markdown(result: dict[str, Any]) -> str:
    st = result["settings"]
    n = st["repetitions"]
    powers = [f"{p:.2f}" for p in st["powers"]]
    at = " | ".join(f"at {100 * float(p):.0f}% power: sequential vs fixed-n" for p in powers)
    lines = [
        f"{n} experiments per setting, {st['scenarios']} scenarios each (K = "
        f"{st['hypotheses']} quantities), α = {st['alpha']}, budget {st['max_pairs']} pairs, "
        f"margins ±{st['share_margin']} time share and ±{st['time_margin']} completion time:",
        "",
        "| setting | false claims (family-wise) | decided: change / equivalent / budget "
        f"| pairs to decision: mean (median, 90th pct) | {at} | oracle SPRT (largest effect δ) |",
        "|---|---|---|---|" + "---|" * len(powers) + "---|",
    ]
    for r in result["rows"]:
        cells = ["-"] * len(powers)
        oracle = "-"
        if not r["null"]:
            oracle = f"{r['oracle_pairs']:.0f} pairs (δ = {r['largest_effect']:.2f})"
            cells = [_matched_cell(r["matched"].get(p), st["fixed_pairs"]) for p in powers]
        lines.append(
            f"| {r['setting']} | {_rate(r['false_claims'], n)} | "
            f"{100 * r['change'] / n:.1f}% / {100 * r['equivalent'] / n:.1f}% / "
            f"{100 * r['budget'] / n:.1f}% | {r['pairs_mean']:.1f} ({r['pairs_median']:g}, "
            f"{r['pairs_p90']:g}) | " + " | ".join(cells) + f" | {oracle} |"
        )
    if result.get("equivalence"):
        e0 = result["equivalence"][0]
        at = " | ".join(f"at {100 * float(p):.0f}% power: sequential vs fixed TOST" for p in powers)
        lines += [
            "",
            f"Equivalence, A against A: {e0['repetitions']} experiments per setting, budget "
            f"{e0['budget']} pairs (the fixed design: two one-sided t-tests per quantity at α / K, "
            "every quantity inside its margin):",
            "",
            "| setting | shown equivalent / a change claimed | pairs to equivalence: median | "
            f"{at} |",
            "|---|---|---|" + "---|" * len(powers),
        ]
        for r in result["equivalence"]:
            m = r["repetitions"]
            median = f"{r['pairs_median']:g}" if r["pairs_median"] is not None else "-"
            cells = [_matched_cell(r["matched"].get(p), r["budget"]) for p in powers]
            lines.append(
                f"| {r['setting']} | {100 * r['equivalent'] / m:.1f}% / "
                f"{100 * r['change'] / m:.1f}% | {median} | " + " | ".join(cells) + " |"
            )
    return "\n".join(lines)


# -- the alternatives considered (``--alternatives``) ------------------------------------------


def _previous_scale(d: np.ndarray, floor: np.ndarray | float) -> np.ndarray:
    """The standard deviation of the earlier pairs (last axis), floored: predictable."""
    n = d.shape[-1]
    k = np.arange(n, dtype=float)
    zero = np.zeros_like(d[..., :1])
    ps = np.concatenate([zero, np.cumsum(d, -1)[..., :-1]], -1)
    pq = np.concatenate([zero, np.cumsum(d * d, -1)[..., :-1]], -1)
    mean = np.where(k > 0, ps / np.maximum(k, 1), 0.0)
    var = np.where(k > 1, (pq - k * mean * mean) / np.maximum(k - 1, 1), 0.0)
    return np.maximum(np.sqrt(np.maximum(var, 0.0)), floor)


def _normal_mixture(d: np.ndarray, floor: float, *, c: float = 0.5) -> np.ndarray:
    """Robbins' normal mixture over self-normalised sums of ``d / s`` (valid for symmetric
    differences, de la Peña's inequality): 1/sqrt(1 + c²V) exp(c²S² / 2(1 + c²V))."""
    x = d / _previous_scale(d, floor)
    s, v = np.cumsum(x, -1), np.cumsum(x * x, -1)
    q = 1 + c * c * v
    return np.exp(-0.5 * np.log(q) + c * c * s * s / (2 * q))


def _combined(d: np.ndarray, margins: list[float]) -> np.ndarray:
    """One bet per scenario on the direction of the earlier pairs' standardised mean
    differences (K = scenarios instead of quantities x scenarios)."""
    from quicsm.stats.sequential import wealth

    z = d / _previous_scale(d, np.array(margins)[None, :, None] / 4)
    w = np.concatenate([np.zeros_like(z[..., :1]), np.cumsum(z, -1)[..., :-1]], -1)
    u = (w * z).sum(1) / np.maximum(np.sqrt((w * w).sum(1)), 1e-12)
    return wealth(u, theta=0.0, side="greater", floor=1e-9)


def alternatives(*, reps: int, scenarios: int, max_pairs: int, alpha: float, seed: int) -> str:
    """Mean pairs to a change (and power) of each change test considered, on the same
    simulated experiments: the betting test at four bet scales, the normal mixture, and one
    combined bet per scenario."""
    import quicsm.stats.sequential as sq

    k = 9 * scenarios
    t = k / alpha
    rows = []
    data = []
    for name, mixed, p_rec_b, drift in SETTINGS:
        if p_rec_b == 0.7:
            rng = np.random.default_rng([seed, 99, int(mixed)])
            data.append(
                (name, differences(rng, reps, max_pairs, mixed=mixed, p_rec_b=p_rec_b, drift=drift))
            )

    def first(hit: np.ndarray) -> tuple[float, float]:
        n = np.where(hit.any(1), hit.argmax(1) + 1, max_pairs)
        return float(n.mean()), float(hit.any(1).mean())

    def per_quantity(fn: Any, d: np.ndarray) -> np.ndarray:
        return np.any([fn(d[:, j, :], MARGINS[j] / 4) >= t for j in range(d.shape[1])], axis=0)

    saved = sq.SCALE_SDS
    try:
        for c in (1.0, 1.5, 2.0, 3.0):
            sq.SCALE_SDS = c
            rows.append(
                (
                    f"betting, scale {c:g} sd" + (" (chosen)" if c == saved else ""),
                    [
                        first(per_quantity(lambda x, f: sq.change_wealth(x, floor=f), d))
                        for _, d in data
                    ],
                )
            )
    finally:
        sq.SCALE_SDS = saved
    rows.append(
        (
            "normal mixture (self-normalised)",
            [first(per_quantity(_normal_mixture, d)) for _, d in data],
        )
    )
    rows.append(
        (
            "one combined bet per scenario (K = scenarios)",
            [first(_combined(d, MARGINS) >= scenarios / alpha) for _, d in data],
        )
    )
    head = " | ".join(name for name, _ in data)
    lines = [
        f"| change test ({reps} experiments, K = {k}, budget {max_pairs}) | {head} |",
        "|---|" + "---|" * len(data),
    ]
    for label, cells in rows:
        lines.append(
            f"| {label} | " + " | ".join(f"{n:.1f} pairs ({100 * p:.1f}%)" for n, p in cells) + " |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--repetitions", type=int, default=2000, help="simulated experiments per setting"
    )
    ap.add_argument(
        "--scenarios", type=int, default=7, help="scenarios per experiment (the family's size)"
    )
    ap.add_argument(
        "--max-pairs", type=int, default=100, help="budget of pairs per scenario (--max-runs)"
    )
    ap.add_argument("--fixed-pairs", type=int, default=200, help="longest fixed design tried")
    ap.add_argument(
        "--equivalence-repetitions",
        type=int,
        default=400,
        help="simulated A-against-A experiments for the equivalence comparison (0: none)",
    )
    ap.add_argument(
        "--equivalence-pairs",
        type=int,
        default=600,
        help="budget of pairs of the equivalence comparison (and longest fixed design tried)",
    )
    ap.add_argument("--alpha", type=float, default=0.05, help="family-wise error rate")
    ap.add_argument("--seed", type=int, default=1, help="seed of the simulation")
    ap.add_argument("--only", action="append", default=[], help="run only this setting")
    ap.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"the results file to write (default: {SCRATCH.relative_to(ROOT)}; name "
        f"{RESULTS.relative_to(ROOT)} to publish) or, with --markdown, to read (default: "
        f"{RESULTS.relative_to(ROOT)})",
    )
    ap.add_argument("--markdown", action="store_true", help="print the table of --output")
    ap.add_argument(
        "--alternatives", action="store_true", help="compare the change tests considered"
    )
    args = ap.parse_args()
    if args.alternatives:
        print(
            alternatives(
                reps=args.repetitions,
                scenarios=args.scenarios,
                max_pairs=args.max_pairs,
                alpha=args.alpha,
                seed=args.seed,
            )
        )
        return
    if args.markdown:
        print(markdown(json.loads((args.output or RESULTS).read_text())))
        return
    result = run(
        reps=args.repetitions,
        scenarios=args.scenarios,
        max_pairs=args.max_pairs,
        alpha=args.alpha,
        seed=args.seed,
        fixed_pairs=args.fixed_pairs,
        only=tuple(args.only),
        equivalence_reps=args.equivalence_repetitions,
        equivalence_pairs=args.equivalence_pairs,
    )
    output = args.output or SCRATCH
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"written: {output}", file=sys.stderr)
    print(markdown(result))


if __name__ == "__main__":
    main()
