"""The I/O side of reading qlog: open, decompress, detect the format by content, drive a parser.

Formats are told apart by their bytes, never by file names (section "Formats" of
``docs/formats.md``):

- gzip (``1f 8b``) and zstd (``28 b5 2f fd``) are decompressed as a stream first;
- ``0x1E`` first: JSON-SEQ (RFC 7464);
- ``{`` first: NDJSON when the first line is a complete JSON object followed by more lines
  (or says ``"qlog_format": "NDJSON"``), otherwise one contained JSON document;
- ``PAR1``: a Parquet transitions table; a first line naming ``trace``, ``time_ms`` and
  ``state`` columns: a CSV transitions table (:mod:`quicsm.qlog.tabular`).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import zstandard

from quicsm.core.diagnostics import MAX_REASONS, RecordProblem
from quicsm.core.errors import InputError, QlogError
from quicsm.qlog.contained import ContainedParser
from quicsm.qlog.seq import LF, RS, Buffer, SeqScanner
from quicsm.qlog.trace import MetricSink, TraceData

#: decompressed bytes handed to the parser at a time
BLOCK_SIZE = 8 << 20

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
PARQUET_MAGIC = b"PAR1"

JSON_SEQ = "JSON-SEQ"
NDJSON = "NDJSON"
JSON = "JSON"
CSV = "CSV"
PARQUET = "Parquet"


@dataclass
class FileRead:
    """What reading one file produced."""

    path: Path
    kind: str
    compression: str | None
    traces: list[TraceData] = field(default_factory=list)
    #: the first few problems of a lenient read, located (file, record, line)
    problems: list[QlogError] = field(default_factory=list)
    #: how many records a lenient read skipped
    skipped: int = 0
    truncated: str | None = None


#: called with the number of bytes of the file just read (see :func:`count_bytes`)
_byte_counter: Callable[[int], None] | None = None


@contextmanager
def count_bytes(callback: Callable[[int], None]) -> Iterator[None]:
    """Call ``callback(n)`` whenever ``n`` more bytes of a file (as stored, compressed or not)
    were read, while the block is active: how a progress bar advances inside large files."""
    global _byte_counter
    previous, _byte_counter = _byte_counter, callback
    try:
        yield
    finally:
        _byte_counter = previous


class DecompressedFile:
    """A file's decompressed content in blocks; notes a compressed stream that ends early."""

    def __init__(self, path: Path, *, block_size: int = BLOCK_SIZE) -> None:
        self.path = path
        self.block_size = block_size
        self.cut_short = False
        with path.open("rb") as f:
            magic = f.read(4)
        self.compression = (
            "gzip" if magic.startswith(GZIP_MAGIC) else "zstd" if magic == ZSTD_MAGIC else None
        )

    def blocks(self) -> Iterator[Buffer]:
        try:
            with self.path.open("rb", buffering=0) as raw:
                if self.compression is None:
                    # one reused buffer: no fresh allocation (and page faults) per block; the
                    # parsers copy what they keep. A small file gets a buffer its size, not a
                    # block: zeroing 8 MB per file would cost more than reading it.
                    size = os.fstat(raw.fileno()).st_size
                    buffer = bytearray(min(self.block_size, max(1 << 16, size + 1)))
                    while n := raw.readinto(buffer):
                        if _byte_counter is not None:
                            _byte_counter(n)
                        if n < len(buffer):
                            del buffer[n:]
                        yield buffer
                else:
                    yield from self._decompress(raw)
        except (OSError, zlib.error, zstandard.ZstdError) as exc:
            if isinstance(exc, FileNotFoundError | PermissionError | IsADirectoryError):
                raise InputError(f"{self.path}: cannot read: {exc.strerror}") from None
            raise QlogError(
                str(self.path), f"a readable {self.compression} stream", got=str(exc)
            ) from None

    def _decompressor(self) -> Any:
        if self.compression == "gzip":
            return zlib.decompressobj(wbits=31)
        return zstandard.ZstdDecompressor().decompressobj()

    def _decompress(self, raw: BinaryIO) -> Iterator[bytes]:
        """Decompress frame after frame (concatenated gzip members / zstd frames); output
        already produced is kept when the compressed stream stops mid-frame."""
        d = self._decompressor()
        started = False
        read_size = max(1 << 16, self.block_size // 8)
        while chunk := raw.read(read_size):
            if _byte_counter is not None:
                _byte_counter(len(chunk))
            data = chunk
            while data:
                started = True
                out = d.decompress(data)
                if out:
                    yield out
                if d.eof:
                    data = d.unused_data
                    d = self._decompressor()
                    started = False
                else:
                    data = b""
        if started and not d.eof:
            self.cut_short = True


def detect(head: Buffer) -> str | None:
    """The format of decompressed content from its first block, ``None`` if unrecognised."""
    if head.startswith(PARQUET_MAGIC):
        return PARQUET
    body = bytes(head[: 1 << 16]).lstrip(b" \t\r\n\xef\xbb\xbf")
    if body.startswith(RS):
        return JSON_SEQ
    if body.startswith(b"{"):
        end = body.find(LF)
        if end != -1 and body[end:].strip():
            try:
                first = orjson.loads(body[:end])
            except orjson.JSONDecodeError:
                return JSON
            if isinstance(first, dict):
                return NDJSON
        if end != -1:
            try:
                first = orjson.loads(body[:end])
                if isinstance(first, dict) and first.get("qlog_format") == "NDJSON":
                    return NDJSON
            except orjson.JSONDecodeError:
                pass
        return JSON
    first_line = body.split(b"\n", 1)[0].decode("utf-8", "replace")
    columns = {c.strip().strip('"') for c in first_line.split(",")}
    if len({"trace", "time_ms", "state"} & columns) >= 2:  # a table, maybe missing a column
        return CSV
    return None


def _describe_head(head: Buffer) -> str:
    text = bytes(head[:4096]).lstrip()[:24]
    if not text:
        return "an empty file"
    printable = text.decode("utf-8", "replace")
    return f"content starting {printable!r}"


def locate_in_file(source: DecompressedFile, offset: int, sep: bytes) -> tuple[int, int]:
    """1-based (record, line) of a stream offset, recounted from the file's start."""
    records = lines = 0
    seen = 0
    for block in source.blocks():
        take = min(len(block), offset + 1 - seen)
        if take <= 0:
            break
        part = block[:take]
        records += part.count(sep)
        lines += part.count(LF)
        seen += take
    if sep == LF:
        return lines + 1, lines + 1
    # the byte at `offset` starts a record's content; its separator was counted
    return max(records, 1), lines + 1


def to_error(
    path: Path, problem: RecordProblem, source: DecompressedFile | None, sep: bytes | None
) -> QlogError:
    """A core problem as a :class:`QlogError` naming the file, record and line."""
    name = str(path)
    if problem.where is not None:
        return QlogError(f"{name}: {problem.where}", problem.expected, got=problem.got)
    if problem.offset is not None and source is not None and sep is not None:
        record, line = locate_in_file(source, problem.offset, sep)
        if sep == LF:
            return QlogError(name, problem.expected, line=line, got=problem.got)
        return QlogError(name, problem.expected, record=record, line=line, got=problem.got)
    return QlogError(name, problem.expected, line=problem.line, got=problem.got)


def read_qlog(
    path: Path,
    *,
    want_metrics: bool = False,
    full: bool = False,
    count: bool = False,
    lenient: bool = False,
    block_size: int = BLOCK_SIZE,
    max_problems: int = MAX_REASONS,
    metric_sink: MetricSink | None = None,
) -> FileRead:
    """Read one qlog file (any serialization, compressed or not) into traces.

    Strict (``lenient=False``): the first bad record raises :class:`QlogError`. Lenient: bad
    records are skipped and returned in ``problems``. Truncation is never an error.
    CSV/Parquet files are only detected here (``kind``); :mod:`quicsm.qlog.tabular` reads them.
    """
    source = DecompressedFile(path, block_size=block_size)
    blocks = source.blocks()
    head: Buffer = b""
    for block in blocks:  # enough of the start to tell the format
        if not head and len(block) >= 1 << 16:
            head = block  # a full block: fed before the reused buffer is refilled
            break
        head = bytes(head) + bytes(block)  # copies: the next block may reuse the buffer
        if len(head) >= 1 << 16:
            break
    kind = detect(head)
    result = FileRead(path, kind or "unknown", source.compression)
    if kind in (CSV, PARQUET):
        return result
    if kind is None:
        raise QlogError(
            str(path),
            "a qlog file (JSON, JSON-SEQ or NDJSON) or a transitions table (CSV or Parquet)",
            got=_describe_head(head),
        )
    sep = RS if kind == JSON_SEQ else LF
    try:
        if kind == JSON:
            data = bytes(head) + b"".join(blocks)
            parser = ContainedParser(
                want_metrics=want_metrics, lenient=lenient, metric_sink=metric_sink
            )
            result.traces = parser.parse(data)
            problems, truncated_at = parser.problems, parser.truncated_at
            if truncated_at is not None:
                line = data.count(LF, 0, truncated_at) + 1
                kept = sum(t.n_events or 0 for t in result.traces)
                result.truncated = (
                    f"{path}: the JSON document ends early (line {line}): "
                    f"kept {kept} complete events"
                )
        else:
            scanner = SeqScanner(
                sep=sep,
                want_metrics=want_metrics,
                full=full,
                count=count,
                lenient=lenient,
                metric_sink=metric_sink,
            )
            if head:
                scanner.feed(head)
            for block in blocks:
                scanner.feed(block)
            result.traces = scanner.close()
            problems, truncated_at = scanner.problems, scanner.truncated_at
            if truncated_at is not None:
                record, line = locate_in_file(source, truncated_at, sep)
                what = f"record {record} (line {line})" if sep == RS else f"line {line}"
                result.truncated = (
                    f"{path}: {what} is incomplete: the file was cut mid-write; "
                    "every complete record before it was kept"
                )
    except RecordProblem as problem:
        raise to_error(path, problem, source, sep) from None
    if source.cut_short:
        cut = f"{path}: the {source.compression} stream ends early; every complete record was kept"
        result.truncated = cut if result.truncated is None else f"{result.truncated}; {cut}"
    result.skipped = len(problems)
    result.problems = [to_error(path, p, source, sep) for p in problems[:max_problems]]
    return result
