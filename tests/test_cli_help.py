"""``--help`` is cheap: ``quicsm --help`` and every subcommand's ``--help``, run as a user runs
them (``python -m quicsm ... --help``, a fresh interpreter), print their usage without importing
the data stack (polars, numpy, scipy) or the engine; their modules load when a command runs.
What that costs is measured by ``benchmarks/bench_cli_help.py``."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from quicsm.cli import COMMANDS, main

#: what --help must not import
HEAVY = ("polars", "numpy", "scipy", "pyarrow", "pandas", "dask", "quicsm.engine", "vl_convert")


def _invocations() -> list[tuple[str, ...]]:
    """Every command line that ends in --help: the group, each command, each lab command."""
    out: list[tuple[str, ...]] = [()]
    ctx = click.Context(main)
    for name in sorted(COMMANDS):
        out.append((name,))
        command = main.get_command(ctx, name)
        if isinstance(command, click.Group):
            out += [(name, sub) for sub in sorted(command.list_commands(ctx))]
    return out


CHILD = """
import runpy, sys
sys.argv = ["quicsm", *sys.argv[1:]]
try:
    runpy.run_module("quicsm", run_name="__main__")
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
heavy = [m for m in {heavy!r} if m in sys.modules]
print("HEAVY", ",".join(heavy) or "-")
"""


@pytest.mark.parametrize("args", _invocations(), ids=lambda a: " ".join(a) or "quicsm")
def test_help_imports_no_data_stack(args: tuple[str, ...]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD.format(heavy=HEAVY), *args, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Usage: quicsm" in proc.stdout
    assert proc.stdout.rstrip().endswith("HEAVY -"), proc.stdout[-300:]


def test_the_choices_are_the_implementations() -> None:
    """The choices --help lists (quicsm.core.choices) are what the library accepts."""
    from quicsm.core import choices
    from quicsm.engine import run
    from quicsm.extract import derive
    from quicsm.model import inference
    from quicsm.render import dot

    assert run.ENGINES is choices.ENGINES
    assert inference.ALGORITHMS is choices.ALGORITHMS
    assert dot.RENDER_FORMATS is choices.RENDER_FORMATS
    assert derive.STATE_MODES is choices.STATE_MODES


IDLE_WORKERS = """
import os, sys
import quicsm
print(os.environ.get("OPENBLAS_THREAD_TIMEOUT", "-"))
"""


@pytest.mark.parametrize("chosen", [None, "28"])
def test_import_lets_idle_blas_workers_sleep_unless_the_user_chose(chosen: str | None) -> None:
    """``import quicsm`` sets OPENBLAS_THREAD_TIMEOUT to OpenBLAS's smallest (numpy's idle
    BLAS workers sleep at once instead of spinning ~0.1 s of CPU each) and keeps a user's own
    setting (docs/design.md, "Start-up")."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    if chosen is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = chosen
    proc = subprocess.run(
        [sys.executable, "-c", IDLE_WORKERS], capture_output=True, text=True, timeout=60, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [chosen or "4"]
