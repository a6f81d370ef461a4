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
    root = tmp_path_factory.mktemp("corpus")
    write_group(
        root / "v1",
        patterned_traces(6, prefix="a", app_ms=30),
        labels={"stack": "demo", "version": "1.9", "scenario": "bulk"},
    )
    write_group(
        root / "v2",
        patterned_traces(6, prefix="b", app_ms=300),
        labels={"stack": "demo", "version": "1.10", "scenario": "bulk"},
    )
    write_group(
        root / "v3",
        patterned_traces(6, prefix="c", app_ms=30),
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
    assert doc["groups"]["a"]["n_traces"] == 6 and doc["groups"]["b"]["n_traces"] == 6
    top = doc["states"][0]
    assert top["state"] == "ApplicationLimited" and top["significant"] and top["difference"] > 0
    assert doc["summary"][0].startswith("ApplicationLimited: ")


def test_vs_takes_several_paths(corpus: Path) -> None:
    code, out, _ = run(
        str(corpus / "v1"), "--vs", str(corpus / "v2"), str(corpus / "v3"), "--format", "json"
    )
    assert code == 0
    assert json.loads(out)["groups"]["b"]["n_traces"] == 12


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
    assert out.startswith("A = version=1.9 (6 traces), B = version=1.10 (6 traces)")
    assert "ApplicationLimited" in out.splitlines()[3]
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
    assert "--by nosuchlabel: need at least two values among the traces, found none" in err
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
    # one value per group: a property of the groups, not a confounder
    assert "differ in" not in err
    code, out, err = run(
        str(corpus / "v1"), str(corpus / "v3"), "--vs", str(corpus / "v2"), "--format", "json"
    )
    assert code == 0
    assert "the groups also differ in scenario (" in err and "bulk, jitter" in err
