"""Golden files of the diff's JSON and Markdown and of the Markdown report.

Inputs are deterministic patterned traces (7 vs 7: 3432 splits, so every test is an exact
permutation test over traces).
Regenerate after an intended change with ``QUICSM_UPDATE_GOLDEN=1 python -m pytest
tests/test_diff_golden.py`` and review the diff of tests/golden/.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from diff_helpers import frame, patterned_traces

from quicsm.compare.diff import DiffResult, diff
from quicsm.compare.grouping import Comparison, group_from_frame
from quicsm.render.diff_format import to_json, to_markdown, to_table
from quicsm.report import build_report

GOLDEN = Path(__file__).parent / "golden"


def _groups() -> tuple[object, object]:
    a = frame(patterned_traces(7, prefix="a", app_ms=30, tlp=False), file="v1/server.sqlog")
    b = frame(patterned_traces(7, prefix="b", app_ms=250, recovery_ms=45), file="v2/server.sqlog")
    return a, b


def _result() -> DiffResult:
    a, b = _groups()
    return diff(a, b, names=("v1", "v2"))  # type: ignore[arg-type]


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("QUICSM_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} missing: run with QUICSM_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} changed; see the module docstring"


def test_diff_json_golden() -> None:
    text = to_json(_result())
    _check("diff.json", text)
    doc = json.loads(text)
    # the documented minimum schema
    assert {"states", "edges", "invariants"} <= doc.keys()
    for row in doc["states"]:
        assert {
            "state",
            "a_fraction",
            "b_fraction",
            "difference",
            "ci_low",
            "ci_high",
            "p_value",
            "significant",
            "n_a",
            "n_b",
        } <= row.keys()
    for row in doc["edges"]:
        assert {
            "source",
            "target",
            "a_probability",
            "b_probability",
            "difference",
            "p_value",
            "significant",
        } <= row.keys()
    assert set(doc["invariants"]) == {"only_a", "only_b"}


def test_diff_markdown_golden() -> None:
    _check("diff.md", to_markdown(_result()))


def test_diff_table_golden() -> None:
    _check("diff.txt", to_table(_result()))


@pytest.mark.parametrize("fmt", ["md"])
def test_report_markdown_golden(fmt: str) -> None:
    a, b = _groups()
    comp = Comparison(group_from_frame("v1", a), group_from_frame("v2", b))  # type: ignore[arg-type]
    _check("diff_report.md", build_report([comp], fmt=fmt))
