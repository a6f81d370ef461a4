"""``quicsm diff --plan`` asks of each test what the results ask for its minimum detectable
effect, with the same functions (the noncentral t of the test's own reference, or the normal):
on generated comparisons the plan's MDE is the results', a pilot's own MDE is planned at the
pilot's traces, and the plan says what testing within length strata costs when the groups'
lengths differ."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quicsm.compare.diff import diff
from quicsm.compare.plan import df_at, plan, traces_needed
from quicsm.render.diff_format import plan_text
from quicsm.stats import overdispersion as od
from quicsm.stats.significance import MIN_N

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import diff_power  # noqa: E402  (the benchmark's generator of transitions)


def _traces(n: int, rng: np.random.Generator, changed: bool, tag: str, visits: int) -> pl.DataFrame:
    chain = diff_power.CHANGED if changed else diff_power.CHAIN
    return diff_power.traces(n, rng, chain, mixed=True, tag=tag, visits=visits)


def _pilot(design: str) -> object:
    """Two groups of the benchmark's chain, B's transition changed: of one length, or A long
    and B short with some of each in both (their length strata overlap)."""
    rng = np.random.default_rng([23, len(design)])
    if design == "same length":
        a = _traces(12, rng, False, "a", 30)
        b = _traces(12, rng, True, "b", 30)
    else:
        a = pl.concat([_traces(10, rng, False, "a", 30), _traces(4, rng, False, "as", 5)])
        b = pl.concat([_traces(16, rng, True, "b", 5), _traces(4, rng, True, "bl", 30)])
    return diff(a, b, alpha=0.05)


def _subject(kind: str, r: dict[str, object]) -> str:
    if kind == "edge":
        return f"{r['source']} → {r['target']}"
    if kind == "outcome":
        return f"{r['metric']} in {r['cell']}"
    return str(r["state"])


@pytest.mark.parametrize("design", ["same length", "long vs short"])
def test_the_plans_mde_is_the_results(design: str) -> None:
    result = _pilot(design)
    table = plan(result)  # type: ignore[arg-type]
    rows = {(r["kind"], r["subject"]): r for r in table.iter_rows(named=True)}
    frames = {"edge": result.edges, "state": result.states, "dwell": result.dwell}  # type: ignore[attr-defined]
    compared = 0
    for kind, frame in frames.items():
        for r in frame.iter_rows(named=True):
            if r["p_unadjusted"] is None or r["mde"] is None or not math.isfinite(r["mde"]):
                continue
            mine = rows[(kind, _subject(kind, r))]
            assert mine["se"] == r["se"]
            assert mine["df"] == (math.inf if r["df"] is None else r["df"])
            assert mine["mde"] == pytest.approx(r["mde"], rel=1e-12), (kind, r)
            # the pilot's own MDE is planned at the pilot's traces, a hair less at one more
            n_now = (mine["n_a"] + mine["n_b"]) / 2
            df = mine["df"]
            at = traces_needed(r["se"], r["mde"] * 1.001, r["level"], n_now, df=df)
            assert at == math.ceil(n_now), (kind, r)
            over = traces_needed(r["se"], r["mde"] * 0.999, r["level"], n_now, df=df)
            assert over is not None and over > n_now
            compared += 1
    assert compared >= 4
    if design == "long vs short":  # the t references of permutations within strata among them
        tests = result.edges["test"].to_list()  # type: ignore[attr-defined]
        assert "permuted z within length strata" in tests


def test_the_plan_says_what_length_strata_cost() -> None:
    same = _pilot("same length")
    assert not same.settings["lengths"]["differ"]  # type: ignore[attr-defined]
    assert "length strata" not in plan_text(same, plan(same))  # type: ignore[arg-type]
    mixed = _pilot("long vs short")
    text = " ".join(plan_text(mixed, plan(mixed)).split())  # type: ignore[arg-type]
    assert "differ in length (median " in text
    assert "a permutation test exchanges traces only within their length stratum" in text
    within = mixed.edges.filter(pl.col("test") == "permuted z within length strata")  # type: ignore[attr-defined]
    df = round(within["df"].min())
    assert f"the tests permuted within length strata kept {df} of the " in text
    assert "the runs to come fall into the strata as the pilot's did" in text


@given(
    st.floats(0.005, 0.5),
    st.floats(0.01, 1.0),
    st.sampled_from([0.05, 0.01, 0.001, 1e-4]),
    st.integers(3, 60),
    st.one_of(st.just(math.inf), st.floats(1.0, 200.0)),
)
def test_traces_needed_is_the_fewest_with_the_power(
    se: float, effect: float, level: float, n_now: int, df: float
) -> None:
    """At the planned traces the test has the power, with one fewer it has not (unless the
    plan is at its floor); more traces never lose power."""
    n = traces_needed(se, effect, level, n_now, 0.8, df=df)
    if n is None:
        return

    def power(k: int) -> float:
        return od.power_at(effect, se * math.sqrt(n_now / k), alpha=level, df=df_at(k, df, n_now))

    assert power(n) >= 0.8
    assert n == MIN_N or power(n - 1) < 0.8
    assert power(n + 1) >= power(n) - 1e-12
