"""Turn the paths a user gives (files, directories, glob patterns) into a list of files.

- a file is taken as it is, whatever its name;
- a directory is searched recursively for trace files: names ending in one of
  :data:`TRACE_SUFFIXES`, optionally followed by ``.gz``, ``.zst`` or ``.zstd``
  (``run.json`` sidecars and other files are not traces);
- a pattern (``*``, ``?``, ``[``) is expanded with ``**`` matching any number of directories;
  every regular file it matches is taken.

Results keep the order of the arguments; each directory's and pattern's files are sorted, and a
file named twice is read once. A path that does not exist, or a pattern or directory that
yields no file, is an :class:`quicsm.core.errors.InputError` naming it.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from quicsm.core.errors import InputError

PathLike = str | os.PathLike[str]

TRACE_SUFFIXES: Final[tuple[str, ...]] = (
    ".qlog",
    ".sqlog",
    ".nqlog",
    ".ndqlog",
    ".ndjson",
    ".jsonl",
    ".csv",
    ".parquet",
)
COMPRESSION_SUFFIXES: Final[tuple[str, ...]] = ("", ".gz", ".zst", ".zstd")

_GLOB_CHARS = frozenset("*?[")


def is_trace_name(name: str) -> bool:
    """Whether a directory entry named ``name`` is picked up as a trace file."""
    lower = name.lower()
    return any(
        lower.endswith(suffix + comp) for suffix in TRACE_SUFFIXES for comp in COMPRESSION_SUFFIXES
    )


def _as_list(paths: PathLike | Iterable[PathLike]) -> list[PathLike]:
    if isinstance(paths, str | os.PathLike):
        return [paths]
    return list(paths)


def expand_paths(paths: PathLike | Iterable[PathLike]) -> list[Path]:
    """Files named by ``paths`` (see the module docstring); raises ``InputError``."""
    items = _as_list(paths)
    if not items:
        raise InputError("no input paths given")
    out: list[Path] = []
    seen: set[Path] = set()

    def add(p: Path) -> None:
        key = Path(os.path.normpath(p))
        if key not in seen:
            seen.add(key)
            out.append(p)

    for item in items:
        text = os.fspath(item)
        if any(c in _GLOB_CHARS for c in text) and not Path(text).exists():
            matches = sorted(m for m in glob.glob(text, recursive=True) if Path(m).is_file())
            if not matches:
                raise InputError(f"no files match the pattern {text!r}")
            for m in matches:
                add(Path(m))
            continue
        path = Path(text)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and is_trace_name(p.name))
            if not found:
                raise InputError(
                    f"directory {text!r} contains no trace files "
                    f"(names ending in {', '.join(TRACE_SUFFIXES)}, optionally compressed)"
                )
            for p in found:
                add(p)
        elif path.is_file():
            add(path)
        elif path.exists():
            raise InputError(f"{text!r} is neither a file nor a directory")
        else:
            raise InputError(f"no such file or directory: {text!r}")
    return out
