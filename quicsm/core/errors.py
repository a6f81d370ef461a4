"""One error base for everything quicsm raises on purpose.

The CLI turns any :class:`QuicsmError` into ``Error: <message>`` and exit code 1.
Anything else escaping the library is a bug and keeps its traceback.
"""

from __future__ import annotations

import traceback
from functools import partial
from typing import Any


class QuicsmError(Exception):
    """Base class of every error quicsm raises deliberately."""


class InputError(QuicsmError):
    """Bad input that is not tied to a record: a missing path, an unknown format, bad options."""


class QlogError(QuicsmError):
    """A record of an input file is not what was expected.

    The message always names the file, the record (1-based) and/or line, and what was expected::

        x.sqlog: record 1842 (line 1843): expected an object with "time" and "name", got an array
    """

    def __init__(
        self,
        file: str,
        expected: str,
        *,
        record: int | None = None,
        line: int | None = None,
        got: str | None = None,
    ) -> None:
        self.file = file
        self.record = record
        self.line = line
        self.expected = expected
        self.got = got
        where = []
        if record is not None:
            where.append(f"record {record}")
        if line is not None:
            where.append(f"(line {line})" if record is not None else f"line {line}")
        loc = " ".join(where)
        msg = f"{file}: {loc + ': ' if loc else ''}expected {expected}"
        if got is not None:
            msg += f", got {got}"
        super().__init__(msg)

    def __reduce__(self) -> tuple[Any, ...]:
        # rebuilt from its fields, so it crosses process boundaries (parallel engines) intact
        return (
            partial(QlogError, record=self.record, line=self.line, got=self.got),
            (self.file, self.expected),
        )


class ResourceError(QuicsmError):
    """The machine ran out of something (memory) while reading a file: not a property of the
    file, so a lenient read does not skip it (it would return fewer rows without saying why);
    the message names the file."""


def released(exc: BaseException) -> None:
    """Free what an error that is kept or re-raised would keep alive: the local variables of
    the finished frames in its tracebacks (a reader's buffers) and the exceptions it was raised
    during but does not show (``raise ... from None``: a JSON decoder's error holds the whole
    text it failed on). Without this one failing read of a large record kept ~40 MB alive for
    as long as its error was."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)
        following = current.__cause__ or current.__context__
        if current.__suppress_context__:
            current.__context__ = None
        current = following


def out_of_memory(path: object) -> ResourceError:
    """Memory ran out while reading ``path``: our error, never skipped as a bad file."""
    return ResourceError(
        f"{path}: ran out of memory while reading it (a memory limit, or a file whose records "
        "are too large for this machine: see ReadLimits)"
    )


class LabError(QuicsmError):
    """A lab setting (link, loss model, device profile, relay address) is not what was expected."""


class ModelError(QuicsmError):
    """Inference or statistics could not run on the given transitions."""
