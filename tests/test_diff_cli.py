"""``quicsm diff`` end to end on qlog files with run.json labels: --vs, --by, --where, formats,
exit codes and error messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from diff_helpers import patterned_traces, write_group

from quicsm.cli import main
from quicsm.cli.diff import EXIT_SIGNIFICANT


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 8 traces per group: 12870 splits, so the tests are Welch's and the G-test and can reach
    # significance among the comparison's ~30 tests (6 vs 6 exact tests cannot go below 2/924)
    root = tmp_path_factory.mktemp("corpus")
    write_group(
        root / "v1",
        patterned_traces(8, prefix="a", app_ms=30),
        labels={"stack": "demo", "version": "1.9", "scenario": "bulk"},
    )
    write_group(
        root / "v2",
        patterned_traces(8, prefix="b", app_ms=300),
        labels={"stack": "demo", "version": "1.10", "scenario": "bulk"},
    )
    write_group(
        root / "v3",
        patterned_traces(8, prefix="c", app_ms=30),
        labels={"stack": "demo", "version": "1.11", "scenario": "jitter"},
    )
    return root


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["diff", *args])
    return result.exit_code, result.stdout, result.stderr


def test_vs_groups_and_json(corpus: Path) -> None:
    code, out, _ = run(str(corpus / "v1"), "--vs", str(corpus / "v2"), "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["groups"]["a"]["n_traces"] == 8 and doc["groups"]["b"]["n_traces"] == 8
    top = doc["states"][0]
    assert top["state"] == "ApplicationLimited" and top["significant"] and top["difference"] > 0
    assert doc["summary"][0].startswith("ApplicationLimited: ")


def test_vs_takes_several_paths(corpus: Path) -> None:
    code, out, _ = run(
        str(corpus / "v1"), "--vs", str(corpus / "v2"), str(corpus / "v3"), "--format", "json"
    )
    assert code == 0
    assert json.loads(out)["groups"]["b"]["n_traces"] == 16


def test_by_label_in_natural_order_with_where(corpus: Path) -> None:
    code, out, _ = run(
        str(corpus), "--by", "version", "--where", "scenario=bulk", "--format", "json"
    )
    assert code == 0
    doc = json.loads(out)
    # 1.9 comes before 1.10 (natural order); v3 (scenario=jitter) is filtered out
    assert doc["groups"]["a"]["name"] == "version=1.9"
    assert doc["groups"]["b"]["name"] == "version=1.10"


def test_by_label_with_three_values_gives_consecutive_comparisons(corpus: Path) -> None:
    code, out, _ = run(str(corpus), "--by", "version", "--format", "json")
    assert code == 0
    comps = json.loads(out)["comparisons"]
    names = [(c["groups"]["a"]["name"], c["groups"]["b"]["name"]) for c in comps]
    assert names == [("version=1.9", "version=1.10"), ("version=1.10", "version=1.11")]
    code, out, _ = run(str(corpus), "--by", "version", "--baseline", "1.11", "--format", "json")
    names = [
        (c["groups"]["a"]["name"], c["groups"]["b"]["name"]) for c in json.loads(out)["comparisons"]
    ]
    assert names == [("version=1.11", "version=1.9"), ("version=1.11", "version=1.10")]


def test_table_and_markdown(corpus: Path) -> None:
    code, out, _ = run(str(corpus), "--by", "version", "--where", "scenario=bulk")
    assert code == 0
    assert out.startswith("A = version=1.9 (8 traces), B = version=1.10 (8 traces)")
    lines = out.splitlines()
    assert "ApplicationLimited" in lines[lines.index("What changed:") + 1]
    assert max(len(line) for line in lines if not line.startswith("  ")) <= 100  # prose wrapped
    code, md, _ = run(str(corpus), "--by", "version", "--where", "scenario=bulk", "--format", "md")
    assert md.startswith("## quicsm diff: version=1.10 vs version=1.9")
    assert "| state | version=1.9 | version=1.10 |" in md


def test_exit_code_zero_unless_fail_on_significant(corpus: Path) -> None:
    args = [str(corpus / "v1"), "--vs", str(corpus / "v2")]
    assert run(*args)[0] == 0
    assert run(*args, "--fail-on-significant")[0] == EXIT_SIGNIFICANT
    # nothing significant: v1 vs v3 differ only in labels
    same = [str(corpus / "v1"), "--vs", str(corpus / "v3"), "--fail-on-significant"]
    assert run(*same)[0] == 0


def test_clean_errors(corpus: Path, tmp_path: Path) -> None:
    code, _, err = run(str(corpus / "v1"))
    assert code == 1 and "say how to form the two groups" in err
    code, _, err = run(str(corpus), "--by", "nosuchlabel")
    assert code == 1
    assert "--by nosuchlabel: no trace has the label 'nosuchlabel'; the traces' labels are " in err
    assert "stack, title, vantage, version" in err
    code, _, err = run(str(corpus), "--by", "version", "--where", "scenario")
    assert code == 1 and "--where 'scenario': expected KEY=VALUE" in err
    code, _, err = run(str(corpus / "v1"), "--vs", str(corpus / "v2"), "--where", "version=9")
    assert code == 1 and "no traces with states matching version=9" in err
    code, _, err = run(str(corpus), "--by", "version", "--vs", str(corpus / "v2"))
    assert code == 1 and "not both" in err
    code, _, err = run(str(tmp_path / "missing"), "--vs", str(corpus / "v2"))
    assert code == 1 and "missing" in err
    assert "Traceback" not in err


def test_where_accepts_alternatives_and_confounders_are_named(corpus: Path) -> None:
    # v1 and v2 ran "bulk", v3 ran "jitter": comparing 1.9 with 1.11 mixes in the scenario
    code, out, err = run(
        str(corpus), "--by", "version", "--where", "version=1.9,1.11", "--format", "json"
    )
    assert code == 0
    doc = json.loads(out)
    assert (doc["groups"]["a"]["name"], doc["groups"]["b"]["name"]) == (
        "version=1.9",
        "version=1.11",
    )
    assert (
        "note: the groups also differ in scenario (version=1.9: bulk; version=1.11: jitter)"
        not in err
    )  # one value per group: a property of the groups, not a confounder
    # A ran bulk and jitter, B only bulk: compared within scenario by default, jitter left out
    code, out, err = run(
        str(corpus / "v1"), str(corpus / "v3"), "--vs", str(corpus / "v2"), "--format", "json"
    )
    assert code == 0
    assert "note: compared within scenario (by default, because the groups ran different " in err
    assert "left out, present in one group only: scenario=jitter" in err
    doc = json.loads(out)
    assert doc["within"] == ["scenario"]
    assert doc["strata"] == {"scenario=bulk": {"a": 8, "b": 8}, "scenario=jitter": {"a": 8, "b": 0}}


def test_within_stratifies_and_non_overlapping_strata_are_refused(tmp_path: Path) -> None:
    groups = {
        "a1": ("1.0", "lossy", 30),
        "a2": ("1.0", "clean", 30),
        "b1": ("2.0", "lossy", 300),
        "b2": ("2.0", "clean", 300),
        "c1": ("3.0", "bulk", 30),
        "c2": ("3.0", "jitter", 30),
    }
    for name, (version, scenario, app) in groups.items():
        write_group(
            tmp_path / name,
            patterned_traces(5, prefix=name, app_ms=app),
            labels={"stack": "demo", "version": version, "scenario": scenario},
        )
    a = [str(tmp_path / "a1"), str(tmp_path / "a2")]
    b = [str(tmp_path / "b1"), str(tmp_path / "b2")]
    code, out, err = run(*a, "--vs", *b, "--within", "scenario", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["within"] == ["scenario"]
    assert "compared within scenario (as asked): 2 scenario value(s) in both groups" in err
    top = next(r for r in doc["states"] if r["state"] == "ApplicationLimited")
    # 63,504 splits within the two scenarios, 10 traces a group: random splits within strata
    assert top["test"] == "stratified (random splits)" and top["significant"]
    # strata that do not overlap: refused, naming the confounder
    c = [str(tmp_path / "c1"), str(tmp_path / "c2")]
    code, _, err = run(*a, "--vs", *c)
    assert code == 1
    assert "the groups differ in scenario" in err and "no scenario has traces in both" in err
    assert "--where scenario=VALUE" in err and "Traceback" not in err
    code, _, err = run(*a, "--vs", *b, "--within", "nosuch")
    assert code == 1 and "--within nosuch: no trace of either group has the label" in err


def test_cross_stack_comparison_is_flagged_above_the_findings(tmp_path: Path) -> None:
    for name, stack, app in (("x", "quic-go", 30), ("y", "aioquic", 300)):
        write_group(
            tmp_path / name,
            patterned_traces(8, prefix=name, app_ms=app),
            labels={"stack": stack, "version": f"{name}1", "scenario": "bulk"},
        )
    code, out, err = run(str(tmp_path), "--by", "version")
    assert code == 0
    assert (
        "caution: cross-stack comparison: version=x1 runs quic-go, version=y1 runs aioquic" in err
    )
    lines = out.splitlines()
    caution = next(i for i, line in enumerate(lines) if line.startswith("CAUTION: cross-stack"))
    assert caution < lines.index("What changed:")


def test_an_ab_experiments_bookkeeping_is_not_a_condition(tmp_path: Path) -> None:
    """`quicsm lab ab` labels each run with its arm, pair and turn: comparing its two packs
    names no confounder in them (the arm is the grouping itself)."""
    a = write_group(
        tmp_path / "A",
        patterned_traces(4, prefix="a", app_ms=30),
        labels={"version": "1", "ab.arm": "A", "ab.position": 0},
    )
    b = write_group(
        tmp_path / "B",
        patterned_traces(4, prefix="b", app_ms=30),
        labels={"version": "1", "ab.arm": "B", "ab.position": 1},
    )
    code, out, err = run(str(a), "--vs", str(b))
    assert code == 0, err
    assert "ab.arm" not in out + err and "ab.position" not in out + err


def test_a_misspelt_primary_is_refused_before_any_trace_is_read(tmp_path: Path) -> None:
    """The issue's case: ``edges:Recovery->Slowstart`` was accepted silently, leaving the
    primary family empty (exit 0 under --fail-on-significant). It is refused while the options
    are read: the missing paths below are never looked at."""
    for command in ("diff", "report"):
        args = [command, str(tmp_path / "missing"), "--vs", str(tmp_path / "gone")]
        if command == "report":
            args += ["-o", str(tmp_path / "r.html")]
        result = CliRunner().invoke(main, [*args, "--primary", "edges:Recovery->Slowstart"])
        assert result.exit_code == 1, result.output
        assert result.stderr.startswith(
            "Error: --primary 'edges:Recovery->Slowstart': names nothing; did you mean "
            "Recovery->SlowStart"
        ), result.stderr
        assert "missing" not in result.stderr and "Traceback" not in result.stderr


def test_the_shipped_jitter_comparison_lists_no_trace_end_as_a_transition() -> None:
    """quic-go v0.48.2 runs ~25x longer than v0.65.0 under jitter: 1 of 10 vs 2 of 10 of their
    traces end in Recovery, which the → TERMINAL test called significant (p = 0.021). A trace's
    end is censoring: no such row is tested, and the real changes are still found."""
    traces = Path(__file__).resolve().parent.parent / "traces"
    code, out, err = run(
        str(traces / "quic-go-v0.48.2.qlog"),
        "--vs",
        str(traces / "quic-go-v0.65.0.qlog"),
        "--where",
        "scenario=jitter",
        "--where",
        "vantage=server",
        "--format",
        "json",
    )
    assert code == 0, err
    edges = json.loads(out)["edges"]
    assert edges and all(e["target"] != "TERMINAL" for e in edges)
    significant = {(e["source"], e["target"]) for e in edges if e["significant"]}
    assert ("Recovery", "SlowStart") in significant
