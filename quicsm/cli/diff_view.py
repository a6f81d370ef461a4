"""``quicsm diff`` on a terminal: the same sections as the plain table, fitted to the window —
significant rows highlighted (and starred), prose wrapped with a hanging indent, columns that do
not fit left out (test name first, then the confidence interval), and long tables cut to their
significant and largest rows. ``-o FILE`` writes every row and column."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    import polars as pl
    from rich.console import Console

    from quicsm.compare.diff import DiffResult
    from quicsm.compare.evidence import Explanation

#: rows shown per table before it is cut (significant rows are always shown)
MAX_ROWS = 12
#: columns left out, in this order, while a table is wider than the terminal
DROPPABLE = ("test", "95% CI", "traces", "MDE")
#: spaces between columns
GAP = 2


def _bullets(
    console: Console, sentences: Sequence[str | tuple[str, list[str]]], *, bold: bool = False
) -> None:
    """A bulleted list with a hanging indent; a sentence given with items lists them under it,
    one per line (a change in "Why" and its evidence)."""
    from rich.table import Table
    from rich.text import Text

    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for entry in sentences:
        text, items = (entry, []) if isinstance(entry, str) else entry
        # as Text: brackets in trace names and scopes ("[jitter: 10 vs 10 ...]") are not markup
        grid.add_row("  -", Text(text), style="bold" if bold else "")
        if items:
            sub = Table.grid(padding=(0, 1, 0, 0))
            sub.add_column(no_wrap=True)
            sub.add_column(overflow="fold")
            for item in items:
                sub.add_row("  ·", Text(item))
            grid.add_row("", sub)
    console.print(grid)


def _fit(head: list[str], rows: list[list[str]], width: int) -> tuple[list[int], list[str]]:
    """Indices of the columns to show, and the names of those left out for width."""
    shown = list(range(len(head)))

    def needed() -> int:
        return sum(max(len(head[i]), *(len(r[i]) for r in rows)) + GAP for i in shown) + 2

    dropped = []
    for name in DROPPABLE:
        if needed() <= width:
            break
        if name in head:
            shown.remove(head.index(name))
            dropped.append(name)
    return shown, dropped


def print_diff(
    d: DiffResult,
    *,
    console: Console,
    full_output: str | None,
    explanations: Sequence[Explanation] = (),
    accounts: Sequence[pl.DataFrame | None] = (),
) -> int:
    """Print the terminal view; returns the number of table rows left out. ``accounts``: the
    groups' connection accounts, for the breakdown of ApplicationLimited time by cause."""
    from rich.table import Table
    from rich.text import Text

    from quicsm.render.diff_format import table_sections

    header, sections, tables, presence = table_sections(d, explanations=explanations)
    console.print(Text(header))
    for title, sentences in sections:
        console.print()
        console.print(Text(title, style="bold red" if title == "CAUTION" else "bold"))
        _bullets(console, sentences, bold=title == "What changed" and bool(d.any_significant))
    omitted = 0
    more = f"all of it in {full_output}" if full_output else "-o FILE writes all of it"
    for title, head, rows in tables:
        console.print()
        console.print(Text(title, style="bold"))
        if not rows:
            console.print("  (none)")
            continue
        # the significance column becomes a star on the p-value (and the row's colour)
        head = head[:-1]
        rows = [[*r[:-2], r[-2] + (" *" if r[-1] == "yes" else ""), r[-1]] for r in rows]
        keep = [i for i, r in enumerate(rows) if r[-1] == "yes" or i < MAX_ROWS]
        shown, dropped = _fit(head, [rows[i] for i in keep], console.width)
        table = Table(
            box=None, pad_edge=False, padding=(0, GAP, 0, 0), header_style="bold", expand=False
        )
        for n, i in enumerate(shown):
            table.add_column(head[i], no_wrap=n > 0, overflow="fold")
        for i in keep:
            row = rows[i]
            table.add_row(*(row[j] for j in shown), style="bold red" if row[-1] == "yes" else "")
        console.print(table, crop=False)
        notes = []
        left_out = len(rows) - len(keep)
        if left_out:
            omitted += left_out
            notes.append(f"{left_out} more row{'s' * (left_out != 1)}")
        if dropped:
            notes.append(f"column{'s' * (len(dropped) != 1)} {', '.join(dropped)} left out")
        if notes:
            console.print(Text(f"  … {'; '.join(notes)} ({more})", style="dim"))
    from quicsm.render.app_limited import BREAKDOWN_NOTE, BREAKDOWN_TITLE, breakdown_table

    head, rows = breakdown_table(accounts, ("A", "B"))
    if rows:
        console.print()
        console.print(Text(BREAKDOWN_TITLE, style="bold"))
        table = Table(
            box=None, pad_edge=False, padding=(0, GAP, 0, 0), header_style="bold", expand=False
        )
        for n, h in enumerate(head):
            table.add_column(h, no_wrap=n > 0, overflow="fold")
        for r in rows:
            table.add_row(*r)
        console.print(table, crop=False)
        console.print(Text(BREAKDOWN_NOTE, style="dim"))
    console.print()
    console.print(Text("Invariants and presence", style="bold"))
    _bullets(console, presence)
    return omitted
