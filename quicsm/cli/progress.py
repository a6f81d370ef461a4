"""Progress on stderr for commands that can take seconds: a spinner with the current stage and
the elapsed time, shown only when stderr is a terminal and cleared when the stage ends."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


class Stage:
    """The running spinner (or nothing); :meth:`update` names the next stage."""

    def __init__(self, status: object | None) -> None:
        self._status = status
        self._start = time.monotonic()

    def update(self, description: str) -> None:
        if self._status is not None:
            self._status.update(description)  # type: ignore[attr-defined]


@contextlib.contextmanager
def reading(
    description: str, *, quiet: bool = False, console: Console | None = None
) -> Iterator[Stage]:
    """A spinner reading ``description`` while the block runs (nothing when stderr — or the
    given console — is not a terminal, or with ``quiet``)."""
    if quiet or (console is None and not _may_be_terminal()):
        yield Stage(None)  # rich is not imported: it costs a small command a tenth of its start
        return
    from rich.console import Console

    console = console if console is not None else Console(stderr=True)
    if quiet or not console.is_terminal:
        yield Stage(None)
        return
    with console.status(description, spinner="dots") as status:
        yield Stage(status)


def _may_be_terminal() -> bool:
    """Whether rich could take stderr for a terminal: it is one, or the environment says to
    treat it as one (rich reads ``TTY_COMPATIBLE`` and ``FORCE_COLOR``)."""
    if os.environ.get("TTY_COMPATIBLE") or os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty is not None and isatty())
