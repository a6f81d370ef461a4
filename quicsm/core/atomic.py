"""One way to put a file in place: atomically, never through a symbolic link, cleaning up after
runs that were killed.

:func:`write_file` writes ``data`` to a temporary file in the target's own directory (named
``.quicsm-<pid>-<name>-<random>``), flushes it to disk, gives it the permissions a new file would
have (or the replaced file's), then moves it over the target with ``os.replace``: a reader sees
the old file or the new one, never a partial one, and a run killed at any moment leaves the old
file intact. The final path may not be a symbolic link (``os.replace`` would replace the link,
and writing through it would change a file elsewhere) unless ``follow_symlinks`` is given: then
the link's target is written, the same way. A directory, FIFO or device at the final path is
refused.

Temporary files and directories of a killed run (``.quicsm-<pid>-...`` whose process is gone)
are removed by the next write into the same directory (:func:`clean_stale`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from quicsm.core.errors import InputError

TEMP_PREFIX = ".quicsm-"
_STALE = re.compile(r"^\.quicsm-(\d+)-")


def temp_prefix(name: str) -> str:
    """The prefix of this process's temporary entries for the output ``name``."""
    return f"{TEMP_PREFIX}{os.getpid()}-{name}-"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def clean_stale(directory: Path) -> list[Path]:
    """Remove the temporary files and directories that runs killed before they finished left in
    ``directory`` (``.quicsm-<pid>-...`` of a process that is gone); returns what was removed."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        match = _STALE.match(entry.name)
        if match is None or _alive(int(match.group(1))):
            continue
        path = Path(entry.path)
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path)
            else:
                path.unlink()
            removed.append(path)
    return removed


def checked_target(path: Path, *, follow_symlinks: bool = False) -> Path:
    """The file to replace for ``path``: ``path`` itself, or the target of the link at
    ``path`` when ``follow_symlinks``; an ``InputError`` for a link otherwise and for anything
    that is not a regular file."""
    if path.is_symlink():
        if not follow_symlinks:
            raise InputError(
                f"{path}: is a symbolic link; quicsm does not write through it (remove the link, "
                "or ask to follow it)"
            )
        path = Path(os.path.realpath(path))
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise InputError(f"{path}: cannot write: not a regular file")
    return path


def write_file(
    path: Path | str, data: str | bytes, *, what: str = "", follow_symlinks: bool = False
) -> Path:
    """Put ``data`` (text is written as UTF-8) at ``path`` atomically (see the module); returns
    the path written. Errors are ``InputError`` naming the path (and ``what`` was written:
    "cannot write the report: ...")."""
    target = checked_target(Path(path), follow_symlinks=follow_symlinks)
    action = f"cannot write {what}" if what else "cannot write"
    directory = target.parent
    payload = data.encode("utf-8") if isinstance(data, str) else data
    clean_stale(directory)
    try:
        fd, temp = tempfile.mkstemp(prefix=temp_prefix(target.name), dir=directory)
    except OSError as exc:
        raise InputError(f"{path}: {action}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, _mode_for(target))
        os.replace(temp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise InputError(f"{path}: {action}: {exc.strerror or exc}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return target


def _mode_for(target: Path) -> int:
    """The replaced file's permissions, or those of a new file under the current umask."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
