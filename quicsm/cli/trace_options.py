"""Options of the commands that read traces: ``--where`` and ``--lenient``, and turning
``PATHS`` (which may name single traces as ``FILE#N``) into a selection."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # imported when a command runs, not for --help
    from quicsm.compare.selection import Selection

WHERE_HELP = (
    "Keep only traces whose label KEY equals VALUE; V1,V2 or a repeated KEY means one of "
    "them; several keys must all match (`quicsm labels` lists them)."
)


def where_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--where", "where", multiple=True, metavar="KEY=VALUE", help=WHERE_HELP)(f)


def lenient_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--lenient",
        is_flag=True,
        help="Skip unreadable records and files (reported) instead of stopping.",
    )(f)


def selection(
    paths: Sequence[str],
    *,
    where: Sequence[str],
    lenient: bool,
    cache_dir: Path | None = None,
    cache: bool = True,
) -> Selection:
    """The traces ``paths`` and ``--where`` choose; the files' index is kept in ``cache_dir``
    (``--cache-dir``; none with ``cache=False``, ``--no-cache``)."""
    from quicsm.compare.grouping import parse_where
    from quicsm.compare.selection import select_traces

    return select_traces(
        list(paths),
        where=parse_where(where),
        on_error="skip" if lenient else "raise",
        cache_dir=cache_dir,
        cache=cache,
    )
