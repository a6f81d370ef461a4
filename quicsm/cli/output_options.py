"""``--follow-symlinks``: the option of every command that writes one file (``-o FILE``).

Output files are written atomically and never through a symbolic link
(:mod:`quicsm.core.atomic`): a link at the output path is refused unless this option is given,
and then the file it points to is replaced, the same atomic way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def follow_symlinks_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command with ``--follow-symlinks`` (parameter ``follow_symlinks``)."""
    return click.option(
        "--follow-symlinks",
        is_flag=True,
        help="If the -o path is a symbolic link, replace the file it points to (by default "
        "quicsm refuses to write through a link).",
    )(f)
