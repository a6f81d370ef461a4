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

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import orjson

from quicsm.core.diagnostics import (
    MAX_REASONS,
    RecordKey,
    RecordProblem,
    RecordTooLarge,
    record_key,
)
from quicsm.core.errors import QlogError, QuicsmError, out_of_memory, released
from quicsm.qlog.blocks import (
    BLOCK_SIZE,
    DEFAULT_LIMITS,
    DecompressedFile,
    ReadLimits,
    keep_spans,
    record_too_large,
)
from quicsm.qlog.seq import LF, RS, Buffer, SeqScanner
from quicsm.qlog.trace import MetricSink, TraceData

if TYPE_CHECKING:  # contained JSON's parser is imported when one is read (it imports numpy)
    from quicsm.qlog.contained import ContainedParser, Headers

PARQUET_MAGIC = b"PAR1"
BOM = b"\xef\xbb\xbf"

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
    #: the :data:`~quicsm.core.diagnostics.RecordKey` of each skipped record that has one
    skipped_keys: set[RecordKey] = field(default_factory=set)
    #: the key of the record each of ``problems`` is about (None: none)
    problem_keys: list[RecordKey | None] = field(default_factory=list)
    truncated: str | None = None
    #: JSON-SEQ and NDJSON: where each trace read lies in the decompressed content, as
    #: ``(trace index, start, end)`` byte offsets (a later read can take it alone: ``spans`` of
    #: :func:`read_qlog`); ``None`` for other formats
    spans: list[Span] | None = None


#: ``(trace index, start, end)``: a trace's bytes in a file's decompressed content
Span = tuple[int, int, int]


def detect(head: Buffer) -> str | None:
    """The format of decompressed content from its first block, ``None`` if unrecognised."""
    if head.startswith(PARQUET_MAGIC):
        return PARQUET
    body = bytes(head[: 1 << 16]).removeprefix(BOM).lstrip(b" \t\r\n")
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


#: ``var name = {`` (or let/const): a JavaScript file that wraps a qlog object
_JS_ASSIGNMENT: Final = re.compile(rb"(?:var|let|const)\s+[A-Za-z_$][\w$]*\s*=\s*[{\[]")


def _describe_head(head: Buffer) -> str:
    """The start of unrecognised content, as escaped text: never raw binary."""
    text = bytes(head[:4096]).lstrip()[:24]
    if not text:
        return "an empty file"
    try:
        decoded: str | None = text.decode("utf-8")
    except UnicodeDecodeError as exc:  # a character cut at the end is still text
        cut = exc.reason == "unexpected end of data"
        decoded = text[: exc.start].decode("utf-8") if cut else None
    if decoded is not None and all(c.isprintable() or c in "\t\r\n" for c in decoded):
        if _JS_ASSIGNMENT.match(bytes(head[:4096]).lstrip()):
            return (
                f"content starting {decoded!r}: JavaScript that assigns an object to a variable "
                "(as qvis's .qlog.js examples are), not qlog: save the object after '=' as a "
                "file of its own to read it"
            )
        if decoded.startswith(("//", "/*")):
            return (
                f"content starting {decoded!r}: a comment, which JSON (and so qlog) does not allow"
            )
        return f"content starting {decoded!r}"
    # binary: bytes as Python writes them (\x16, \n, printable ASCII as itself)
    return f"binary content starting {str(text)[1:]}"


def locate_in_file(source: DecompressedFile, offset: int, sep: bytes) -> tuple[int, int]:
    """1-based (record, line) of a stream offset, recounted from the file's start."""
    records = lines = 0
    seen = 0
    for block in without_bom(source.blocks()):
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


def without_bom(blocks: Iterator[bytes]) -> Iterator[bytes]:
    """The blocks of a stream without a leading UTF-8 byte order mark (some Windows tools
    write one; JSON forbids it, RFC 8259 section 8.1, but parsers may ignore it)."""
    first = True
    pending = b""
    for block in blocks:
        if first:
            pending += block
            if len(pending) < len(BOM) and BOM.startswith(pending):
                continue
            first = False
            block = pending.removeprefix(BOM)
            pending = b""
            if not block:
                continue
        yield block
        del block
    if first and pending and pending != BOM[: len(pending)]:
        yield pending


def read_qlog(
    path: Path,
    *,
    want_metrics: bool = False,
    full: bool = False,
    count: bool = False,
    lenient: bool = False,
    block_size: int = BLOCK_SIZE,
    max_problems: int = MAX_REASONS,
    limits: ReadLimits = DEFAULT_LIMITS,
    metric_sink: MetricSink | None = None,
    spans: Sequence[Span] | None = None,
) -> FileRead:
    """Read one qlog file (any serialization, compressed or not) into traces.

    ``spans`` (from :attr:`FileRead.spans` of an earlier read of the same content): read only
    those traces of a JSON-SEQ or NDJSON file, the bytes before and between them decompressed
    but not looked at, and the rest of the file not read at all; trace numbers and record
    locations are those of a read of the whole file. Other formats are read whole.

    Strict (``lenient=False``): the first bad record raises :class:`QlogError`. Lenient: bad
    records are skipped and returned in ``problems``. Truncation is never an error.
    CSV/Parquet files are only detected here (``kind``); :mod:`quicsm.qlog.tabular` reads them.
    Any other exception raised while reading (a bug, or a library failing on hostile input) is
    turned into a :class:`QlogError` naming the file.
    """
    error: QuicsmError
    try:
        return _read_qlog(
            path,
            want_metrics=want_metrics,
            full=full,
            count=count,
            lenient=lenient,
            block_size=block_size,
            max_problems=max_problems,
            limits=limits,
            metric_sink=metric_sink,
            spans=spans,
        )
    except QuicsmError as exc:
        released(exc)  # the parser's buffers are not kept alive by the error
        raise
    except MemoryError as exc:
        released(exc)
        error = out_of_memory(path)
    except (Exception, RecursionError) as exc:  # noqa: BLE001 - the reader's boundary
        released(exc)
        error = unexpected(path, exc)
    raise error  # outside the handler: the error holds no reference to what failed


def unexpected(path: Path | str, exc: BaseException) -> QlogError:
    """A failure no check of ours anticipated, as our error naming the file."""
    detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return QlogError(
        str(path),
        "a file quicsm can read",
        got=f"an unexpected {type(exc).__name__}{': ' + detail if detail else ''}",
    )


def _read_qlog(
    path: Path,
    *,
    want_metrics: bool,
    full: bool,
    count: bool,
    lenient: bool,
    block_size: int,
    max_problems: int,
    limits: ReadLimits,
    metric_sink: MetricSink | None,
    spans: Sequence[Span] | None = None,
) -> FileRead:
    source = DecompressedFile(path, block_size=block_size, limits=limits)
    blocks = without_bom(source.blocks())
    head = b""
    for block in blocks:  # enough of the start to tell the format
        head += block
        if len(head) >= 1 << 16:
            break
    if not head and source.compression and source.cut_short:
        raise QlogError(
            str(path),
            f"a valid {source.compression} stream",
            got=f"not a valid {source.compression} stream: it ends before any content "
            "(truncated, or not compressed data)",
        )
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
    stream = _prepend([head], blocks)
    del head  # one block alive at a time
    try:
        if kind == JSON:
            parser = _contained(stream, want_metrics, lenient, limits, None, metric_sink)
            if parser.reread:  # time conventions named after the events: read them again
                again = without_bom(source.blocks())
                parser = _contained(
                    again, want_metrics, lenient, limits, parser.reread, metric_sink
                )
            result.traces = parser.traces
            problems, skipped = parser.problems, parser.skipped
            result.skipped_keys = parser.skipped_keys
            if parser.truncated_at is not None:
                kept = sum(t.n_events or 0 for t in result.traces)
                result.truncated = (
                    f"{path}: the JSON document ends early (line {parser.truncated_line}): "
                    f"kept {kept} complete events"
                )
        else:

            def scanner_at(first_index: int = 0, offset: int = 0) -> SeqScanner:
                return SeqScanner(
                    sep=sep,
                    want_metrics=want_metrics,
                    full=full,
                    count=count,
                    lenient=lenient,
                    max_record_bytes=limits.max_record_bytes,
                    metric_sink=metric_sink,
                    first_index=first_index,
                    offset=offset,
                )

            if spans is not None:
                scanners = _read_spans(stream, spans, scanner_at)
            else:
                scanner = scanner_at()
                for block in stream:
                    scanner.feed(block)
                    del block  # one block alive at a time
                scanners = [scanner]
            problems, truncated_at, skipped = [], None, 0
            result.spans = []
            for scanner in scanners:
                traces = scanner.close()
                ends = [*scanner.starts[1:], scanner.fed] if scanner.starts else []
                result.spans += [
                    (t.index, a, b) for t, a, b in zip(traces, scanner.starts, ends, strict=True)
                ]
                result.traces += traces
                problems += scanner.problems
                skipped += scanner.skipped
                result.skipped_keys |= scanner.skipped_keys
                if scanner.truncated_at is not None:
                    truncated_at = scanner.truncated_at
            if truncated_at is not None:
                record, line = locate_in_file(source, truncated_at, sep)
                what = f"record {record} (line {line})" if sep == RS else f"line {line}"
                result.truncated = (
                    f"{path}: {what} is incomplete: the file was cut mid-write; "
                    "every complete record before it was kept"
                )
    except RecordTooLarge as problem:
        raise record_too_large(path, problem.size, limits) from None
    except RecordProblem as problem:
        raise to_error(path, problem, source, sep) from None
    if source.cut_short:
        cut = f"{path}: the {source.compression} stream ends early; every complete record was kept"
        result.truncated = cut if result.truncated is None else f"{result.truncated}; {cut}"
    result.skipped = skipped
    result.problems = [to_error(path, p, source, sep) for p in problems[:max_problems]]
    result.problem_keys = [record_key(p) for p in problems[:max_problems]]
    if spans is None and result.spans and not (problems or skipped or result.truncated):
        keep_spans(path, result.spans)  # a later read of some traces reads their bytes only
    return result


def _read_spans(
    blocks: Iterator[bytes], spans: Sequence[Span], scanner_at: Callable[[int, int], SeqScanner]
) -> list[SeqScanner]:
    """One scanner per span, fed the span's bytes of the stream ``blocks``; the stream is not
    read past the last span."""
    todo = sorted(spans, key=lambda span: span[1])
    scanners: list[SeqScanner] = []
    current: SeqScanner | None = None  # the scanner of todo[0], once its bytes have begun
    offset = 0  # where ``block`` lies in the stream
    for block in blocks:
        size = len(block)
        while todo:
            index, start, end = todo[0]
            if start >= offset + size:
                break  # it begins in a later block
            if current is None:
                current = scanner_at(index, start)
                scanners.append(current)
            lo, hi = max(start - offset, 0), min(end - offset, size)
            if hi > lo:
                current.feed(block[lo:hi])
            if end > offset + size:
                break  # it goes on in the next block
            todo.pop(0)
            current = None
        offset += size
        del block  # one block alive at a time
        if not todo:
            break
    return scanners


def _prepend(first: list[bytes], blocks: Iterator[bytes]) -> Iterator[bytes]:
    """``first``'s blocks, then ``blocks``, keeping no reference to a block once yielded."""
    while first:
        block = first.pop(0)
        if block:
            yield block
        del block
    yield from blocks


def _contained(
    blocks: Iterator[bytes],
    want_metrics: bool,
    lenient: bool,
    limits: ReadLimits,
    headers: Headers | None,
    metric_sink: MetricSink | None,
) -> ContainedParser:
    from quicsm.qlog.contained import ContainedParser

    parser = ContainedParser(
        want_metrics=want_metrics,
        lenient=lenient,
        max_record_bytes=limits.max_record_bytes,
        headers=headers,
        metric_sink=metric_sink,
    )
    for block in blocks:
        parser.feed(block)
        del block  # one block alive at a time
    parser.close()
    return parser
