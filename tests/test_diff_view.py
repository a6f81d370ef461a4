"""``quicsm diff`` on a terminal (quicsm.cli.diff_view): fits the window, highlights and stars
significant rows, cuts long tables and says where the full table is; ``-o`` writes it."""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from diff_helpers import patterned_traces, write_group
from rich.console import Console

from quicsm.cli import main
from quicsm.cli.diff_view import MAX_ROWS, print_diff
from quicsm.compare.diff import diff
from quicsm.compare.load import compare_paths
from quicsm.compare.run import run_comparison
from quicsm.render import diff_format

REAL = Path(__file__).parent.parent / "traces"


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("view")
    write_group(root / "a", patterned_traces(8, prefix="a", app_ms=30), labels={"v": "1"})
    write_group(root / "b", patterned_traces(8, prefix="b", app_ms=300), labels={"v": "2"})
    comp = compare_paths([str(root / "a")], [str(root / "b")])
    return diff(comp.a.transitions, comp.b.transitions, names=(comp.a.name, comp.b.name))


@pytest.mark.parametrize("width", [80, 100, 160])
def test_terminal_view_fits_the_window(result, width: int) -> None:  # type: ignore[no-untyped-def]
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=True, color_system="standard")
    print_diff(result, console=console, full_output="full.txt")
    plain = _strip(buffer.getvalue())
    assert max(len(line.rstrip()) for line in plain.splitlines()) <= width
    # significant rows are starred and drawn bold red
    assert result.any_significant
    starred = [line for line in plain.splitlines() if line.rstrip().endswith(" *")]
    n_sig = sum(
        getattr(result, table).filter(pl.col("significant")).height
        for table in ("states", "sources", "edges", "dwell")
    )
    assert len(starred) == n_sig > 0
    assert "\x1b[1;31m" in buffer.getvalue()
    if width == 80:
        assert "column test left out" in plain or "columns test" in plain


def test_long_tables_are_cut_and_point_to_the_file() -> None:
    comp = compare_paths(
        [str(REAL / "quic-go-v0.48.2.qlog")],
        [str(REAL / "quic-go-v0.65.0.qlog")],
        where={"vantage": "server"},
    )
    r = diff(comp.a.transitions, comp.b.transitions, names=(comp.a.name, comp.b.name))
    buffer = io.StringIO()
    print_diff(r, console=Console(file=buffer, width=120), full_output="diff.txt")
    plain = buffer.getvalue()
    n_edges = r.edges.height
    # the first MAX_ROWS rows are shown, and every significant row wherever it comes
    sig = r.edges["significant"].to_list()
    shown = sum(1 for i, s in enumerate(sig) if s or i < MAX_ROWS)
    assert n_edges > shown
    assert f"… {n_edges - shown} more rows" in plain and "(all of it in diff.txt)" in plain


def test_why_is_a_ranked_list_each_item_once() -> None:
    """On a terminal, "Why" lists each change (strongest first) with its evidence one item per
    line under it, not run on with ";"; the jitter evidence is printed once, later changes
    explained by the same traces refer to it."""
    comp = compare_paths(
        [str(REAL / "quic-go-v0.48.2.qlog")],
        [str(REAL / "quic-go-v0.65.0.qlog")],
        where={"vantage": "server"},
    )
    done = run_comparison(comp)
    assert done.explanations
    buffer = io.StringIO()
    print_diff(done.result, console=Console(file=buffer, width=120), full_output=None,
               explanations=done.explanations)  # fmt: skip
    lines = buffer.getvalue().splitlines()
    start = lines.index("Why")
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].strip())
    why = lines[start + 1 : end]
    changes = [i for i, line in enumerate(why) if line.startswith("  - ")]
    items = [i for i, line in enumerate(why) if line.startswith("      · ")]
    assert len(changes) == len(done.explanations) and items
    # ranked: the decided primary outcome first
    assert why[changes[0]].startswith("  - completion time in jitter: ")
    # items are the evidence lines, one per line: the first change's count matches
    first = done.explanations[0]
    n_first = sum(1 for i in items if changes[0] < i < (changes[1] if len(changes) > 1 else 10**9))
    assert n_first == len(diff_format.why_items(first, done.result, done.explanations))
    text = " ".join(line.strip() for line in why)
    assert text.count("spurious losses (declared lost, later acknowledged)") == 1
    assert "(shown there)" in text
    # the scope of each change shows as text (square brackets are not taken for markup)
    assert "[jitter: 10 vs 10 server traces]" in text


def test_output_file_gets_every_row(result, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    del result
    root = tmp_path
    write_group(root / "a", patterned_traces(6, prefix="a", app_ms=30), labels={"v": "1"})
    write_group(root / "b", patterned_traces(6, prefix="b", app_ms=300), labels={"v": "2"})
    out = tmp_path / "diff.txt"
    args = ["diff", str(root / "a"), "--vs", str(root / "b"), "-o", str(out)]
    cli = CliRunner().invoke(main, args)
    assert cli.exit_code == 0, cli.stderr
    assert cli.stdout == ""  # not a terminal: the file holds the output
    done = run_comparison(compare_paths([str(root / "a")], [str(root / "b")]))
    accounts = [done.comparison.a.account, done.comparison.b.account]
    expected = diff_format.to_table(done.result, explanations=done.explanations, accounts=accounts)
    assert out.read_text() == expected
    assert (diff_format.BREAKDOWN_TITLE + ":") in expected  # the groups' accounts are in it
    # only the lines naming the groups (long temporary paths here) may be wider than 130
    body = [line for line in out.read_text().splitlines() if not line.startswith(("A = ", "B = "))]
    assert max(len(line) for line in body) <= 130


def _strip(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
