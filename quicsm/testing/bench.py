"""What the benchmarks share about how a measured process starts."""

from __future__ import annotations

import compileall
from pathlib import Path


def compile_package() -> None:
    """Writes the bytecode of every quicsm module, as it is on a user's machine (an
    installation compiles the package; an editable one writes the bytecode on first import).

    A benchmark calls this before it measures a fresh process's CPU time: where bytecode is
    not written (``PYTHONDONTWRITEBYTECODE`` set, a read-only checkout), every measured process
    would otherwise compile the package's sources again, about 0.05-0.1 s of CPU that no user
    pays."""
    package = Path(__file__).resolve().parents[1]  # quicsm/
    compileall.compile_dir(package, quiet=1)
