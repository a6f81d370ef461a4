"""The ``quicsm`` command line: a thin layer over the library.

Each subcommand lives in its own module under :mod:`quicsm.cli` and makes one library call.
Commands are loaded lazily from :data:`COMMANDS`, so ``quicsm --help`` stays fast. Every
:class:`quicsm.core.errors.QuicsmError` becomes ``Error: <message>`` on stderr and exit code 1;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import click

from quicsm.core.errors import QuicsmError
from quicsm.core.version import __version__

#: command name -> "module:attribute" of its click command
COMMANDS: dict[str, str] = {
    "lab": "quicsm.cli.lab:lab",
    "infer": "quicsm.cli.infer:infer_command",
    "diff": "quicsm.cli.diff:diff_command",
    "report": "quicsm.cli.report:report_command",
    "states": "quicsm.cli.states:states",
    "inspect": "quicsm.cli.inspect:inspect",
    "labels": "quicsm.cli.labels:labels_command",
    "plot": "quicsm.cli.plot:plot_command",
}


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            try:
                return super().invoke(ctx)
            except QuicsmError as exc:
                raise click.ClickException(str(exc)) from None


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """A warning raised while a command runs, as ``Warning: <message>`` on stderr (no source
    file and line: they are the library's, not the user's)."""
    text = str(message).splitlines() or [""]
    click.echo(f"Warning: {text[0]}", err=True)
    for rest in text[1:]:
        click.echo(rest if rest.startswith("  ") else f"Warning: {rest}", err=True)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="quicsm")
def main() -> None:
    """Infer the congestion-control state machine of QUIC implementations from qlog traces,
    and explain what changed between versions, devices and networks."""
