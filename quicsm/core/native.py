"""Whether quicsm's native core is used: ``quicsm._native`` (the Rust crate in ``native/``,
built into the package by maturin), unless ``QUICSM_NATIVE=0`` is set in the environment.

The native core holds the derived-state path (:mod:`quicsm.extract.native`) and the record
searches of :mod:`quicsm.qlog.seq`; without it (a copy of quicsm installed where Rust was not
available) both run in Python, with the same results.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Final

_module: ModuleType | None
try:  # built by maturin with the package; without it quicsm runs the same code paths in Python
    # (imported by name: the extension has no Python source, which the import-layer check would
    # read as an import of the whole package)
    _module = importlib.import_module("quicsm._native")
except ImportError:  # pragma: no cover - exercised only where the build is missing
    _module = None

#: set to ``0`` to run in Python even where the native core is built
NATIVE_ENV: Final[str] = "QUICSM_NATIVE"
#: what to tell a user whose quicsm has no native core
HOW_TO_BUILD: Final[str] = (
    "install Rust (rustup) and re-run scripts/setup, or install a quicsm wheel"
)


def installed() -> bool:
    """Whether ``quicsm._native`` was built."""
    return _module is not None


def module() -> ModuleType | None:
    """``quicsm._native`` if it was built and is not switched off, else ``None`` (read at
    every call: the environment may change between reads)."""
    if _module is None or os.environ.get(NATIVE_ENV, "1") == "0":
        return None
    return _module


def describe() -> str:
    """Which implementation reads use, for ``quicsm --version``."""
    if _module is None:
        return f"Python (the native core was not built: {HOW_TO_BUILD})"
    if module() is None:
        return f"Python ({NATIVE_ENV}=0)"
    return f"native (quicsm._native {_module.__version__})"
