"""Always-valid sequential tests on paired differences: decide an A/B comparison after each pair.

An A/B experiment runs A and B in pairs, the order within each pair drawn at random. Pair ``i``
gives one difference ``d_i = B_i − A_i`` per quantity (a state's time share; the log of the
completion-time ratio). After every pair, each quantity has three e-processes — betting
"wealth" that can only grow large when its null hypothesis is false, at any stopping time
(Ville's inequality: under a null, ``P(sup_n W_n ≥ 1/a) ≤ a``):

- **change** (null: A and B are exchangeable within a pair, so every difference's sign is a
  fair coin whatever its size): the average of two one-sided bets that the differences are
  positive / negative. This needs no distributional assumption: the pair's randomised order is
  what makes the null exact, and drift over time (a machine getting slower) is shared by both
  runs of a pair or, within a pair, falls on A and B with equal chance.
- **equivalence** within a margin ``m`` (nulls: the shift is ≥ m, or ≤ −m): one-sided bets
  that the differences lie below ``m`` and above ``−m``. These are supermartingales under the
  shift model (``d_i − θ`` symmetric about 0, which is what two identically shaped
  distributions, one shifted by θ, give) for every ``θ`` beyond the margin.

Each bet is on ``x_i = clip((d_i − θ) / s_i, −1, 1)`` (an odd, non-decreasing function of
the centred difference, so its conditional mean is 0 under the symmetric null and has the sign
of the shift otherwise), with ``s_i`` the standard deviation of the *earlier* differences
(never below a floor, a quarter of the margin by default; one standard deviation was the best
of 1, 1.5, 2 and 3 in ``benchmarks/ab_sequential.py``) and the stake
``λ_i = clip((1/2 + Σ_{j<i} x_j) / (1 + Σ_{j<i} x_j²), 0, 0.9)`` (the growth-rate-optimal
plug-in, "GRAPA", of Waudby-Smith & Ramdas 2023, started at 1/2): both known before pair
``i``, so each factor ``1 + λ_i x_i`` has conditional mean ≤ 1 under the null and is ≥ 0.1.

**Family-wise error** across the ``K`` quantities of every scenario: Bonferroni over e-values,
a claim needs wealth ≥ ``K / α``. At most one null of each quantity can be true (its shift
is 0, or beyond a margin, or neither), so the chance of any false claim — a change that is
not there or an equivalence that is not true — is at most ``K · α / K = α``, at whatever pair
each scenario stops. (e-value Holm would reject a little more; with one claim per scenario
and the scenario stopping at it, Bonferroni is what the stopping rule can use simply.)

The functions are pure: arrays in, arrays or tables out; :func:`wealth` works on the last axis
so that a benchmark evaluates thousands of simulated experiments at once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

#: the largest stake: every factor 1 + λx stays ≥ 0.1
MAX_STAKE = 0.9
#: the first pair's stake (before any difference is seen)
FIRST_STAKE = 0.5
#: the bet's scale is this many standard deviations of the earlier differences
SCALE_SDS = 1.0

Side = Literal["greater", "less"]
Verdict = Literal["change", "equivalent", "budget", "continue"]


def wealth(d: np.ndarray, *, theta: float | np.ndarray, side: Side, floor: float) -> np.ndarray:
    """Running wealth ``W_1 … W_n`` of the one-sided bet that the differences ``d`` (last axis:
    pairs in order) lie above ``theta`` (``side="greater"``; null: shift ≤ θ) or below it
    (``"less"``; null: shift ≥ θ). ``floor`` > 0 is the smallest scale a bet uses (a difference
    of ``floor`` beyond θ is a full-size bet). ``theta`` broadcasts against ``d[..., 0]``."""
    if floor <= 0:
        raise ValueError("floor must be positive")
    d = np.asarray(d, dtype=float)
    n = d.shape[-1]
    theta = np.asarray(theta, dtype=float)[..., None]
    sign = 1.0 if side == "greater" else -1.0
    # the scale of pair i: the standard deviation of pairs 1..i-1 (predictable), floored
    k = np.arange(n, dtype=float)
    csum = np.cumsum(d, axis=-1)
    csq = np.cumsum(d * d, axis=-1)
    prev_sum = np.concatenate([np.zeros_like(d[..., :1]), csum[..., :-1]], axis=-1)
    prev_sq = np.concatenate([np.zeros_like(d[..., :1]), csq[..., :-1]], axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(k > 0, prev_sum / np.maximum(k, 1), 0.0)
        var = np.where(k > 1, (prev_sq - k * mean * mean) / np.maximum(k - 1, 1), 0.0)
    scale = np.maximum(np.sqrt(np.maximum(var, 0.0)), floor)
    x = np.clip(sign * (d - theta) / (SCALE_SDS * scale), -1.0, 1.0)
    # the stake of pair i from x_1..x_{i-1} (predictable)
    xs = np.cumsum(x, axis=-1)
    xq = np.cumsum(x * x, axis=-1)
    px = np.concatenate([np.zeros_like(x[..., :1]), xs[..., :-1]], axis=-1)
    pq = np.concatenate([np.zeros_like(x[..., :1]), xq[..., :-1]], axis=-1)
    stake = np.clip((FIRST_STAKE + px) / (1.0 + pq), 0.0, MAX_STAKE)
    return np.exp(np.cumsum(np.log1p(stake * x), axis=-1))


def change_wealth(d: np.ndarray, *, floor: float) -> np.ndarray:
    """Two-sided e-process against "A and B exchangeable" (no shift at all): the mean of the
    bets on either sign."""
    up = wealth(d, theta=0.0, side="greater", floor=floor)
    down = wealth(d, theta=0.0, side="less", floor=floor)
    return 0.5 * (up + down)


def equivalence_wealth(d: np.ndarray, *, margin: float, floor: float) -> np.ndarray:
    """e-process against "the shift is outside (−margin, margin)": the smaller of the bets
    that the shift is below ``margin`` and above ``−margin`` (each must reach the threshold)."""
    below = wealth(d, theta=margin, side="less", floor=floor)
    above = wealth(d, theta=-margin, side="greater", floor=floor)
    return np.minimum(below, above)


def interval(
    d: Sequence[float] | np.ndarray, *, threshold: float, floor: float, width: float
) -> tuple[float, float]:
    """The confidence sequence's current interval for the shift: every θ that neither
    one-sided bet rejects at ``threshold`` (each side at ``2 · threshold``, so that the
    interval holds at the two-sided level the change test uses). Found on a grid of step
    ``width / 400`` around the data; infinite ends when nothing is rejected that far."""
    d = np.asarray(d, dtype=float)
    if d.size == 0:
        return (-math.inf, math.inf)
    lo_d, hi_d = float(d.min()), float(d.max())
    span = max(hi_d - lo_d, width)
    grid = np.linspace(lo_d - span, hi_d + span, 801)
    up = wealth(np.broadcast_to(d, (grid.size, d.size)), theta=grid, side="greater", floor=floor)
    down = wealth(np.broadcast_to(d, (grid.size, d.size)), theta=grid, side="less", floor=floor)
    kept = (up[:, -1] < 2 * threshold) & (down[:, -1] < 2 * threshold)
    if not kept.any():  # every θ rejected on one side or the other: the point estimate
        mid = float(d.mean())
        return (mid, mid)
    idx = np.flatnonzero(kept)
    low = -math.inf if idx[0] == 0 else float(grid[idx[0]])
    high = math.inf if idx[-1] == grid.size - 1 else float(grid[idx[-1]])
    return (low, high)


@dataclass(frozen=True, kw_only=True)
class Quantity:
    """One primary quantity of a scenario: its name, equivalence margin and bet floor."""

    name: str
    margin: float
    floor: float | None = None

    @property
    def bet_floor(self) -> float:
        return self.floor if self.floor is not None else self.margin / 4


@dataclass(frozen=True, kw_only=True)
class QuantityState:
    """Where one quantity stands after ``pairs`` pairs."""

    name: str
    pairs: int
    estimate: float
    ci_low: float
    ci_high: float
    e_change: float
    e_equivalent: float
    margin: float


@dataclass(frozen=True, kw_only=True)
class ScenarioState:
    """One scenario's decision after its pairs so far: ``verdict`` is ``change`` (a quantity's
    change e-value reached the threshold), ``equivalent`` (every quantity's equivalence
    e-value did), ``budget`` (``max_pairs`` reached without either) or ``continue``."""

    verdict: Verdict
    pairs: int
    threshold: float
    quantities: tuple[QuantityState, ...]
    changed: tuple[str, ...]

    def reason(self) -> str:
        """The stopping reason in words (or what would stop it)."""
        t = f"{self.threshold:.4g}"
        if self.verdict == "change":
            return f"change shown in {', '.join(self.changed)} (e ≥ {t}) after {self.pairs} pairs"
        if self.verdict == "equivalent":
            return f"equivalent within the margins (every e ≥ {t}) after {self.pairs} pairs"
        if self.verdict == "budget":
            return f"budget of {self.pairs} pairs reached: neither a change nor equivalence shown"
        lead = max(self.quantities, key=_nearest_change, default=None)
        lag = min(self.quantities, key=lambda q: q.e_equivalent, default=None)
        parts = [f"stops at e ≥ {t}"]
        if lead is not None and lead.e_change > 1:
            parts.append(
                f"change: {lead.name} e = {lead.e_change:.3g} "
                f"(≥ {pairs_to_reach(lead.e_change, self.threshold)} more pairs)"
            )
        elif lead is not None:
            # no e-value above its start: no quantity is nearer a change than another
            parts.append(
                f"change: every e ≤ 1 (≥ {pairs_to_reach(lead.e_change, self.threshold)} "
                "more pairs)"
            )
        if lag is not None:
            parts.append(
                f"equivalence: weakest {lag.name} e = {lag.e_equivalent:.3g} "
                f"(≥ {pairs_to_reach(lag.e_equivalent, self.threshold)} more pairs)"
            )
        return "; ".join(parts)


def _nearest_change(q: QuantityState) -> tuple[float, float]:
    """Order quantities by how near a change they are: the change e-value, then (among equal
    e-values, e.g. 1 for quantities never seen to differ) the estimate in margins."""
    size = abs(q.estimate) / q.margin if math.isfinite(q.estimate) else 0.0
    return (q.e_change, size)


def nearest_change(states: Sequence[QuantityState]) -> QuantityState:
    """The quantity nearest to a change (see :func:`_nearest_change`)."""
    return max(states, key=_nearest_change)


def pairs_to_reach(e: float, target: float) -> int:
    """The fewest further pairs that can take wealth ``e`` to ``target`` (each multiplies it
    by at most ``1 + MAX_STAKE``)."""
    if e >= target:
        return 0
    return math.ceil(math.log(target / e) / math.log1p(MAX_STAKE))


def threshold(alpha: float, hypotheses: int) -> float:
    """The e-value a claim needs: ``K / α`` (Bonferroni over e-values)."""
    if not 0 < alpha < 1:
        raise ValueError("alpha must be in (0, 1)")
    if hypotheses < 1:
        raise ValueError("hypotheses must be ≥ 1")
    return hypotheses / alpha


def decide(
    differences: Mapping[str, Sequence[float]],
    quantities: Sequence[Quantity],
    *,
    alpha: float,
    hypotheses: int,
    max_pairs: int,
) -> ScenarioState:
    """The scenario's state after the pairs in ``differences`` (per quantity name, the pairs'
    differences in order; every quantity has the same number). ``hypotheses`` is the size of
    the whole family (every quantity of every scenario of the experiment)."""
    t = threshold(alpha, hypotheses)
    lengths = {len(differences.get(q.name, ())) for q in quantities}
    if len(lengths) > 1:
        raise ValueError(f"quantities have different numbers of pairs: {sorted(lengths)}")
    n = lengths.pop() if lengths else 0
    states = []
    for q in quantities:
        d = np.asarray(differences.get(q.name, ()), dtype=float)
        if n == 0:
            states.append(
                QuantityState(
                    name=q.name,
                    pairs=0,
                    estimate=math.nan,
                    ci_low=-math.inf,
                    ci_high=math.inf,
                    e_change=1.0,
                    e_equivalent=1.0,
                    margin=q.margin,
                )
            )
            continue
        ec = float(change_wealth(d, floor=q.bet_floor)[-1])
        ee = float(equivalence_wealth(d, margin=q.margin, floor=q.bet_floor)[-1])
        low, high = interval(d, threshold=t, floor=q.bet_floor, width=q.margin)
        states.append(
            QuantityState(
                name=q.name,
                pairs=n,
                estimate=float(d.mean()),
                ci_low=low,
                ci_high=high,
                e_change=ec,
                e_equivalent=ee,
                margin=q.margin,
            )
        )
    changed = tuple(s.name for s in states if s.e_change >= t)
    verdict: Verdict
    if changed:
        verdict = "change"
    elif states and n > 0 and all(s.e_equivalent >= t for s in states):
        verdict = "equivalent"
    elif n >= max_pairs:
        verdict = "budget"
    else:
        verdict = "continue"
    return ScenarioState(
        verdict=verdict, pairs=n, threshold=t, quantities=tuple(states), changed=changed
    )


def stopping_pairs(
    d: np.ndarray,
    margins: Sequence[float],
    *,
    alpha: float,
    hypotheses: int,
    floors: Sequence[float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised :func:`decide` for simulation: ``d`` has shape (experiments, quantities,
    pairs) with the budget as its last length; returns, per experiment, the pairs used and the
    verdict code (1 change, 2 equivalent, 0 budget), the same rule :func:`decide` applies."""
    d = np.asarray(d, dtype=float)
    reps, nq, n = d.shape
    if len(margins) != nq:
        raise ValueError("one margin per quantity")
    fl = [m / 4 for m in margins] if floors is None else list(floors)
    t = threshold(alpha, hypotheses)
    change = np.zeros((reps, n), dtype=bool)
    equiv = np.ones((reps, n), dtype=bool)
    for j in range(nq):
        change |= change_wealth(d[:, j, :], floor=fl[j]) >= t
        equiv &= equivalence_wealth(d[:, j, :], margin=margins[j], floor=fl[j]) >= t
    code = np.where(change, 1, np.where(equiv, 2, 0))
    decided = code > 0
    first = np.where(decided.any(axis=1), decided.argmax(axis=1), n - 1)
    verdict = code[np.arange(reps), first]
    return first + 1, verdict


def fewest_pairs(alpha: float, hypotheses: int, *, claim: Literal["change", "equivalent"]) -> int:
    """The fewest pairs a claim can take: wealth grows at most ``1 + MAX_STAKE`` per pair
    (the price of a test that assumes nothing about the differences' distribution, like an
    exact sign test's ``2^-n`` floor). An equivalence needs each one-sided wealth at the
    threshold; a change's e-value is the mean of two one-sided wealths, of which at most one
    grows, so it needs twice the threshold from one of them: a pair more at K/α = 180."""
    target = threshold(alpha, hypotheses) * (2 if claim == "change" else 1)
    return math.ceil(math.log(target) / math.log1p(MAX_STAKE))
