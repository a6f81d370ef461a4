"""The ``quicsm`` command line: a thin layer over the library.

Each subcommand lives in its own module under :mod:`quicsm.cli` and makes one library call.
Commands are loaded lazily from :data:`COMMANDS`, so ``quicsm --help`` stays fast. Every
:class:`quicsm.core.errors.QuicsmError` becomes ``Error: <message>`` on stderr and exit code 1;
anything else is a bug and keeps its traceback. Python warnings raised by a command are reported
once, as ``warning: <message>`` (:mod:`quicsm.cli.report_warnings`).
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import click

from quicsm.core import native
from quicsm.core.errors import QuicsmError
from quicsm.core.version import __version__

#: command name -> "module:attribute" of its click command
COMMANDS: dict[str, str] = {
    "cache": "quicsm.cli.cache:cache",
    "lab": "quicsm.cli.lab:lab",
    "infer": "quicsm.cli.infer:infer_command",
    "diff": "quicsm.cli.diff:diff_command",
    "report": "quicsm.cli.report:report_command",
    "states": "quicsm.cli.states:states",
    "inspect": "quicsm.cli.inspect:inspect",
    "identify": "quicsm.cli.identify:identify_command",
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
        from quicsm.cli import report_warnings

        report_warnings.reset()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                return super().invoke(ctx)
            except QuicsmError as exc:
                raise click.ClickException(report_warnings.terminal_safe(str(exc))) from None
            finally:
                for w in caught:  # reported once, in the CLI's own words
                    report_warnings.warned(w.message)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__,
    prog_name="quicsm",
    message="%(prog)s, version %(version)s\nstate deriver: " + native.describe(),
)
def main() -> None:
    """Infer the congestion-control state machine of QUIC implementations from qlog traces,
    and explain what changed between versions, devices and networks."""
