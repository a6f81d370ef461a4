"""Print a read's diagnostics on stderr (lenient skips, truncation, unknown state names)."""

from __future__ import annotations

import click

from quicsm.core.diagnostics import Diagnostics


def print_warnings(diagnostics: Diagnostics) -> None:
    for line in diagnostics.messages():
        click.echo(f"Warning: {line}" if not line.startswith("  ") else line, err=True)
