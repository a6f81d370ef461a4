"""The sequential A/B tests (quicsm.stats.sequential): validity under the nulls they claim,
decisions, and the benchmark on a tiny configuration."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.stats.sequential import (
    MAX_STAKE,
    Quantity,
    change_wealth,
    decide,
    equivalence_wealth,
    fewest_pairs,
    interval,
    pairs_to_reach,
    stopping_pairs,
    threshold,
    wealth,
)

ROOT = Path(__file__).resolve().parent.parent


@given(
    st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=40),
    st.floats(-10, 10),
    st.sampled_from(["greater", "less"]),
    st.floats(1e-3, 10),
)
@settings(max_examples=200, deadline=None)
def test_wealth_is_positive_and_grows_at_most_by_the_stake(
    d: list[float], theta: float, side: str, floor: float
) -> None:
    w = wealth(np.array(d), theta=theta, side=side, floor=floor)  # type: ignore[arg-type]
    assert w.shape == (len(d),)
    assert np.all(w > 0)
    ratios = np.concatenate([[w[0]], w[1:] / w[:-1]])
    assert np.all(ratios <= 1 + MAX_STAKE + 1e-9)
    assert np.all(ratios >= 1 - MAX_STAKE - 1e-9)


def test_wealth_is_predictable_a_later_pair_changes_no_earlier_wealth() -> None:
    rng = np.random.default_rng(0)
    d = rng.normal(size=30)
    full = change_wealth(d, floor=0.1)
    for n in (1, 5, 17):
        assert np.allclose(change_wealth(d[:n], floor=0.1), full[:n])
    e = d.copy()
    e[20] = 1e6
    assert np.allclose(change_wealth(e, floor=0.1)[:20], full[:20])


@pytest.mark.parametrize("dist", ["normal", "cauchy", "skewed-symmetric", "ties"])
def test_change_test_keeps_its_level_over_any_stopping_time(dist: str) -> None:
    """Ville: under exchangeable pairs the probability that the wealth *ever* reaches 1/a
    is ≤ a, for heavy tails and ties too (the null needs only symmetric differences)."""
    rng = np.random.default_rng([1, len(dist)])
    reps, n = 4000, 150
    if dist == "normal":
        d = rng.normal(size=(reps, n))
    elif dist == "cauchy":
        d = rng.standard_cauchy((reps, n))
    elif dist == "skewed-symmetric":  # B − A of a skewed quantity: symmetric differences
        d = rng.lognormal(0, 1, (reps, n)) - rng.lognormal(0, 1, (reps, n))
    else:
        d = rng.choice([-1.0, 0.0, 0.0, 1.0], size=(reps, n))
    crossed = (change_wealth(d, floor=0.05).max(axis=1) >= 20).mean()
    assert crossed <= 0.05 + 0.01, crossed


@pytest.mark.parametrize("noise", ["normal", "skewed"])
@pytest.mark.parametrize("shift", [0.1, 0.25, -0.1])
def test_equivalence_is_not_claimed_when_the_shift_is_at_or_beyond_the_margin(
    shift: float, noise: str
) -> None:
    """The shift model: B = A + shift in distribution, so B − A is symmetric about the shift
    even when A is skewed."""
    rng = np.random.default_rng([7, len(noise)])
    if noise == "normal":
        d = shift + rng.normal(0, 0.05, size=(4000, 150))
    else:
        a, b = rng.lognormal(-3, 1, size=(2, 4000, 150))
        d = shift + b - a
    crossed = (equivalence_wealth(d, margin=0.1, floor=0.025).max(axis=1) >= 20).mean()
    assert crossed <= 0.05 + 0.01, crossed


def test_a_real_shift_is_found_and_no_shift_is_shown_equivalent() -> None:
    rng = np.random.default_rng(3)
    changed = 0.05 + rng.normal(0, 0.05, size=200)
    assert change_wealth(changed, floor=0.0125)[-1] > 1e6
    same = rng.normal(0, 0.01, size=200)
    assert equivalence_wealth(same, margin=0.05, floor=0.0125)[-1] > 1e6
    assert change_wealth(same, floor=0.0125)[-1] < 20


def test_decide_stops_for_change_equivalence_or_budget() -> None:
    q = [Quantity(name="share", margin=0.05), Quantity(name="time", margin=math.log(1.1))]
    rng = np.random.default_rng(5)
    n = 40
    change = {"share": list(0.1 + rng.normal(0, 0.02, n)), "time": list(rng.normal(0, 0.02, n))}
    s = decide(change, q, alpha=0.05, hypotheses=2, max_pairs=100)
    assert s.verdict == "change" and s.changed == ("share",)
    assert "change shown in share" in s.reason()
    share = next(x for x in s.quantities if x.name == "share")
    assert share.ci_low > 0 and share.ci_low < share.estimate < share.ci_high
    same = {"share": list(rng.normal(0, 0.002, n)), "time": list(rng.normal(0, 0.002, n))}
    s = decide(same, q, alpha=0.05, hypotheses=2, max_pairs=100)
    assert s.verdict == "equivalent"
    noisy = {"share": list(rng.normal(0, 0.3, 5)), "time": list(rng.normal(0, 0.3, 5))}
    s = decide(noisy, q, alpha=0.05, hypotheses=2, max_pairs=5)
    assert s.verdict == "budget"
    s = decide(noisy, q, alpha=0.05, hypotheses=2, max_pairs=6)
    assert s.verdict == "continue" and "stops at e ≥ 40" in s.reason()
    assert "more pairs)" in s.reason()
    s = decide({}, q, alpha=0.05, hypotheses=2, max_pairs=6)
    assert s.verdict == "continue" and s.pairs == 0
    with pytest.raises(ValueError, match="different numbers of pairs"):
        decide({"share": [0.1], "time": []}, q, alpha=0.05, hypotheses=2, max_pairs=6)


def test_vectorised_stopping_agrees_with_decide() -> None:
    rng = np.random.default_rng(11)
    margins = [0.05, 0.1]
    d = np.stack([0.03 + rng.normal(0, 0.04, (30, 60)), rng.normal(0, 0.03, (30, 60))], axis=1)
    pairs, verdicts = stopping_pairs(d, margins, alpha=0.05, hypotheses=4)
    q = [Quantity(name="a", margin=0.05), Quantity(name="b", margin=0.1)]
    code = {"budget": 0, "change": 1, "equivalent": 2}
    for r in range(30):
        n = int(pairs[r])
        s = decide({"a": d[r, 0, :n], "b": d[r, 1, :n]}, q, alpha=0.05, hypotheses=4, max_pairs=60)
        assert code[s.verdict] == verdicts[r]
        if n > 1 and s.verdict != "budget":  # one pair fewer was undecided
            s = decide(
                {"a": d[r, 0, : n - 1], "b": d[r, 1, : n - 1]},
                q,
                alpha=0.05,
                hypotheses=4,
                max_pairs=60,
            )
            assert s.verdict == "continue"


def test_interval_narrows_and_covers() -> None:
    rng = np.random.default_rng(2)
    d = 0.2 + rng.normal(0, 0.1, 200)
    wide = interval(d[:10], threshold=20, floor=0.01, width=0.1)
    narrow = interval(d, threshold=20, floor=0.01, width=0.1)
    assert narrow[0] < 0.2 < narrow[1]
    assert narrow[1] - narrow[0] < wide[1] - wide[0]
    assert interval([], threshold=20, floor=0.01, width=0.1) == (-math.inf, math.inf)


def test_threshold_and_fewest_pairs() -> None:
    assert threshold(0.05, 9) == pytest.approx(180)
    assert fewest_pairs(0.05, 9, claim="equivalent") == 9  # 1.9^8 < 180 <= 1.9^9
    assert fewest_pairs(0.05, 9, claim="change") == 10  # 1.9^9 < 2 x 180 <= 1.9^10
    assert fewest_pairs(0.05, 63, claim="equivalent") == 12
    assert fewest_pairs(0.05, 63, claim="change") == 13
    assert pairs_to_reach(1.0, 180) == 9 and pairs_to_reach(180, 180) == 0
    assert pairs_to_reach(100, 180) == 1
    # the bounds are reached exactly by differences all of one sign (a change) and all at 0
    # (equivalence)
    for k in (9, 63):
        t = threshold(0.05, k)
        w = change_wealth(np.ones(30), floor=0.1)
        assert 1 + int(np.argmax(w >= t)) == fewest_pairs(0.05, k, claim="change")
        e = equivalence_wealth(np.zeros(30), margin=0.4, floor=0.1)
        assert 1 + int(np.argmax(e >= t)) == fewest_pairs(0.05, k, claim="equivalent")
    with pytest.raises(ValueError):
        threshold(0, 3)
    with pytest.raises(ValueError):
        threshold(0.05, 0)


def test_benchmark_runs_on_a_tiny_configuration(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "ab_sequential", ROOT / "benchmarks" / "ab_sequential.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["ab_sequential"] = mod
    spec.loader.exec_module(mod)
    result = mod.run(reps=40, scenarios=1, max_pairs=40, alpha=0.05, seed=3, fixed_pairs=50)
    rows = {r["setting"]: r for r in result["rows"]}
    assert set(rows) == {s[0] for s in mod.SETTINGS}
    for r in rows.values():
        assert r["change"] + r["equivalent"] + r["budget"] == 40
        assert 1 <= r["pairs_mean"] <= 40
    # the verdict issue's change is found in homogeneous runs within 40 pairs
    change = rows["homogeneous, change 0.5 → 0.7"]
    assert change["change"] >= 36
    assert rows["homogeneous, null"]["false_claims"] <= 4
    # compared at stated powers: each design is the smallest reaching that power, so the
    # designs at 95% are no smaller than at 90%, and each reaches its power
    at90, at95 = change["matched"]["0.90"], change["matched"]["0.95"]
    for target, cell in ((0.90, at90), (0.95, at95)):
        assert cell["power"] >= target and cell["fixed_power"] >= target
        assert cell["pairs_mean"] <= cell["budget"] <= 40
        assert cell["saving"] == pytest.approx(1 - cell["pairs_mean"] / cell["fixed_n"], abs=1e-3)
    assert at95["budget"] >= at90["budget"] and at95["fixed_n"] >= at90["fixed_n"]
    table = mod.markdown(json.loads(json.dumps(result)))
    assert table.count("\n| ") == len(rows) + 1
    # equivalence, A against A, against the fixed TOST design of the same power
    eq = mod.run(
        reps=30, scenarios=1, max_pairs=20, alpha=0.05, seed=3, fixed_pairs=30,
        only=("homogeneous, null",), equivalence_reps=30, equivalence_pairs=400,
    )  # fmt: skip
    (row,) = eq["equivalence"]
    assert row["setting"] == "homogeneous, null" and row["equivalent"] + row["change"] <= 30
    fixed = row["matched"]["0.90"]["fixed_n"]
    assert fixed is not None and mod.fixed_equivalence_power(
        mod.differences(np.random.default_rng(5), 100, fixed, mixed=False, p_rec_b=0.5,
                        drift=False), fixed, alpha=0.05, hypotheses=9
    ) > 0.8  # fmt: skip
    assert "| homogeneous, null | " in mod.markdown(eq).split("Equivalence, A against A")[1]
    alt = mod.alternatives(reps=20, scenarios=1, max_pairs=30, alpha=0.05, seed=1)
    assert "| betting, scale 1 sd (chosen) |" in alt and alt.count("\n| ") == 6
    # the stored results are the full run's and print the docs table
    stored = json.loads((ROOT / "docs" / "ab_sequential.json").read_text())
    assert stored["settings"]["repetitions"] >= 1000
    assert "| homogeneous, null |" in mod.markdown(stored)


@pytest.mark.slow
def test_stored_benchmark_row_reproduces() -> None:
    """One row of the stored one-scenario table, rerun with its settings, is what docs quote."""
    spec = importlib.util.spec_from_file_location(
        "ab_sequential", ROOT / "benchmarks" / "ab_sequential.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["ab_sequential"] = mod
    spec.loader.exec_module(mod)
    stored = json.loads((ROOT / "docs" / "ab_sequential_one.json").read_text())
    st = stored["settings"]
    name = "homogeneous, change 0.5 → 0.7"
    result = mod.run(
        reps=st["repetitions"],
        scenarios=st["scenarios"],
        max_pairs=st["max_pairs"],
        alpha=st["alpha"],
        seed=st["seed"],
        fixed_pairs=st["fixed_pairs"],
        only=(name,),
    )
    assert result["rows"] == [r for r in stored["rows"] if r["setting"] == name]


def test_the_quantity_nearest_a_change_leads_the_progress() -> None:
    from quicsm.stats.sequential import nearest_change

    q = [Quantity(name="never", margin=0.05), Quantity(name="moving", margin=0.05)]
    s = decide({"never": [0.0], "moving": [0.03]}, q, alpha=0.05, hypotheses=2, max_pairs=9)
    assert [x.e_change for x in s.quantities] == [1.0, 1.0]  # one pair: no e-value moves yet
    assert nearest_change(s.quantities).name == "moving"
    # but with every e at 1 no quantity is named as nearer a change than another
    assert "change: every e ≤ 1 (≥ 6 more pairs)" in s.reason()  # 1.9^5 < 40 <= 1.9^6
    assert "change: moving" not in s.reason()
