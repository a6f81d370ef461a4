"""``quicsm inspect``: summarise and fully validate one trace file."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from quicsm.cli.report_warnings import terminal_safe
from quicsm.core.errors import InputError
from quicsm.qlog.inspect import inspect_file
from quicsm.qlog.paths import expand_paths

#: exit code when the file was read but has problems
EXIT_PROBLEMS = 2


@click.command("inspect")
@click.argument("path")
def inspect(path: str) -> None:
    """Summarise PATH: the format detected, its traces, event counts by name, the time span
    of each trace, and every problem found (every record is decoded and validated).

    Exits with 0 when the file has no problem, 1 on an error, and 2 when problems were found,
    so it can be used as a validator."""
    files = expand_paths([path])
    if len(files) != 1:
        raise InputError(f"{path!r} names {len(files)} files; inspect takes one file")
    report = inspect_file(Path(files[0]))
    click.echo(terminal_safe("\n".join(report.lines())))
    if report.n_problems:
        sys.exit(EXIT_PROBLEMS)
