"""What the cache directory holds, and taking it back (``quicsm cache``).

The cache directory (:func:`quicsm.engine.cache.default_cache_dir`) grows as files are read:

- ``<fingerprint>-<strict|lenient>-<states>/``: the rows read from each file (partitions) and
  the connection accounts, per version of the readers (the fingerprint,
  :func:`quicsm.engine.cache.extractor_fingerprint`, changes with every change of the code that
  turns bytes into rows, so an upgrade starts a new directory and leaves the old one unused);
- ``<fingerprint>-<strict|lenient>-index/``: the index of each file's traces, likewise;
- ``vega/``, ``families/``: compiled chart shapes and controller families, each under a hash
  of what made it (an older version's entries are never read again but cannot be told apart
  by name);
- ``charts/``: the report's charts as older versions drew them (with Vega); the report now
  draws its own (:mod:`quicsm.render.svg_charts`) and keeps none, so they are never read again;
- ``vega-bundle-*.js`` and ``*.js.packed``: the chart renderer's script bundle, when the
  installation has none of its own.

Nothing is ever removed by reading; :func:`prune` removes what the running version can no
longer read (other fingerprints) and, with ``older_than``, whatever was written before then;
:func:`clear` removes everything quicsm writes there. Only entries of these shapes are touched:
anything else in the directory is listed as unknown and left alone.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from quicsm.core.errors import QuicsmError
from quicsm.engine.cache import default_cache_dir, extractor_fingerprint

#: ``<16 hex digits>-<mode>-<what>``: a directory of one reader version
_VERSIONED: Final = re.compile(r"^([0-9a-f]{16})-(strict|lenient)-([a-z]+)$")
#: directories of content-hashed entries, each file one entry
_HASHED: Final = {"charts": "drawn charts", "vega": "compiled chart shapes", "families": "families"}
#: of those, what this version never reads
_UNREAD: Final = frozenset({"charts"})
_BUNDLE: Final = re.compile(r"^vega-bundle-[^/]+\.js(\.packed)?$")


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing in the cache directory: a reader version's directory, one hashed file, or the
    script bundle."""

    path: Path
    #: ``partitions``, ``trace index``, ``drawn charts``, ``compiled chart shapes``,
    #: ``families``, ``script bundle`` or ``unknown``
    kind: str
    #: written by a version of the readers other than this one, or of a kind this version no
    #: longer reads: never read again
    stale: bool
    bytes: int
    #: the newest modification time in it (seconds since the epoch)
    written: float


def _size_and_time(path: Path) -> tuple[int, float]:
    """Bytes and newest modification time of a file, or of everything under a directory
    (symbolic links are not followed; what vanishes meanwhile is not counted)."""
    try:
        st = path.lstat()
    except OSError:
        return 0, 0.0
    if not path.is_dir() or path.is_symlink():
        return st.st_size, st.st_mtime
    total, newest = 0, st.st_mtime
    for folder, dirs, files in os.walk(path):
        for name in files + dirs:
            try:
                s = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            total += s.st_size if name in files else 0
            newest = max(newest, s.st_mtime)
    return total, newest


def entries(cache_dir: Path | str | None = None) -> list[Entry]:
    """Everything in the cache directory, in name order (an absent directory holds nothing)."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if not root.exists():
        return []
    if not root.is_dir():
        raise QuicsmError(f"{root}: the cache directory is not a directory")
    current = extractor_fingerprint()
    found: list[Entry] = []
    for path in sorted(root.iterdir()):
        name = path.name
        versioned = _VERSIONED.match(name)
        if versioned and path.is_dir():
            kind = "trace index" if versioned.group(3) == "index" else "partitions"
            size, written = _size_and_time(path)
            found.append(Entry(path, kind, versioned.group(1) != current, size, written))
        elif name in _HASHED and path.is_dir() and not path.is_symlink():
            for item in sorted(path.iterdir()):
                size, written = _size_and_time(item)
                found.append(Entry(item, _HASHED[name], name in _UNREAD, size, written))
        elif _BUNDLE.match(name) and path.is_file():
            size, written = _size_and_time(path)
            found.append(Entry(path, "script bundle", False, size, written))
        else:
            size, written = _size_and_time(path)
            found.append(Entry(path, "unknown", False, size, written))
    return found


def _remove(entry: Entry) -> None:
    try:
        if entry.path.is_dir() and not entry.path.is_symlink():
            shutil.rmtree(entry.path)
        else:
            entry.path.unlink()
    except FileNotFoundError:  # removed meanwhile (another process pruning)
        pass
    except OSError as exc:
        raise QuicsmError(f"{entry.path}: could not be removed ({exc.strerror})") from None


def prune(
    cache_dir: Path | str | None = None,
    *,
    older_than: float | None = None,
    dry_run: bool = False,
    now: float | None = None,
) -> list[Entry]:
    """Removes what this version can no longer read (other reader versions' directories) and,
    with ``older_than`` (seconds), every entry last written more than that long ago; returns
    what was (or, ``dry_run``, would be) removed. Unknown entries are never removed."""
    if older_than is not None and older_than < 0:
        raise QuicsmError(f"the age to prune at must not be negative, got {older_than}")
    cutoff = None if older_than is None else (time.time() if now is None else now) - older_than
    chosen = [
        e
        for e in entries(cache_dir)
        if e.kind != "unknown" and (e.stale or (cutoff is not None and e.written < cutoff))
    ]
    if not dry_run:
        for entry in chosen:
            _remove(entry)
    return chosen


def clear(cache_dir: Path | str | None = None, *, dry_run: bool = False) -> list[Entry]:
    """Removes everything quicsm keeps in the cache directory (unknown entries stay); returns
    what was (or, ``dry_run``, would be) removed. The directories of hashed entries go whole."""
    chosen = [e for e in entries(cache_dir) if e.kind != "unknown"]
    if not dry_run:
        for entry in chosen:
            _remove(entry)
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        for name in _HASHED:
            folder = root / name
            if folder.is_dir() and not folder.is_symlink():
                with contextlib.suppress(OSError):  # left if something else was put there
                    folder.rmdir()
    return chosen
