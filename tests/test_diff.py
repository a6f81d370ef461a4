"""quicsm.diff: properties (diff(A, A) is empty, swapping A and B flips every sign) and
statistical checks on synthetic groups with a known difference."""

from __future__ import annotations

import math
import re

import polars as pl
import pytest
from diff_helpers import frame, patterned_traces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transitions_strategies import frame_of, raw_traces

from quicsm.compare.diff import DiffResult, diff
from quicsm.compare.families.policy import adjust, levels
from quicsm.core.errors import InputError
from quicsm.core.frames import empty_transitions
from quicsm.render.diff_format import to_markdown, to_table
from quicsm.render.findings import finding_sentence, sentences
from quicsm.stats import significance as sig
from quicsm.stats.overdispersion import benjamini_hochberg
from quicsm.testing.synthetic import (
    Profile,
    generate_transitions,
    lossy_profile,
    stratified_groups,
)

FAST = {"permutations": 199}
FRAMES = ("states", "sources", "edges", "dwell", "invariants")


def _same_group(df: pl.DataFrame) -> DiffResult:
    return diff(df, df.clone(), **FAST)  # type: ignore[arg-type]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_traces(max_traces=6, max_len=8))
def test_diff_of_a_group_with_itself_reports_nothing(traces: list) -> None:  # type: ignore[type-arg]
    result = _same_group(frame_of(traces))
    assert not result.any_significant
    assert result.findings() == []
    assert all(d == 0.0 for d in result.states["difference"].drop_nans().to_list())
    assert all(d == 0.0 for d in result.edges["difference"].drop_nans().to_list())
    assert result.invariants.height == 0
    assert all(v == [] for v in result.presence.values())
    for name in FRAMES:
        p = getattr(result, name)["p_value"].drop_nulls()
        assert (p >= 0.999999).all(), name


def _by_key(df: pl.DataFrame, key: list[str]) -> dict[tuple[str, ...], dict]:  # type: ignore[type-arg]
    return {tuple(r[k] for k in key): r for r in df.iter_rows(named=True)}


def _close(x: float | None, y: float | None) -> bool:
    if x is None or y is None:
        return x is None and y is None
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)


def assert_mirrored(ab: DiffResult, ba: DiffResult) -> None:
    """Every signed quantity flips, every p-value and verdict stays."""
    for name, key, signed, swapped in (
        ("states", ["state"], ["difference"], [("a_fraction", "b_fraction"), ("n_a", "n_b")]),
        (
            "edges",
            ["source", "target"],
            ["difference"],
            [("a_probability", "b_probability"), ("a_count", "b_count")],
        ),
        ("sources", ["source"], [], [("a_count", "b_count"), ("n_a", "n_b")]),
        ("dwell", ["state"], ["log2_ratio"], [("a_median_ms", "b_median_ms")]),
    ):
        x, y = _by_key(getattr(ab, name), key), _by_key(getattr(ba, name), key)
        assert x.keys() == y.keys(), name
        for k, r in x.items():
            s = y[k]
            for col in signed:
                assert _close(r[col], None if s[col] is None else -s[col]), (name, k, col)
            for c1, c2 in swapped:
                assert _close(r[c1], s[c2]), (name, k, c1)
            assert _close(r["p_value"], s["p_value"]), (name, k)
            assert r["significant"] == s["significant"], (name, k)
            if name == "states" and r["p_value"] is not None:
                assert _close(r["ci_low"], -s["ci_high"]) and _close(r["ci_high"], -s["ci_low"])
    flip = {"a": "b", "b": "a"}
    inv_ab = {
        (r["kind"], r["a"], r["b"], r["holds_in"]) for r in ab.invariants.iter_rows(named=True)
    }
    inv_ba = {
        (r["kind"], r["a"], r["b"], flip[r["holds_in"]])
        for r in ba.invariants.iter_rows(named=True)
    }
    assert inv_ab == inv_ba
    assert ab.presence["states_only_a"] == ba.presence["states_only_b"]
    assert ab.presence["edges_only_b"] == ba.presence["edges_only_a"]
    assert ab.any_significant == ba.any_significant


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_traces(max_traces=7, max_len=8), raw_traces(max_traces=7, max_len=8))
def test_swapping_groups_flips_every_sign(a: list, b: list) -> None:  # type: ignore[type-arg]
    fa, fb = frame_of(a), frame_of(b)
    assert_mirrored(diff(fa, fb, **FAST), diff(fb, fa, **FAST))  # type: ignore[arg-type]


def test_swapping_groups_flips_every_sign_with_sampled_permutations() -> None:
    fa = generate_transitions(14, seed=1)
    fb = generate_transitions(17, seed=2)
    assert_mirrored(diff(fa, fb, permutations=299), diff(fb, fa, permutations=299))


def test_changed_transition_is_flagged_and_unchanged_ones_are_not() -> None:
    base = Profile()
    # per observed exit of Recovery (the end of a trace is censoring, not an exit): 0.86 / 0.95
    # = 0.91 in A, 0.4 / 0.79 = 0.51 in B
    changed = base.with_transition("Recovery", "CongestionAvoidance", 0.4)
    a = generate_transitions(60, seed=11, profile=base)
    b = generate_transitions(60, seed=12, profile=changed)
    # the exploratory family's share of α (a fifth) over its tests needs p below 0.001: more
    # random splits than 999 can say so
    r = diff(a, b, permutations=4999)
    edge = r.edges.filter(
        (pl.col("source") == "Recovery") & (pl.col("target") == "CongestionAvoidance")
    ).row(0, named=True)
    assert edge["significant"] and edge["difference"] < -0.2
    # fewer than FEW_TRACES traces per group visit Recovery: the z is permuted over traces
    assert edge["test"] == "permuted z" and edge["family"] == "exploratory"
    # the outgoing distributions are described and tested transition by transition
    assert r.sources["p_value"].null_count() == r.sources.height
    # exits of states whose behaviour did not change (and that have no hidden phase mixing
    # with changed ones) stay non-significant, and no dwell time moved
    unchanged = [
        "SlowStart",
        "CongestionAvoidance",
        "CongestionAvoidanceMaxed",
        "ApplicationLimited",
    ]
    assert not r.edges.filter(pl.col("source").is_in(unchanged))["significant"].any()
    assert not r.dwell["significant"].any()
    # the headline names the changed edge
    assert any("Recovery → CongestionAvoidance" in text for text in sentences(r))


def test_changed_dwell_time_is_flagged_and_unchanged_ones_are_not() -> None:
    base = Profile()
    slower = base.with_dwell("Recovery", 240.0)  # 60 ms by default
    a = generate_transitions(40, seed=21, profile=base)
    b = generate_transitions(40, seed=22, profile=slower)
    r = diff(a, b, permutations=999)
    rec = r.dwell.filter(pl.col("state") == "Recovery").row(0, named=True)
    assert rec["significant"] and rec["log2_ratio"] > 1.0
    assert not r.dwell.filter(pl.col("state") != "Recovery")["significant"].any()
    assert not r.edges["significant"].any()
    assert not r.sources["significant"].any()
    share = r.states.filter(pl.col("state") == "Recovery").row(0, named=True)
    assert share["significant"] and share["difference"] > 0
    # ranked by effect size: the changed state has the largest time-share difference
    assert r.states["state"][0] == "Recovery"


def test_false_positive_rate_on_identical_profiles_is_small() -> None:
    """Two groups drawn from the same profile: a repetition with any significant finding is a
    false positive. Every family is Holm-corrected at alpha = 0.01, so the rate per repetition
    should stay around a few percent; 30 repetitions with more than 4 such runs would mean the
    tests are miscalibrated (binomial tail probability < 0.5% at a true rate of 5%)."""
    runs = 30
    bad = 0
    for rep in range(runs):
        a = generate_transitions(12, seed=1000 + 2 * rep)
        b = generate_transitions(12, seed=1001 + 2 * rep)
        if diff(a, b, permutations=499).any_significant:
            bad += 1
    assert bad <= 4


def test_too_few_traces_gives_no_p_value_and_says_why() -> None:
    a = frame(patterned_traces(2, prefix="a", app_ms=30), file="a.sqlog")
    b = frame(patterned_traces(5, prefix="b", app_ms=300), file="b.sqlog")
    r = diff(a, b)
    assert r.states["p_value"].null_count() == r.states.height
    assert set(r.states["note"].to_list()) == {"n=2 < 3: no test"}
    assert not r.any_significant
    assert "n=2 < 3: no test" in to_table(r)
    # (20: no → TERMINAL row, a trace's end being censoring)
    assert "20 of 20 tests not run (n=1 < 3: no test, n=2 < 3: no test)" in to_markdown(r)


def test_states_ranked_by_effect_size_and_sentence_format() -> None:
    a = frame(patterned_traces(8, prefix="a", app_ms=30), file="a.sqlog")
    b = frame(patterned_traces(8, prefix="b", app_ms=400), file="b.sqlog")
    r = diff(a, b, names=("v1", "v2"))
    diffs = [abs(d) for d in r.states["difference"].to_list()]
    assert diffs == sorted(diffs, reverse=True)
    top = r.findings()[0]
    assert top.kind == "state" and top.subject == "ApplicationLimited"
    text = finding_sentence(top, r)
    assert text.startswith("ApplicationLimited: ")
    assert top.family == "primary"
    assert "→" in text
    assert "of time (primary, Holm-adjusted p < 0.001, n = 8 vs 8)" in text


def test_states_only_in_one_group_are_reported() -> None:
    a = frame(patterned_traces(6, prefix="a", app_ms=30, tlp=False), file="a.sqlog")
    b = frame(patterned_traces(6, prefix="b", app_ms=30, tlp=True), file="b.sqlog")
    r = diff(a, b)
    assert r.presence["states_only_b"] == ["TailLossProbe"]
    assert "TailLossProbe → Recovery" in r.presence["edges_only_b"]
    # a state seen in 3 of B's 6 traces and none of A's is a fact, not a finding: it is
    # said in "What changed" only when its test says it is more than chance
    assert not r.states.filter(pl.col("state") == "TailLossProbe")["significant"].item()
    assert not any("TailLossProbe" in text for text in sentences(r))


def test_a_state_only_in_one_group_is_a_finding_when_its_test_passes() -> None:
    a = frame(patterned_traces(12, prefix="a", app_ms=30, tlp=False), file="a.sqlog")
    b = frame(
        [
            (n, s + [(e, "TailLossProbe")], e + 30.0)
            for n, s, e in patterned_traces(12, prefix="b", app_ms=30, tlp=False)
        ],
        file="b.sqlog",
    )
    r = diff(a, b, names=("v1", "v2"))
    found = [f for f in r.findings() if f.subject == "TailLossProbe"]
    assert found and "appears only in v2" in finding_sentence(found[0], r)


def test_bad_options_are_clean_errors() -> None:
    a = generate_transitions(3, seed=1)
    with pytest.raises(InputError, match="^group B has no traces: nothing to compare$"):
        diff(a, empty_transitions())
    with pytest.raises(InputError, match="^group old has no traces"):
        diff(empty_transitions(), a, names=("old", "new"))
    with pytest.raises(InputError, match="alpha must be between 0 and 1"):
        diff(a, a, alpha=1.5)
    with pytest.raises(InputError, match="transitions frames"):
        diff(a, "not a frame")  # type: ignore[arg-type]


def test_public_names_stay_functions_after_the_modules_are_imported() -> None:
    import quicsm.compare.diff
    import quicsm.model.inference

    a = generate_transitions(4, seed=1)
    assert callable(quicsm.diff) and callable(quicsm.infer)
    assert isinstance(quicsm.diff(a, a), DiffResult)
    assert quicsm.compare.diff.diff is quicsm.diff
    assert quicsm.model.inference.infer is quicsm.infer


def test_two_files_with_the_same_trace_id_stay_two_traces() -> None:
    """Trace ids need only be unique per file: the key is made before normalising, so two
    files that both call their trace ``t1`` are two traces, each starting in Init."""
    steps_1 = [(0.0, "SlowStart"), (10.0, "Recovery"), (30.0, "CongestionAvoidance")]
    steps_2 = [(0.0, "SlowStart"), (5.0, "CongestionAvoidance"), (40.0, "ApplicationLimited")]
    rows = [
        {"file": f, "trace": "t1", "time_ms": t, "state": st_, "end_ms": 60.0}
        for f, steps in (("x.sqlog", steps_1), ("y.sqlog", steps_2))
        for t, st_ in steps
    ]
    a = pl.DataFrame(rows)
    r = diff(a, a, min_n=2)
    assert r.n_a == 2
    edges = {(e["source"], e["target"]): e["a_count"] for e in r.edges.iter_rows(named=True)}
    # each trace's own chain, not an interleaving of the two files' rows
    assert edges[("INITIAL", "Init")] == 2
    assert edges[("Init", "SlowStart")] == 2
    assert edges[("SlowStart", "Recovery")] == 1
    assert edges[("SlowStart", "CongestionAvoidance")] == 1
    assert ("CongestionAvoidance", "SlowStart") not in edges


def test_invariants_from_initial_are_compared() -> None:
    """``INITIAL AlwaysFollowedBy X`` (every trace reaches X) is mined like any other invariant
    and compared: here every trace of A reaches TailLossProbe, half of B's do not."""
    # patterned traces visit TailLossProbe when their index is even
    every = [t for i, t in enumerate(patterned_traces(12, prefix="a", app_ms=30)) if i % 2 == 0]
    a = frame(every, file="a.sqlog")
    b = frame(patterned_traces(6, prefix="b", app_ms=30), file="b.sqlog")
    r = diff(a, b)
    inv = r.invariants.filter(
        (pl.col("a") == "INITIAL")
        & (pl.col("kind") == "AlwaysFollowedBy")
        & (pl.col("b") == "TailLossProbe")
    )
    assert inv.height == 1
    row = inv.row(0, named=True)
    assert row["holds_in"] == "a"
    assert row["violations_a"] == 0 and row["violations_b"] == 3


def _strata_diff(seed: int, *, effect: bool, stratified: bool) -> DiffResult:
    # the lossy condition loops through long Recovery episodes
    clean = Profile().with_transition("CongestionAvoidance", "Recovery", 0.1)
    lossy = lossy_profile().with_dwell("Recovery", 300.0)
    b_profiles = None
    if effect:  # within both strata, B's Recovery episodes last four times as long
        b_profiles = {
            "clean": clean.with_dwell("Recovery", 240.0),  # 60 ms by default
            "lossy": lossy.with_dwell("Recovery", 1200.0),
        }
    a, b, strata = stratified_groups(
        {"lossy": 18, "clean": 6},
        {"lossy": 6, "clean": 18},
        seed=seed,
        profiles={"clean": clean, "lossy": lossy},
        b_profiles=b_profiles,
    )
    return diff(a, b, strata=strata if stratified else None, within=("scenario",), **FAST)


def test_confounded_mix_without_a_within_stratum_effect_finds_nothing_when_stratified() -> None:
    """A runs mostly the lossy condition, B mostly the clean one, with identical behaviour
    inside each: pooled, the mix shows up as differences; compared within strata, nothing."""
    pooled = _strata_diff(2, effect=False, stratified=False)
    assert pooled.any_significant
    for seed in (3, 4, 5):
        r = _strata_diff(seed, effect=False, stratified=True)
        assert not r.any_significant, sentences(r)
        assert r.strata == {"clean": (6, 18), "lossy": (18, 6)}


def test_confounded_mix_with_a_within_stratum_effect_finds_it() -> None:
    r = _strata_diff(3, effect=True, stratified=True)
    assert r.any_significant
    assert "Recovery" in {f.subject for f in r.findings() if f.kind in ("state", "dwell")}


def test_primary_family_under_holm_and_the_rest_under_bh() -> None:
    """Primary rows (time shares, outcomes) form one Holm family; every other tested row one
    Benjamini-Hochberg family; the tables, the findings and any_significant agree."""
    a = frame(patterned_traces(8, prefix="a", app_ms=30), file="a.sqlog")
    b = frame(patterned_traces(8, prefix="b", app_ms=400), file="b.sqlog")
    r = diff(a, b, names=("v1", "v2"))
    rows = [row for f in r.frames() for row in f.iter_rows(named=True)]
    tested = [row for row in rows if row["p_unadjusted"] is not None]
    assert r.n_tests == len(tested)
    primary = [row for row in tested if row["family"] == "primary"]
    assert {row.get("state") for row in primary} == set(r.states["state"])
    inside = [row for row in primary if "cannot reach significance" not in (row["note"] or "")]
    assert r.settings["family"] == len(inside)
    # α split between the families: Holm's p-values, divided by the primary family's share
    share = levels(r.alpha)["primary"] / r.alpha
    adjusted = [min(1.0, p / share) for p in sig.holm([row["p_unadjusted"] for row in inside])]
    assert [row["p_value"] for row in inside] == pytest.approx(adjusted)
    rest = [row for row in tested if row["family"] == "exploratory"]
    reach = [row for row in rest if "cannot reach significance" not in (row["note"] or "")]
    # the two exits of a source with two exits are one test, counted once
    tests: dict[object, list[dict[str, object]]] = {}
    for row in reach:
        one = "one test with" in (row["note"] or "")
        tests.setdefault(("edges", row["source"]) if one else id(row), []).append(row)
    assert all(len(t) == 1 or len({row["p_unadjusted"] for row in t}) == 1 for t in tests.values())
    assert r.settings["exploratory"] == len(tests)
    firsts = [t[0] for t in tests.values()]
    rest_share = levels(r.alpha)["exploratory"] / r.alpha
    bh = benjamini_hochberg([row["p_unadjusted"] for row in firsts])
    bh = [min(1.0, p / rest_share) for p in bh if p is not None]
    assert [row["p_value"] for row in firsts] == pytest.approx(bh)
    for t in tests.values():
        assert {row["p_value"] for row in t} == {t[0]["p_value"]}
    significant = {bool(row["significant"]) for row in rows}
    assert r.any_significant == (True in significant)
    assert r.primary_significant == any(row["significant"] for row in primary)
    # findings: every primary one before every exploratory one
    fams = [f.family for f in r.findings()]
    assert fams == sorted(fams, key=lambda x: x != "primary")


def test_primary_family_can_be_named() -> None:
    a = frame(patterned_traces(8, prefix="a", app_ms=30), file="a.sqlog")
    b = frame(patterned_traces(8, prefix="b", app_ms=400), file="b.sqlog")
    r = diff(a, b, primary=["edges:SlowStart->Recovery", "dwell"])
    edge = r.edges.filter((pl.col("source") == "SlowStart") & (pl.col("target") == "Recovery"))
    assert edge["family"].to_list() == ["primary"]
    assert set(r.dwell["family"]) == {"primary"}
    assert set(r.states["family"]) == {"exploratory"}
    with pytest.raises(InputError, match="--primary 'state:Recovery'"):
        diff(a, b, primary=["state:Recovery"])
    # every significant row is a finding, and every tested finding is a significant row
    assert len([f for f in r.findings() if f.p_value is not None]) >= sum(
        bool(row["significant"])
        for f in (r.states, r.edges, r.dwell)
        for row in f.iter_rows(named=True)
    )


def test_outcomes_are_tested_per_cell_in_the_same_family() -> None:
    a = frame(patterned_traces(6, prefix="a", app_ms=30), file="a.sqlog")
    b = frame(patterned_traces(6, prefix="b", app_ms=30), file="b.sqlog")
    rows = [
        {"file": f, "trace": t, "cell": "jitter", "metric": "completion_ms", "value": v}
        for f, df, base in (("a.sqlog", a, 1000.0), ("b.sqlog", b, 100.0))
        for t, v in zip(sorted(df["trace"].unique()), [base + i for i in range(6)], strict=False)
    ]
    r = diff(a, b, outcomes=pl.DataFrame(rows))
    row = r.outcomes.row(0, named=True)
    assert row["cell"] == "jitter" and row["test"] == "permutation (exact)"
    assert row["change"] == pytest.approx((102.5 - 1002.5) / 1002.5)
    assert row["p_unadjusted"] == pytest.approx(2 / 924)  # 6 vs 6, completely separated


def test_time_shares_can_decide_at_five_traces_per_group() -> None:
    """The primary family's time shares are tested by Welch's t over traces: at 5 vs 5 and the
    CLI's α = 0.01 a large change of a share is significant after Holm (an exact permutation
    test could not go below 2/252 there), and the same groups compared with themselves are
    not."""
    a = frame(patterned_traces(5, prefix="a", app_ms=30), file="a.sqlog")
    b = frame(patterned_traces(5, prefix="b", app_ms=400), file="b.sqlog")
    r = diff(a, b, alpha=0.01)
    app = r.states.filter(pl.col("state") == "ApplicationLimited").row(0, named=True)
    assert app["test"] == "welch" and app["family"] == "primary"
    assert app["significant"] and app["p_value"] < 0.01
    assert r.primary_significant
    assert not diff(a, a.clone(), alpha=0.01).primary_significant


def test_a_source_with_two_exits_is_one_test() -> None:
    """Both exits of a two-exit source carry the same p-value, say so, and count once in the
    exploratory family (CongestionAvoidance here: to TailLossProbe or ApplicationLimited)."""
    a = frame(patterned_traces(8, prefix="a", app_ms=30), file="a.sqlog")
    b = frame(patterned_traces(8, prefix="b", app_ms=400, tlp=False), file="b.sqlog")
    b = pl.concat([b, frame(patterned_traces(4, prefix="c", app_ms=40), file="b.sqlog")])
    r = diff(a, b, **FAST)  # type: ignore[arg-type]
    pairs = r.edges.filter(pl.col("note").str.contains("one test with"))
    assert pairs.height >= 2
    for source, rows in pairs.group_by("source"):
        assert rows.height == 2
        assert rows["p_value"].n_unique() == 1 and rows["p_unadjusted"].n_unique() == 1
        targets = set(rows["target"])
        for note, target in zip(rows["note"], rows["target"], strict=True):
            (other,) = targets - {target}
            assert f"one test with {source[0]} → {other}" in note


def test_within_strata_transitions_are_tested_transition_by_transition() -> None:
    """Within strata, a transition is tested on every transition of every stratum (each
    stratum's beta-binomial difference, combined), not on one share per trace: a change of
    CongestionAvoidance → Recovery inside both strata is found, and the same mix without it
    is not."""
    lossy = lossy_profile().with_transition("CongestionAvoidance", "Recovery", 0.5)
    profiles = {"near": lossy, "far": lossy.with_dwell("Recovery", 200.0)}
    changed = {
        k: p.with_transition("CongestionAvoidance", "Recovery", 0.9) for k, p in profiles.items()
    }
    for effect in (False, True):
        a, b, strata = stratified_groups(
            {"near": 25, "far": 25},
            {"near": 25, "far": 25},
            seed=11,
            profiles=profiles,
            b_profiles=changed if effect else None,
        )
        r = diff(a, b, strata=strata, within=("scenario",), **FAST)  # type: ignore[arg-type]
        row = r.edges.filter(
            (pl.col("source") == "CongestionAvoidance") & (pl.col("target") == "Recovery")
        ).row(0, named=True)
        assert row["test"] == "beta-binomial (stratified)", row
        assert ", 2 strata" in row["note"], row
        assert row["significant"] == effect, row


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_traces(max_traces=6, max_len=8), raw_traces(max_traces=6, max_len=8))
def test_a_traces_end_is_censoring_not_a_transition(a: list, b: list) -> None:  # type: ignore[type-arg,unused-ignore]
    """No → TERMINAL row is tested or listed as seen in one group only: the end of a recording
    is not a way out of its last state. Every probability is per observed exit."""
    r = diff(frame_of(a), frame_of(b), **FAST)  # type: ignore[arg-type]
    assert "TERMINAL" not in set(r.edges["target"].to_list())
    assert not any("TERMINAL" in e for e in r.presence["edges_only_a"] + r.presence["edges_only_b"])
    for row in r.sources.iter_rows(named=True):
        exits = r.edges.filter(pl.col("source") == row["source"])
        assert exits["a_count"].sum() == row["a_count"]
        assert exits["b_count"].sum() == row["b_count"]


def test_groups_ending_in_different_states_differ_in_no_transition() -> None:
    """The same chain in both groups, but A's traces stop in CongestionAvoidance and B's in
    Recovery (B's recordings cut one state earlier): no transition differs."""
    a_traces = patterned_traces(8, prefix="a", app_ms=30, tlp=False)
    b_traces = [
        (n, steps[:2], steps[2][0])
        for n, steps, _ in patterned_traces(8, prefix="b", app_ms=30, tlp=False)
    ]
    r = diff(frame(a_traces, file="a.sqlog"), frame(b_traces, file="b.sqlog"), **FAST)  # type: ignore[arg-type]
    assert not r.edges["significant"].any()
    assert set(zip(r.edges["source"], r.edges["target"], strict=True)) >= {
        ("SlowStart", "Recovery")
    }


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("edges:Recovery->Slowstart", "names nothing; did you mean Recovery->SlowStart"),
        ("states:Recovry", "names nothing; did you mean Recovery"),
        ("outcomes:completion@jitter", "did you mean completion_ms"),
        ("invariants:SlowStart AlwaysFollowedby Recovery", "SlowStart AlwaysFollowedBy Recovery"),
        ("edges:Recovery->TERMINAL", "a trace's end is not a transition"),
    ],
)
def test_a_primary_subject_that_names_nothing_is_refused_with_the_nearest_names(
    item: str, message: str
) -> None:
    a = frame(patterned_traces(4, prefix="a", app_ms=30), file="a.sqlog")
    with pytest.raises(InputError, match=f"--primary '{re.escape(item)}': .*{re.escape(message)}"):
        diff(a, a.clone(), primary=[item])


def test_a_primary_subject_absent_from_these_traces_is_refused() -> None:
    a = frame(patterned_traces(4, prefix="a", app_ms=30, tlp=False), file="a.sqlog")
    with pytest.raises(InputError, match="names nothing in these traces .*SlowStart->Recovery"):
        diff(a, a.clone(), primary=["edges:TailLossProbe->Recovery"])
    r = diff(a, a.clone(), primary=["edges:SlowStart → Recovery"], **FAST)  # type: ignore[arg-type]
    assert r.edges.filter(pl.col("family") == "primary").height == 1


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_every_name_a_primary_subject_may_take_is_accepted_and_one_letter_off_is_not(
    data: st.DataObject,
) -> None:
    from quicsm.compare.families.policy import _vocabulary, parse_primary

    family = data.draw(st.sampled_from(["states", "edges", "dwell"]))
    names = _vocabulary(family, ())
    name = data.draw(st.sampled_from(names))
    assert parse_primary([f"{family}:{name}"]) == (f"{family}:{name}",)
    wrong = name[:-1] + ("x" if name[-1] != "x" else "y")
    with pytest.raises(InputError, match=f"--primary '{family}:"):
        parse_primary([f"{family}:{wrong}"])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=6),
    st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=12),
    st.sampled_from([0.01, 0.05, 0.1]),
)
def test_alpha_is_split_between_the_families(
    first: list[float], rest: list[float], alpha: float
) -> None:
    """The primary family is tested at its share of α, the exploratory one at the rest (their
    sum is α, so anything significant is a false positive with probability at most α); each
    row's p-value is adjusted for its family and that share, so significant means p < α."""
    split = levels(alpha)
    assert split["primary"] + split["exploratory"] == pytest.approx(alpha)
    assert 0 < split["exploratory"] < split["primary"] < alpha

    def rows(ps: list[float], key: str) -> list[dict[str, object]]:
        return [
            {key: f"s{i}", "p_unadjusted": p, "p_min": 0.0, "note": None} for i, p in enumerate(ps)
        ]

    families = {name: [] for name in ("outcomes", "sources", "dwell", "invariants")}
    families["states"] = rows(first, "state")
    families["edges"] = [{**r, "target": "t", "source": r["state"]} for r in rows(rest, "state")]
    adjust(families, alpha=alpha, primary=("states",))  # type: ignore[arg-type]
    holm = sig.holm(first)
    bh = benjamini_hochberg(rest)
    for r, p in zip(families["states"], holm, strict=True):
        assert r["family"] == "primary"
        assert r["significant"] == (p < split["primary"])
        assert r["p_value"] == pytest.approx(min(1.0, p * alpha / split["primary"]))
    for r, p in zip(families["edges"], bh, strict=True):
        assert r["family"] == "exploratory" and p is not None
        assert r["significant"] == (p < split["exploratory"])
    for r in families["states"] + families["edges"]:
        assert r["significant"] == (r["p_value"] < alpha) or math.isclose(r["p_value"], alpha)


def test_strata_keyed_by_group_where_both_groups_hold_the_same_trace_key() -> None:
    """Two tables whose traces are numbered alike: a stratum keyed ``(group, file, trace)``
    is the stratum of that group's trace, a ``(file, trace)`` one of either group's; a key of
    another shape is an error naming it."""
    a = generate_transitions(6, seed=7).with_columns(pl.lit("t.csv").alias("file"))
    b = generate_transitions(6, seed=8).with_columns(
        pl.lit("t.csv").alias("file"),
        pl.col("trace").cast(pl.String).str.replace("syn-8-", "syn-7-"),
    )
    ids = sorted(a["trace"].unique())
    assert ids == sorted(b["trace"].unique())  # the same keys in both groups
    # A's first four traces ran in one condition, B's first two: per group
    strata = {("a", "t.csv", t): "x" if i < 4 else "y" for i, t in enumerate(ids)}
    strata |= {("b", "t.csv", t): "x" if i < 2 else "y" for i, t in enumerate(ids)}
    r = diff(a, b, strata=strata, within=("scenario",), **FAST)
    assert r.strata == {"x": (4, 2), "y": (2, 4)}
    # a group's own entry wins over the shared one
    shared = {("t.csv", t): "one" for t in ids} | {("b", "t.csv", ids[0]): "two"}
    r = diff(a, b, strata=shared, within=("scenario",), **FAST)
    assert r.strata == {"one": (6, 5), "two": (0, 1)}
    with pytest.raises(InputError, match="group"):
        diff(a, b, strata={("c", "t.csv", "x"): "s"}, **FAST)
