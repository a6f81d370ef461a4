"""Progress on stderr: a spinner naming the stage on a terminal, nothing otherwise."""

from __future__ import annotations

import io
import time

from rich.console import Console

from quicsm.cli.progress import reading


def test_spinner_names_each_stage_on_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80)
    with reading("reading traces", console=console) as stage:
        time.sleep(0.3)
        stage.update("drawing")
        time.sleep(0.3)
    text = out.getvalue()
    assert "reading traces" in text and "drawing" in text


def test_nothing_when_not_a_terminal_or_quiet() -> None:
    for console, quiet in ((Console(file=io.StringIO(), force_terminal=False), False),
                           (Console(file=io.StringIO(), force_terminal=True), True)):  # fmt: skip
        with reading("reading traces", console=console, quiet=quiet) as stage:
            stage.update("drawing")
        assert console.file.getvalue() == ""  # type: ignore[attr-defined]
