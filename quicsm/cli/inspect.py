"""``quicsm inspect``: summarise and fully validate one trace file."""

from __future__ import annotations

from pathlib import Path

import click

from quicsm.core.errors import InputError
from quicsm.qlog.inspect import inspect_file
from quicsm.qlog.paths import expand_paths


@click.command("inspect")
@click.argument("path")
def inspect(path: str) -> None:
    """Summarise PATH: the format detected, its traces, event counts by name, the time span
    of each trace, and every problem found (every record is decoded and validated)."""
    files = expand_paths([path])
    if len(files) != 1:
        raise InputError(f"{path!r} names {len(files)} files; inspect takes one file")
    report = inspect_file(Path(files[0]))
    click.echo("\n".join(report.lines()))
