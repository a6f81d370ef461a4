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
        _shown(out, "reading traces")
        stage.update("drawing")
        _shown(out, "drawing")


def _shown(out: io.StringIO, text: str) -> None:
    """Wait until the spinner's thread has drawn ``text`` (it redraws a few times a second;
    waited for by what it wrote, not for a fixed time, which a loaded machine may overrun)."""
    give_up = time.monotonic() + 60
    while text not in out.getvalue():
        assert time.monotonic() < give_up, f"the spinner never showed {text!r}"
        time.sleep(0.01)


def test_nothing_when_not_a_terminal_or_quiet() -> None:
    for console, quiet in ((Console(file=io.StringIO(), force_terminal=False), False),
                           (Console(file=io.StringIO(), force_terminal=True), True)):  # fmt: skip
        with reading("reading traces", console=console, quiet=quiet) as stage:
            stage.update("drawing")
        assert console.file.getvalue() == ""  # type: ignore[attr-defined]
