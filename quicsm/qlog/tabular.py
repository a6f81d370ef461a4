"""Transition tables from any instrumentation: the documented CSV/Parquet layout.

One row per state entered::

    trace,time_ms,state[,vantage,raw_state,trigger,file,end_ms,source]

- ``trace`` (text, required): the trace id; rows of one trace may appear in any order;
- ``time_ms`` (number, required): milliseconds from the trace's start;
- ``state`` (text, required): a canonical state or any name of the alias table
  (:mod:`quicsm.core.aliases`); other names become ``Unknown`` and are kept in ``raw_state``;
- ``vantage`` (``client``/``server``/``unknown``), ``raw_state``, ``trigger``, ``file``,
  ``end_ms`` (when the trace ended; default: its last row), ``source`` (``explicit``/``derived``)
  are optional;
- every other column is a **label** of the trace (``version``, ``scenario``, ``device``,
  ``completion_ms``, …): its value on the trace's rows, a number when it reads as one, else
  text (a column whose value changes within a trace is not a label of that trace and is left
  out for it). Labels join those of a ``run.json`` next to the file, as for qlog, so
  ``quicsm diff --by``/``--where``/``--within`` and the outcomes work on tables.

Such a table reads into the same transitions frame as qlog (``Init`` is added at each trace's
first row when missing). CSV is recognised by its header line, Parquet by its magic bytes;
CSV may be gzip or zstd compressed.

A Parquet table's column types are checked from its schema before its data is read
(:func:`check_types`: integer trace ids are read as text; a float ``trace`` or a list ``state``
is one error naming the column, its type and what it accepts), and its reads run under
:func:`quiet_panics`, so that a panic of the Parquet reader on a corrupt file is our error with
the same message from call to call and nothing on stderr.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final

import polars as pl
from polars.exceptions import PanicException as _PanicException

from quicsm.core.aliases import canonical_state
from quicsm.core.diagnostics import Diagnostics
from quicsm.core.errors import QlogError, QuicsmError, out_of_memory, released
from quicsm.core.frames import KEY_DTYPE, TRANSITIONS_SCHEMA
from quicsm.core.states import STATE_DTYPE, UNKNOWN
from quicsm.qlog.events import MAX_MAGNITUDE

if TYPE_CHECKING:  # imported where used: reading a file does not need numpy
    import numpy as np

REQUIRED: Final[tuple[str, ...]] = ("trace", "time_ms", "state")
OPTIONAL: Final[tuple[str, ...]] = (
    "vantage",
    "raw_state",
    "trigger",
    "file",
    "end_ms",
    "source",
)


#: the longest CSV header line accepted (a transitions table names at most nine columns)
MAX_HEADER_BYTES = 64 << 10
#: CSV text parsed at a time (whole lines): memory is bounded by this plus the rows kept
CSV_CHUNK_BYTES = 2 << 20


#: how much of a block is searched for line ends at a time (bounds the index arrays)
_SCAN_BYTES = 1 << 20
_QUOTE, _LF = ord('"'), ord("\n")


class _LineEnds:
    """Single-pass search of a CSV stream for the ends of lines outside quoted fields: each
    byte is looked at once (vectorised), whatever the lengths of lines and quoted fields."""

    def __init__(self, chunk_bytes: int, max_line_bytes: int) -> None:
        self.chunk_bytes = chunk_bytes
        self.max_line_bytes = max_line_bytes
        self.odd = False  # inside a quoted field at the end of what was scanned
        self.size = 0  # bytes scanned (offsets below count from the first of them)
        self.last = 0  # just after the last line end outside quotes
        self.cuts: list[int] = []  # where chunks end: line ends about chunk_bytes apart

    def scan(self, data: bytes) -> None:
        import numpy as np

        for lo in range(0, len(data), _SCAN_BYTES):
            hi = min(lo + _SCAN_BYTES, len(data))
            plain = not self.odd and self.max_line_bytes >= _SCAN_BYTES
            if plain and data.find(b'"', lo, hi) < 0:
                self._plain(data, lo, hi)  # no quote: every line feed ends a line
                continue
            view = np.frombuffer(
                data, dtype=np.uint8, count=min(_SCAN_BYTES, len(data) - lo), offset=lo
            )
            quotes = np.flatnonzero(view == _QUOTE)
            feeds = np.flatnonzero(view == _LF)
            if len(feeds):
                # a line feed is outside quotes when an even number of quotes precede it
                inside = (np.searchsorted(quotes, feeds) + self.odd) & 1
                ends = feeds[inside == 0] + (self.size + 1)
                if len(ends):
                    gaps = np.diff(ends, prepend=self.last)
                    longest = int(gaps.max())
                    if longest > self.max_line_bytes:
                        raise _TooLong(longest)
                    self.last = int(ends[-1])
                    base = self.cuts[-1] if self.cuts else 0
                    if self.last - base >= self.chunk_bytes:
                        self.cuts.append(self.last)
            self.odd ^= bool(len(quotes) & 1)
            self.size += len(view)
            if self.size - self.last > self.max_line_bytes:
                raise _TooLong(self.size - self.last)

    def _plain(self, data: bytes, lo: int, hi: int) -> None:
        """:meth:`scan` of a stretch without quotes: only its first and last line feeds count
        (the lines between them are shorter than the stretch, so than ``max_line_bytes``)."""
        first = data.find(b"\n", lo, hi)
        if first >= 0:
            if first + 1 - lo + self.size - self.last > self.max_line_bytes:
                raise _TooLong(first + 1 - lo + self.size - self.last)
            self.last = data.rfind(b"\n", lo, hi) + 1 - lo + self.size
            base = self.cuts[-1] if self.cuts else 0
            if self.last - base >= self.chunk_bytes:
                self.cuts.append(self.last)
        self.size += hi - lo
        if self.size - self.last > self.max_line_bytes:
            raise _TooLong(self.size - self.last)

    def take(self) -> int:
        """The end of the text to yield now (0: none yet); offsets restart after it."""
        if not self.cuts:
            return 0
        cut = self.cuts[-1]
        self.cuts.clear()
        self.size -= cut
        self.last -= cut
        return cut


def csv_chunks(
    blocks: Iterable[bytes], *, chunk_bytes: int = CSV_CHUNK_BYTES, max_line_bytes: int = 64 << 20
) -> Iterator[tuple[bytes, int]]:
    """``(header + whole lines, 1-based line of the first of them)`` of a CSV stream.

    Lines are cut only outside quoted fields (a quoted field may hold line feeds); the header
    line is repeated at the start of every chunk. Chunks hold about ``chunk_bytes`` or more (a
    block's worth at most past that); a line (with the line feeds of its quoted fields) longer
    than ``max_line_bytes`` raises. Time is linear in the stream: every byte is scanned once.
    """
    header: bytes | None = None
    pending: list[bytes] = []
    ends = _LineEnds(chunk_bytes, max_line_bytes)
    line = 2
    for block in blocks:
        if header is None:
            pending.append(block)
            text = b"".join(pending)
            end = text.find(b"\n")
            if end > MAX_HEADER_BYTES or (end == -1 and len(text) > MAX_HEADER_BYTES):
                raise _HeaderTooLong(len(text) if end == -1 else end)
            if end == -1:
                pending = [text]
                continue
            header, block, pending = text[: end + 1], text[end + 1 :], []
        ends.scan(block)
        pending.append(block)
        cut = ends.take()
        if cut:
            text = b"".join(pending)
            body = text[:cut]
            pending = [text[cut:]]
            del text
            yield header + body, line
            line += body.count(b"\n")
    text = b"".join(pending)
    if header is None:
        if len(text) > MAX_HEADER_BYTES:
            raise _HeaderTooLong(len(text))
        if text:
            yield text, 2
        return
    if text.strip() or line == 2:
        yield header + text, line


class _HeaderTooLong(Exception):
    def __init__(self, size: int) -> None:
        self.size = size


class _TooLong(Exception):
    def __init__(self, size: int) -> None:
        self.size = size


def _load(path: Path, kind: str, data: bytes | None) -> pl.DataFrame:
    """The table as polars reads it: CSV as text, Parquet with its column types checked
    (:func:`check_types`) from its schema before its data is read."""
    try:
        if kind == "Parquet":
            with quiet_panics():
                schema = pl.read_parquet_schema(path)
            check_types(path, schema)
            with quiet_panics():
                return pl.read_parquet(path)
        assert data is not None
        return pl.read_csv(io.BytesIO(data), infer_schema=False)
    except QuicsmError:
        raise
    except (Exception, _PanicException) as exc:  # noqa: BLE001 - polars on bad input
        raise QlogError(
            str(path), f"a {kind} transitions table", got=library_failure(exc)
        ) from None


#: the kinds of column types a table may give, and the polars types of each
_TEXT, _INTEGER, _FLOAT, _BOOLEAN, _DATE = "text", "integers", "floats", "booleans", "dates"
#: which kinds each column accepts (a label: any of these; integer trace ids are read as text)
_ACCEPTED: Final[dict[str, tuple[str, ...]]] = {
    "trace": (_TEXT, _INTEGER),
    "time_ms": (_INTEGER, _FLOAT, _TEXT),
    "end_ms": (_INTEGER, _FLOAT, _TEXT),
    **{name: (_TEXT,) for name in ("state", "vantage", "raw_state", "trigger", "file", "source")},
}
_LABEL_KINDS: Final[tuple[str, ...]] = (_TEXT, _INTEGER, _FLOAT, _BOOLEAN, _DATE)


def _kind_of(dtype: pl.DataType) -> str | None:
    """The kind of a column type (``None``: nested, binary or another type no column takes)."""
    if dtype == pl.String or isinstance(dtype, pl.Categorical | pl.Enum):
        return _TEXT
    if dtype.is_integer():
        return _INTEGER
    if dtype.is_float() or dtype.is_decimal():
        return _FLOAT
    if dtype == pl.Boolean:
        return _BOOLEAN
    if dtype in (pl.Date, pl.Time) or isinstance(dtype, pl.Datetime):
        return _DATE
    return None


def check_types(path: Path, schema: dict[str, pl.DataType] | pl.Schema) -> None:
    """Each column's type is one its role accepts (:data:`_ACCEPTED`; a label column: text,
    numbers, booleans or dates); a column of nulls only (type ``Null``) is checked row by row.
    Raises one :class:`QlogError` naming the column, its type and the accepted kinds, before
    anything is cast."""
    for name, dtype in schema.items():
        if dtype == pl.Null:
            continue
        accepted = _ACCEPTED.get(name, _LABEL_KINDS)
        if _kind_of(dtype) not in accepted:
            what = f'the column "{name}"' if name in _ACCEPTED else f'the label column "{name}"'
            kinds = (
                ", ".join(accepted[:-1]) + " or " + accepted[-1]
                if len(accepted) > 1
                else (accepted[0])
            )
            raise QlogError(str(path), f"{what} to hold {kinds}", got=f"a column of type {dtype}")


def library_failure(exc: BaseException) -> str:
    """What a table library's failure on a mangled file says, the same from call to call: a
    panic of polars' Rust code is named by its message only (without the task ids and thread
    names that change between calls)."""
    text = str(exc).strip()
    if isinstance(exc, _PanicException):
        message = text
        while found := _PANIC_MESSAGE.search(message):  # the innermost task's panic
            message = found.group(1).replace('\\"', '"').replace("\\\\", "\\")
        message = _VOLATILE.sub("", re.split(r"\n|\\n", message)[0]).strip()
        return f"a file the Parquet reader cannot decode (it panicked: {message[:120]})"
    return text.splitlines()[0][:200] if text else type(exc).__name__


#: the message of a panic in a polars task (``JoinError::Panic(Id(7), "capacity overflow", ..)``)
_PANIC_MESSAGE = re.compile(r'Panic\(Id\(\d+\), "((?:[^"\\]|\\.)*)"')
#: numbers that change between calls: task ids, thread ids
_VOLATILE = re.compile(r"Id\(\d+\)|\(\d+\)")
#: what Rust's default panic hook writes to stderr: a header line, the message, then either a
#: note on RUST_BACKTRACE or the backtrace (indented frames) and perhaps a note after it
_PANIC_HEADER = re.compile(rb"^thread '[^']*'(?: \(\d+\))? panicked at ")
_STDERR_LOCK = threading.RLock()  # a guarded call may run another (nested spools are fine)


@contextmanager
def quiet_panics() -> Iterator[None]:
    """Run a table library call with the process's stderr (file descriptor 2) spooled: a panic
    in polars' Rust code is turned into :class:`~polars.exceptions.PanicException` by polars,
    but Rust's panic hook has already written its report (and a backtrace, per
    ``RUST_BACKTRACE``) to stderr. Those reports are dropped; anything else written meanwhile is
    written to stderr after the call. Calls are serialised (the descriptor is the process's)."""
    with _STDERR_LOCK, tempfile.TemporaryFile() as spool:
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError, AttributeError):  # no stderr to guard
            yield
            return
        os.dup2(spool.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            spool.seek(0)
            kept = _without_panic_reports(spool.read())
            if kept:
                os.write(2, kept)


def _without_panic_reports(text: bytes) -> bytes:
    """``text`` less the reports of Rust's default panic hook."""
    if b"panicked at " not in text:
        return text
    out: list[bytes] = []
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        if not _PANIC_HEADER.match(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        if out and not out[-1].strip():
            out.pop()  # the hook's blank line before its report
        i += 1
        while i < len(lines) and not lines[i].startswith((b"note: run with", b"stack backtrace:")):
            i += 1  # the message
        if i < len(lines) and lines[i].startswith(b"stack backtrace:"):
            i += 1
            while i < len(lines) and lines[i][:1] in (b" ", b"\t"):
                i += 1  # the frames
            if i < len(lines) and lines[i].startswith(b"note: Some details are omitted"):
                i += 1
        elif i < len(lines):
            i += 1  # the note on RUST_BACKTRACE
    return b"".join(out)


def read_table(
    path: Path,
    kind: str,
    *,
    blocks: Iterable[bytes] | None = None,
    lenient: bool,
    diagnostics: Diagnostics,
    max_line_bytes: int = 64 << 20,
    labels: dict[str, dict[str, str]] | None = None,
    summary: list[pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """Read a CSV (``blocks`` = its decompressed content) or Parquet table into transitions rows.
    The label columns' values per trace are added to ``labels`` (trace -> label -> value) when
    it is given, and the table's :func:`trace_summary` to ``summary``.

    Returns the rows (not yet normalised); bad rows raise :class:`QlogError` naming the line
    (CSV) or row (Parquet), or are skipped and counted when ``lenient``. CSV is read in chunks of
    whole lines (:func:`csv_chunks`). A failure of the table libraries on a mangled file is our
    error naming the file.
    """
    try:
        if kind == "Parquet":
            return _finish(
                [
                    _typed(
                        path,
                        _rows(path, kind, _load(path, kind, None), 0, lenient, diagnostics, labels),
                        diagnostics,
                    )
                ],
                summary,
            )
        assert blocks is not None
        parts = []
        try:
            for text, line in csv_chunks(blocks, max_line_bytes=max_line_bytes):
                raw = _load(path, kind, text)
                good = _rows(path, kind, raw, line - 2, lenient, diagnostics, labels)
                del raw
                parts.append(_typed(path, good, diagnostics))
        except _HeaderTooLong as exc:
            raise QlogError(
                str(path),
                f"a CSV header line of at most {MAX_HEADER_BYTES >> 10} KiB",
                line=1,
                got=f"{exc.size} bytes without a line end" if exc.size else "a longer line",
            ) from None
        except _TooLong as exc:
            raise QlogError(
                str(path),
                f"CSV lines of at most {max_line_bytes >> 20} MiB (ReadLimits.max_record_bytes)",
                got=f"more than {exc.size >> 20} MiB without a line end",
            ) from None
        return _finish(parts, summary)
    except QuicsmError as exc:
        released(exc)  # the chunks are not kept alive by the error
        raise
    except MemoryError as exc:
        released(exc)
        error: QuicsmError = out_of_memory(path)
    except (Exception, _PanicException) as exc:  # noqa: BLE001 - the reader's boundary
        released(exc)
        detail = library_failure(exc)
        error = QlogError(
            str(path),
            f"a {kind} transitions table",
            got=f"an unexpected {type(exc).__name__}{': ' + detail if detail else ''}",
        )
    raise error  # outside the handler: the error holds no reference to what failed


def _plausible(column: pl.Expr) -> pl.Expr:
    """A number (as text) that is finite and at most 1e18 in magnitude (as qlog times)."""
    number = column.cast(pl.Float64, strict=False)
    return number.is_finite() & (number.abs() <= MAX_MAGNITUDE)


#: a label that changed within a trace (not a label of it)
_VARIES = "\x00varies"


def _collect_labels(raw: pl.DataFrame, labels: dict[str, dict[str, str]] | None) -> None:
    """Add the label columns' value per trace of one chunk to ``labels``."""
    extra = [c for c in raw.columns if c not in (*REQUIRED, *OPTIONAL) and c]
    if labels is None or not extra or "trace" not in raw.columns:
        return
    part = raw.select(
        pl.col("trace").cast(pl.String).cast(KEY_DTYPE), *[pl.col(c).cast(pl.String) for c in extra]
    ).filter(pl.col("trace").is_not_null())
    per_trace = part.group_by("trace", maintain_order=True).agg(
        *[pl.col(c).drop_nulls().unique(maintain_order=True).alias(c) for c in extra]
    )
    for row in per_trace.iter_rows(named=True):
        own = labels.setdefault(str(row["trace"]), {})
        for c in extra:
            values = row[c]
            if not values:
                continue
            value = values[0] if len(values) == 1 else _VARIES
            if own.get(c, value) != value:
                value = _VARIES
            own[c] = value


def _typed_label(text: str) -> str | int | float:
    """A label's value as the table wrote it: numbers as numbers (so that ``completion_ms``
    is an outcome, as in a ``run.json``), anything else as text."""
    try:
        number = float(text)
    except ValueError:
        return text
    if not math.isfinite(number):
        return text
    try:
        return int(text)
    except ValueError:
        return number


def trace_labels(labels: dict[str, dict[str, str]], trace: str) -> dict[str, str | int | float]:
    """The labels of one trace of a table (those that do not vary within it)."""
    return {k: _typed_label(v) for k, v in labels.get(trace, {}).items() if v != _VARIES}


def _rows(
    path: Path,
    kind: str,
    raw: pl.DataFrame,
    offset: int,
    lenient: bool,
    diagnostics: Diagnostics,
    labels: dict[str, dict[str, str]] | None = None,
) -> pl.DataFrame:
    """The valid rows of one chunk as strings (``offset``: rows before it in the file); the
    label columns' values go to ``labels``."""
    missing = [c for c in REQUIRED if c not in raw.columns]
    if missing:
        raise QlogError(
            str(path),
            "columns trace, time_ms and state",
            line=1 if kind == "CSV" else None,
            got=f"columns {', '.join(raw.columns) or '(none)'}",
        )
    check_types(path, raw.schema)
    _collect_labels(raw, labels)
    raw = raw.select([c for c in (*REQUIRED, *OPTIONAL) if c in raw.columns])
    strings = raw.with_columns([pl.col(c).cast(pl.String) for c in raw.columns]).with_row_index(
        "_row"
    )
    checks = {
        "trace": ("a trace id", pl.col("trace").is_null() | (pl.col("trace") == "")),
        "time_ms": (
            "a number in time_ms",
            ~_plausible(pl.col("time_ms")).fill_null(False),
        ),
        "state": ("a state name", pl.col("state").is_null() | (pl.col("state") == "")),
    }
    if "vantage" in strings.columns:
        checks["vantage"] = (
            "vantage client, server or unknown",
            pl.col("vantage").is_not_null()
            & ~pl.col("vantage").is_in(["client", "server", "unknown"]),
        )
    if "source" in strings.columns:
        checks["source"] = (
            "source explicit or derived",
            pl.col("source").is_not_null() & ~pl.col("source").is_in(["explicit", "derived"]),
        )
    if "end_ms" in strings.columns:
        checks["end_ms"] = (
            "a number in end_ms",
            pl.col("end_ms").is_not_null() & ~_plausible(pl.col("end_ms")).fill_null(False),
        )
    bad = pl.any_horizontal([expr.fill_null(True) for _, expr in checks.values()])
    if not strings.select(bad.any()).item():  # every row valid (the usual case): no copy
        return strings.drop("_row")
    flags = strings.with_columns(
        [expr.fill_null(True).alias(f"_bad_{c}") for c, (_, expr) in checks.items()]
    )
    bad = pl.any_horizontal([f"_bad_{c}" for c in checks])
    for row in flags.filter(bad).iter_rows(named=True):
        column = next(c for c in checks if row[f"_bad_{c}"])
        expected, _ = checks[column]
        row_number = row["_row"] + offset
        where = {"line": row_number + 2} if kind == "CSV" else {"record": row_number + 1}
        error = QlogError(str(path), expected, got=repr(row[column]), **where)
        if not lenient:
            raise error
        diagnostics.skip(error)
    strings = flags.select(strings.columns)
    bad = pl.any_horizontal([expr.fill_null(True) for _, expr in checks.values()])
    return strings.filter(~bad).drop("_row")


def _finish(parts: list[pl.DataFrame], summary: list[pl.DataFrame] | None = None) -> pl.DataFrame:
    """Every chunk's rows; ``end_ms`` is the same on every row of a trace: the largest given
    ``end_ms``, or the trace's last time when some row gives none.

    Per trace means per group of :func:`trace_groups`: runs of rows when the table lists its
    traces one after another (no hashing of the ids), a window over integer ids otherwise (a
    nested window over the ids themselves cost time superlinear in their number: 44 s at a
    million traces). The table's :func:`trace_summary` goes to ``summary`` when it is given."""
    import numpy as np

    if not parts:
        if summary is not None:
            summary.append(trace_summary(pl.DataFrame(schema=TRANSITIONS_SCHEMA)))
        return pl.DataFrame(schema=TRANSITIONS_SCHEMA)
    frame = pl.concat(parts) if len(parts) > 1 else parts[0]
    starts = _run_starts(frame.get_column("trace"))
    if starts is not None and frame.get_column("end_ms").null_count() == frame.height:
        # the usual table: its traces one after another, no end_ms: each run's last time
        # (times are finite here), and the summary read off the runs' first rows
        n = frame.height
        lengths = np.diff(np.append(starts, n))
        time = frame.get_column("time_ms").to_numpy()
        ends = np.maximum.reduceat(time, starts) if n else time[:0]
        frame = frame.with_columns(pl.Series("end_ms", np.repeat(ends, lengths)))
        if summary is not None:
            summary.append(
                frame.select("trace", "vantage")
                .gather(starts)
                .with_columns(pl.Series("n", lengths, dtype=pl.UInt32), pl.Series("end_ms", ends))
            )
        return frame
    group = trace_groups(frame.get_column("trace"))
    last = pl.col("time_ms").max().over(group)
    if frame.get_column("end_ms").null_count() == frame.height:  # no end_ms given (usual)
        end = last
    else:
        given = pl.col("end_ms").max().over(group)
        end = (
            pl.when(pl.col("end_ms").null_count().over(group) > 0)
            .then(pl.max_horizontal(given, last))
            .otherwise(given)
        )
    frame = frame.with_columns(end.alias("end_ms"))
    if summary is not None:
        summary.append(_summary(frame, group))
    return frame


def trace_groups(trace: pl.Series) -> pl.Series:
    """An integer id per row, the same for the rows of one trace and different between traces:
    the run of the row when every trace's rows are one run (a table sorted by trace, or listing
    its traces one after another in any order), else the first row of its trace."""
    if trace.null_count() or _run_starts(trace) is not None:
        return trace.rle_id().rename("_group")
    frame = trace.to_frame("trace").with_row_index("_group")
    return frame.select(pl.col("_group").first().over("trace")).to_series()


def _run_starts(trace: pl.Series) -> np.ndarray | None:
    """Where the runs of equal ids start when each trace is one run (its rows one after
    another), else None; ids without nulls."""
    import numpy as np

    if trace.null_count():
        return None
    if trace.len() < 2:
        return np.arange(trace.len(), dtype=np.int64)
    runs = trace.rle_id().to_numpy()
    starts = np.flatnonzero(np.diff(runs, prepend=-1))
    firsts = trace.gather(starts)
    if (firsts.slice(1) > firsts.slice(0, firsts.len() - 1)).all():
        return starts  # runs of increasing ids: one run per trace
    if firsts.n_unique() == firsts.len():
        return starts  # every run a trace of its own
    return None


def trace_summary(table: pl.DataFrame) -> pl.DataFrame:
    """One row per trace of a table read by :func:`read_table`, in the order of its first row:
    ``trace``, its first ``vantage``, its rows ``n`` and its largest ``end_ms`` (grouped by
    :func:`trace_groups`: integers, not the ids)."""
    return _summary(table, trace_groups(table.get_column("trace")))


def _summary(table: pl.DataFrame, group: pl.Series) -> pl.DataFrame:
    return (
        table.select("trace", "vantage", "end_ms", group)
        .group_by("_group", maintain_order=True)
        .agg(
            pl.col("trace").first(),
            pl.col("vantage").first(),
            pl.len().alias("n"),
            pl.col("end_ms").max(),
        )
        .drop("_group")
    )


def _typed(path: Path, good: pl.DataFrame, diagnostics: Diagnostics) -> pl.DataFrame:
    """The valid rows of one chunk in the transitions schema (compact dtypes at once: a large
    table is never held as text), built by one ``select``."""
    names = good.get_column("state")
    states = names.cast(STATE_DTYPE, strict=False)  # canonical names (the usual case) as they are
    if states.null_count():  # aliases and unknown names: each distinct one mapped once
        at = states.is_null().arg_true()
        others = names.gather(at)
        mapping: dict[str, str] = {}
        for name, n in others.value_counts().iter_rows():
            state = canonical_state(name)
            if state == UNKNOWN and name != UNKNOWN:
                diagnostics.unknown_states[name] += n
            mapping[name] = state
        states = states.scatter(at, others.replace_strict(mapping, return_dtype=STATE_DTYPE))
    schema = TRANSITIONS_SCHEMA

    def given(name: str, default: str | None) -> pl.Expr:
        if name not in good.columns:
            return pl.lit(default, schema[name])
        column = pl.col(name)
        return (column if default is None else column.fill_null(default)).cast(schema[name])

    columns = {
        "file": given("file", str(path)),
        "trace": pl.col("trace").cast(schema["trace"]),
        "vantage": given("vantage", "unknown"),
        "time_ms": pl.col("time_ms").cast(pl.Float64),
        "state": pl.lit(states),
        # the raw name is always kept: the given raw_state, else the state as written
        "raw_state": pl.col("raw_state").fill_null(pl.col("state")).cast(schema["raw_state"])
        if "raw_state" in good.columns
        else pl.col("state").cast(schema["raw_state"]),
        "trigger": given("trigger", None),
        "source": given("source", "explicit"),
        "end_ms": given("end_ms", None),
    }
    return good.select(**{name: columns[name] for name in schema})
