"""Every notebook runs top to bottom in a fresh kernel, and its asserted findings equal the
committed ones (so the committed outputs are not stale)."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MARK = "FINDINGS "


def _findings(nb: nbformat.NotebookNode) -> dict[str, object]:
    for cell in reversed(nb.cells):
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                for line in out.get("text", "").splitlines():
                    if line.startswith(MARK):
                        found: dict[str, object] = json.loads(line[len(MARK) :])
                        return found
    raise AssertionError("the notebook's last cells print no 'FINDINGS {...}' line")


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_and_findings_are_current(path: Path) -> None:
    from nbclient import NotebookClient

    committed = nbformat.read(path, as_version=4)
    expected = _findings(committed)
    fresh = nbformat.read(path, as_version=4)
    NotebookClient(
        fresh,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    assert _findings(fresh) == expected, (
        f"{path.name}: findings changed; re-run scripts/run_notebooks and review the new numbers"
    )
