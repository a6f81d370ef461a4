"""``quicsm diff`` on CSV tables: label columns, the round trip of ``quicsm states --format
csv``, labels that name each trace, the caution on bare tables, ``--primary``, ``--plan`` and
``--fail-on-significant`` acting on the primary family."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from quicsm.cli import main
from quicsm.cli.diff import EXIT_SIGNIFICANT

ROOT = Path(__file__).resolve().parent.parent
PLAN = ["SlowStart", "CongestionAvoidance", "Recovery", "CongestionAvoidance", "ApplicationLimited"]


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def write_table(
    path: Path,
    n: int,
    *,
    labels: dict[str, object] | None = None,
    per_trace: bool = False,
    recovery_ms: float = 100.0,
    seed: int = 1,
    prefix: str = "t",
) -> Path:
    """``n`` traces of a small chain as a CSV table, with label columns (``per_trace``: a
    ``conn_id`` column naming each trace)."""
    rng = np.random.default_rng(seed)
    extra = dict(labels or {})
    head = ["trace", "time_ms", "state", *extra, *(["conn_id"] if per_trace else [])]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(head)
        for i in range(n):
            t = 0.0
            for s in PLAN:
                values = [v(i) if callable(v) else v for v in extra.values()]
                w.writerow(
                    [
                        f"{prefix}{i}",
                        round(t, 3),
                        s,
                        *values,
                        *([f"c{prefix}{i:03d}"] if per_trace else []),
                    ]
                )
                t += float(rng.exponential(recovery_ms if s == "Recovery" else 100.0))
    return path


def test_label_columns_of_a_table_are_labels(tmp_path: Path) -> None:
    table = write_table(
        tmp_path / "runs.csv", 12, labels={"version": lambda i: "1" if i < 6 else "2"}
    )
    code, out, err = run("diff", str(table), "--by", "version", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["groups"]["a"]["name"] == "version=1" and doc["groups"]["a"]["n_traces"] == 6
    assert doc["groups"]["b"]["name"] == "version=2" and doc["groups"]["b"]["n_traces"] == 6
    code, out, _ = run("labels", str(table))
    assert code == 0 and "version" in out


def test_a_label_naming_each_trace_does_not_block_by(tmp_path: Path) -> None:
    """A connection id differs per trace: it is not a condition to compare within."""
    table = write_table(
        tmp_path / "runs.csv",
        20,
        labels={"version": lambda i: "1" if i < 10 else "2"},
        per_trace=True,
    )
    code, out, err = run("diff", str(table), "--by", "version")
    assert code == 0, err
    assert "conn_id" not in out and "compared within" not in out


def test_a_bare_table_gets_a_caution_above_the_findings(tmp_path: Path) -> None:
    a = write_table(tmp_path / "a.csv", 6, seed=1)
    b = write_table(tmp_path / "b.csv", 6, seed=2)
    code, out, err = run("diff", str(a), "--vs", str(b))
    assert code == 0, err
    caution = out.index("CAUTION: the traces carry no labels")
    assert caution < out.index("What changed")
    # a labelled table does not
    la = write_table(tmp_path / "la.csv", 6, labels={"scenario": "bulk"})
    lb = write_table(tmp_path / "lb.csv", 6, labels={"scenario": "bulk"}, seed=2)
    code, out, _ = run("diff", str(la), "--vs", str(lb))
    assert code == 0 and "CAUTION" not in out


def test_states_csv_reads_back_into_diff(tmp_path: Path) -> None:
    qlog = ROOT / "tests" / "fixtures"
    files = sorted(qlog.glob("*.qlog"))[:2] or sorted(qlog.rglob("*.qlog"))[:2]
    if len(files) < 2:
        pytest.skip("needs two qlog fixtures")
    outs = []
    for k, f in enumerate(files):
        code, out, err = run("states", str(f), "--format", "csv")
        assert code == 0, err
        path = tmp_path / f"{k}.csv"
        path.write_text(out)
        outs.append(path)
    code, out, err = run("diff", str(outs[0]), "--vs", str(outs[1]), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["groups"]["a"]["n_traces"] >= 1 and doc["groups"]["b"]["n_traces"] >= 1


def test_primary_plan_and_fail_on_significant(tmp_path: Path) -> None:
    """B's Recovery lasts ten times as long: its time share (primary) moves, and the gate
    fires; naming only the dwell family as primary, the gate follows that family."""
    a = write_table(tmp_path / "a.csv", 10, labels={"scenario": "bulk"}, seed=1, prefix="a")
    b = write_table(
        tmp_path / "b.csv", 10, labels={"scenario": "bulk"}, seed=2, recovery_ms=1000.0, prefix="b"
    )
    code, out, err = run("diff", str(a), "--vs", str(b), "--fail-on-significant")
    assert code == EXIT_SIGNIFICANT, (out, err)
    assert "[PRIMARY] Recovery:" in out and "primary, Holm-adjusted" in out
    code, out, _ = run(
        "diff",
        str(a),
        "--vs",
        str(b),
        "--primary",
        "edges:SlowStart->CongestionAvoidance",
        "--fail-on-significant",
    )
    assert code == 0, out  # a transition that did not change: the gate stays open
    assert "  - Recovery:" in out and "(exploratory, BH-adjusted" in out
    code, out, err = run("diff", str(a), "--vs", str(b), "--plan")
    assert code == 0, err
    assert out.startswith("Plan from the pilot") and "traces per group" in out
    assert "primary      state Recovery" in out
    code, _, err = run("diff", str(a), "--vs", str(b), "--effect", "0.1")
    assert code != 0 and "--effect only applies with --plan" in err
    code, _, err = run("diff", str(a), "--vs", str(b), "--primary", "bogus")
    assert code != 0 and "--primary 'bogus'" in err


def test_one_p_value_per_test_in_every_section(tmp_path: Path) -> None:
    """The completion time's p-value is the same adjusted number, labelled, in "What changed",
    "Why", the outcomes table and the report's scenario matrix."""
    import re

    a = write_table(
        tmp_path / "a.csv",
        6,
        prefix="a",
        labels={"scenario": "jitter", "completion_ms": lambda i: 1000 + 10 * i},
    )
    b = write_table(
        tmp_path / "b.csv",
        6,
        prefix="b",
        seed=2,
        labels={"scenario": "jitter", "completion_ms": lambda i: 400 + 7 * i},
    )
    code, out, err = run("diff", str(a), "--vs", str(b))
    assert code == 0, err
    quoted = re.findall(r"completion time in jitter: .*?(primary, Holm-adjusted p = (0\.\d+))", out)
    assert quoted, out
    values = {v for _, v in quoted}
    assert len(values) == 1, quoted
    (p,) = values
    row = next(line for line in out.splitlines() if line.strip().startswith("completion_ms"))
    assert f"{p} Holm" in row, row
    report = tmp_path / "r.md"
    code, _, err = run("report", str(a), "--vs", str(b), "-o", str(report))
    assert code == 0, err
    text = report.read_text()
    assert f"Holm-adjusted p = {p}" in text
    assert (
        "p = 0." not in text.replace(f"Holm-adjusted p = {p}", "").replace(f"Holm p = {p}", "")
        or f"Holm p = {p}" in text
    )


def test_arguments_are_checked_before_any_trace_is_read(tmp_path: Path) -> None:
    """A refused command reads nothing: the argument's error comes even for groups of files
    that do not exist (which reading would name), and a real corpus is never opened."""
    from click.testing import CliRunner

    from quicsm.cli import main

    missing = [str(tmp_path / "a.qlog"), "--vs", str(tmp_path / "b.qlog")]
    cases = [
        (["diff", *missing, "--effect", "0.1"], "Error: --effect only applies with --plan\n"),
        (
            ["report", *missing, "-o", str(tmp_path / "r.html"), "--matrix", "a,b,c"],
            "Error: --matrix 'a,b,c': expected ROW_LABEL or ROW_LABEL,COLUMN_LABEL\n",
        ),
        (
            ["report", *missing, "-o", str(tmp_path / "r.html"), "--metric", "state:Nope"],
            "Error: --metric 'state:Nope': unknown state; expected one of Init, SlowStart, "
            "CongestionAvoidance, CongestionAvoidanceMaxed, ApplicationLimited, "
            "RetransmissionTimeout, Recovery, TailLossProbe, Startup, Drain, ProbeBW, ProbeRTT, "
            "Unknown, ApplicationLimited (application), ApplicationLimited (flow control), "
            "ApplicationLimited (pacing), ApplicationLimited (unknown)\n",
        ),
    ]
    for argv, error in cases:
        result = CliRunner().invoke(main, argv)
        assert result.exit_code == 1, result.output
        assert result.output == error
    # the same groups, read: the missing file is what is named
    result = CliRunner().invoke(main, ["diff", *missing])
    assert result.exit_code == 1 and "a.qlog" in result.output
