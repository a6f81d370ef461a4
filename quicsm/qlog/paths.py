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

Paths are input too: a name that is not UTF-8 (Python carries its bytes as surrogate escapes;
the tables hold file names as UTF-8 text), holds a NUL byte or is too long for the system, and
anything that is not a regular file (a FIFO, a device, a socket), is an ``InputError`` naming
it printably (:func:`shown`), never a foreign exception or a read that blocks.
"""

from __future__ import annotations

import errno
import glob
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from quicsm.core.errors import InputError

PathLike = str | os.PathLike[str]

#: ``(trace index, start, end)``: a trace's bytes in a file's decompressed content
#: (:attr:`quicsm.qlog.source.FileRead.spans`)
Span = tuple[int, int, int]


@dataclass(frozen=True)
class TraceSpans:
    """Some traces of one qlog file, given with where each lies in the file's decompressed
    content: a path to the readers, which then read those traces' bytes only. The spans come
    from an earlier read of the same content (:attr:`quicsm.qlog.source.FileRead.spans`, kept
    by the engine's index of each file). Anything that does not know spans reads the whole
    file (it is an ``os.PathLike`` of it)."""

    path: str
    spans: tuple[Span, ...]

    def __fspath__(self) -> str:
        return self.path


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


def shown(path: PathLike) -> str:
    """``path`` as printable text: bytes that are not UTF-8 as ``\\xNN``, a NUL as ``\\x00``,
    at most 300 characters."""
    text = os.fspath(path)
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    text = text.replace("\0", "\\x00")
    return text if len(text) <= 300 else f"{text[:150]}...{text[-100:]} ({len(text)} characters)"


def check_name(path: PathLike) -> str:
    """The path's text, if quicsm can name it in its tables: UTF-8, without NUL bytes."""
    text = os.fspath(path)
    if "\0" in text:
        raise InputError(f"'{shown(text)}': a path may not contain a NUL byte")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(
            f"'{shown(text)}': file names must be UTF-8 (this one holds other bytes, shown as "
            "\\xNN): rename the file"
        ) from None
    return text


def _kind(path: Path) -> str:
    """``dir``, ``file``, ``missing`` or ``other`` (FIFO, device, socket), following links."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        if exc.errno == errno.ENOTDIR or exc.errno == errno.ELOOP:
            return "missing"
        raise InputError(f"'{shown(path)}': cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


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
        text = check_name(item)
        if any(c in _GLOB_CHARS for c in text) and _kind(Path(text)) == "missing":
            matches = sorted(m for m in glob.glob(text, recursive=True) if _kind(Path(m)) == "file")
            if not matches:
                raise InputError(f"no files match the pattern '{shown(text)}'")
            for m in matches:
                add(Path(check_name(m)))
            continue
        path = Path(text)
        kind = _kind(path)
        if kind == "dir":
            found = sorted(
                p for p in path.rglob("*") if is_trace_name(p.name) and _kind(p) == "file"
            )
            if not found:
                raise InputError(
                    f"directory '{shown(text)}' contains no trace files "
                    f"(names ending in {', '.join(TRACE_SUFFIXES)}, optionally compressed)"
                )
            for p in found:
                add(Path(check_name(p)))
        elif kind == "file":
            add(path)
        elif kind == "other":
            raise InputError(
                f"'{shown(text)}' is neither a file nor a directory (a FIFO, device or socket "
                "is not read)"
            )
        else:
            raise InputError(f"no such file or directory: '{shown(text)}'")
    return out


def expand_spans(
    paths: PathLike | Iterable[PathLike],
) -> list[tuple[Path, tuple[Span, ...] | None]]:
    """:func:`expand_paths`, each file with the spans to read of it (:class:`TraceSpans`), or
    ``None`` for all of it. A file named whole and by spans is read whole; spans of one file
    named twice are merged."""
    out: dict[Path, tuple[Path, tuple[Span, ...] | None]] = {}
    for item in _as_list(paths):
        if isinstance(item, TraceSpans):
            (path,) = expand_paths([item.path])
            key = Path(os.path.normpath(path))
            before = out.get(key, (path, ()))[1]
            if before is not None:
                out[key] = (path, tuple(sorted({*before, *item.spans}, key=lambda s: s[1])))
            continue
        for path in expand_paths([item]):
            out[Path(os.path.normpath(path))] = (path, None)
    if not out:
        raise InputError("no input paths given")
    return list(out.values())
