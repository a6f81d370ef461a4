"""Whether quicsm's native extension is used: ``quicsm_native`` (built from ``native/`` by
``scripts/setup``), unless ``QUICSM_NATIVE=0`` is set in the environment.

The extension holds the derived-state path (:mod:`quicsm.extract.native`) and the record searches
of :mod:`quicsm.qlog.seq`; without it both run in Python, with the same results.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Final

try:  # built by scripts/setup; without it quicsm runs the same code paths in Python
    import quicsm_native as _module
except ImportError:  # pragma: no cover - exercised only where the build is missing
    _module = None

#: set to ``0`` to run in Python even where the extension is installed
NATIVE_ENV: Final[str] = "QUICSM_NATIVE"


def installed() -> bool:
    """Whether ``quicsm_native`` is installed."""
    return _module is not None


def module() -> ModuleType | None:
    """``quicsm_native`` if it is installed and not switched off, else ``None`` (read at
    every call: the environment may change between reads)."""
    if _module is None or os.environ.get(NATIVE_ENV, "1") == "0":
        return None
    return _module


def describe() -> str:
    """Which implementation reads use, for ``quicsm --version``."""
    if _module is None:
        return "Python (quicsm_native is not installed: scripts/setup builds it)"
    if module() is None:
        return f"Python ({NATIVE_ENV}=0)"
    return f"native (quicsm_native {_module.__version__})"
