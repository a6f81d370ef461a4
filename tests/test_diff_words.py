"""The words of a comparison come from the tests it ran: the header's primary family, the
``[PRIMARY]`` marks, the report's dwell caption and its Methods (issue: they used to name the
default family and a test no row used)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from diff_helpers import frame, patterned_traces, write_group
from hypothesis import HealthCheck, given, settings
from transitions_strategies import frame_of, raw_traces

from quicsm.compare.diff import diff
from quicsm.compare.load import compare_paths
from quicsm.render.diff_format import to_dict, to_markdown, what_changed
from quicsm.render.test_words import TEST_WORDS, used_tests
from quicsm.report import build_report
from quicsm.testing.synthetic import Profile, lossy_profile, stratified_groups

FAMILIES = ("outcomes", "states", "edges", "dwell", "invariants")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_traces(max_traces=7, max_len=9), raw_traces(max_traces=7, max_len=9))
def test_every_test_a_row_names_has_words(a: list, b: list) -> None:  # type: ignore[type-arg]
    r = diff(frame_of(a), frame_of(b), permutations=99)  # type: ignore[arg-type]
    for name in used_tests([getattr(r, f) for f in FAMILIES]):
        assert name in TEST_WORDS, name


def test_stratified_tests_have_words() -> None:
    clean = Profile()
    lossy = lossy_profile()
    a, b, strata = stratified_groups(
        {"lossy": 8, "clean": 4},
        {"lossy": 4, "clean": 8},
        seed=3,
        profiles={"clean": clean, "lossy": lossy},
    )
    r = diff(a, b, strata=strata, within=("scenario",), permutations=99)
    used = used_tests([getattr(r, f) for f in FAMILIES])
    assert any(t.startswith("stratified") or "stratified" in t for t in used), used
    assert set(used) <= set(TEST_WORDS)


def _pair() -> tuple[pl.DataFrame, pl.DataFrame]:
    a = frame(patterned_traces(8, prefix="a", app_ms=30), file="a.sqlog")
    b = frame(patterned_traces(8, prefix="b", app_ms=400, recovery_ms=40), file="b.sqlog")
    return a, b


def _header(md: str) -> str:
    return md.split("\n\n")[1]


def test_the_header_names_the_primary_family_actually_used() -> None:
    a, b = _pair()
    default = to_markdown(diff(a, b))
    assert "primary tests (outcomes per stratum" not in _header(default)  # no outcomes given
    assert "primary tests (time share per state) under Holm" in _header(default)
    named = diff(a, b, primary=["edges:SlowStart->Recovery", "dwell:Recovery"])
    head = _header(to_markdown(named))
    assert "primary tests (transition SlowStart → Recovery, dwell time in Recovery)" in head
    assert "time share" not in head
    assert to_dict(named)["settings"]["policy"] in head


def test_primary_marks_only_on_primary_rows() -> None:
    """With --primary dwell:Recovery the time shares are exploratory: their significant
    changes carry no [PRIMARY] mark, the dwell change does."""
    a, b = _pair()
    r = diff(a, b, primary=["dwell:Recovery"])
    lines = what_changed(r)
    marked = [x for x in lines if x.startswith("[PRIMARY]")]
    primary = [f for f in r.findings() if f.family == "primary"]
    assert len(marked) == len(primary) >= 1
    assert all("dwell" in x for x in marked), marked
    assert any("of time (exploratory" in x for x in lines if not x.startswith("[PRIMARY]"))


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("words")
    write_group(root / "v1", patterned_traces(8, prefix="a", app_ms=30), labels={"version": "1"})
    write_group(
        root / "v2",
        patterned_traces(8, prefix="b", app_ms=300, recovery_ms=40),
        labels={"version": "2"},
    )
    comp = compare_paths([str(root / "v1")], [str(root / "v2")])
    return build_report([comp], generated_at="2026-01-01 00:00 UTC", command="quicsm report")


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace("&#x27;", "'")


def test_the_dwell_caption_names_the_dwell_tests_used(report: str) -> None:
    caption = re.search(r"Dwell time of each visit:.*?</p>", report, re.S)
    assert caption is not None
    text = _text(caption.group(0))
    # the same traces through the library: the dwell rows' own tests
    a = frame(patterned_traces(8, prefix="a", app_ms=30), file="a")
    b = frame(patterned_traces(8, prefix="b", app_ms=300, recovery_ms=40), file="b")
    used = used_tests([diff(a, b).dwell])
    assert "random effects" in used
    for name in TEST_WORDS:
        if name in ("welch", "fisher", "permutation"):
            continue  # words contained in other tests' words
        assert (TEST_WORDS[name] in text) == (name in used), name


def test_methods_name_every_test_used_and_the_censoring(report: str) -> None:
    methods = _text(report.split("Methods</h3>", 1)[1])
    assert "the end of a trace is censoring" in methods
    assert "permuted z" not in methods or TEST_WORDS["permuted z"] in methods
    # the patterned groups: 8 vs 8 traces, so transitions use the permuted z or Fisher's test
    for words in (TEST_WORDS["welch"], TEST_WORDS["random effects"]):
        assert words in methods
    assert "primary family: time share per state, under Holm" in methods


def test_report_dwell_caption_follows_the_rows(tmp_path: Path) -> None:
    """One visit per trace and state: no within-trace variance, so Mann-Whitney is the test,
    and the caption says so."""
    one = [(n, s[:3], e) for n, s, e in patterned_traces(6, prefix="a", app_ms=30, tlp=False)]
    two = [
        (n, s[:3], e)
        for n, s, e in patterned_traces(6, prefix="b", app_ms=30, recovery_ms=60, tlp=False)
    ]
    write_group(tmp_path / "v1", one, labels={"version": "1"})
    write_group(tmp_path / "v2", two, labels={"version": "2"})
    comp = compare_paths([str(tmp_path / "v1")], [str(tmp_path / "v2")])
    html = build_report([comp], generated_at="2026-01-01 00:00 UTC", command="quicsm report")
    caption = re.search(r"Dwell time of each visit:.*?</p>", html, re.S)
    assert caption is not None and TEST_WORDS["mann-whitney"] in _text(caption.group(0))


def _cut(traces: list, keep: int) -> list:  # type: ignore[type-arg]
    return [(n, steps[:keep], steps[keep][0]) for n, steps, _ in traces]


def test_groups_of_very_different_lengths_are_said_to_differ_above_the_findings() -> None:
    """A's traces visit 5 or 7 states, B's 2: what grows with length is compared only between
    traces of similar length (none here: no test), and every view says so first."""
    a = frame(patterned_traces(8, prefix="a", app_ms=30), file="a.sqlog")
    b = frame(_cut(patterned_traces(8, prefix="b", app_ms=30), 1), file="b.sqlog")
    r = diff(a, b)
    span = r.settings["lengths"]
    assert span["differ"] and span["ratio"] > 2
    assert r.states["p_value"].null_count() == r.states.height
    assert set(r.states["note"]) == {"no stratum with traces in both groups: no test"}
    md = to_markdown(r)
    caution = "> **Caution:** the traces of A and B differ in length (median"
    assert caution in md and md.index(caution) < md.index("### What changed")
    assert any("differ in length" in c for c in to_dict(r)["caveats"])
    # groups of similar lengths: no such caution, time shares tested over every trace
    same = diff(a, frame(patterned_traces(8, prefix="c", app_ms=40), file="c.sqlog"))
    assert not same.settings["lengths"]["differ"]
    assert "differ in length" not in to_markdown(same)
    assert same.states["test"].to_list() == ["welch"] * same.states.height
