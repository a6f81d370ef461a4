"""Each trace of some files with where it lies: the rows of
:func:`quicsm.extract.read.read_traces`, each trace's number in its file, and its span (the
bytes of its records in the file's decompressed content, JSON-SEQ and NDJSON only).

A later read of a few traces names them as :class:`quicsm.qlog.paths.TraceSpans` and reads
their bytes only (:func:`quicsm.qlog.source.read_qlog`); :mod:`quicsm.engine.index` keeps the
index of each file in the cache, so a file is indexed once. Building the index reads what
``read_traces`` reads (headers and the records that bound each trace), no event in between.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import polars as pl

from quicsm.core.diagnostics import Diagnostics
from quicsm.extract.loading import check_on_error, load_all
from quicsm.extract.traces_frame import TRACES_SCHEMA, trace_rows, traces_frame
from quicsm.qlog.paths import PathLike, Span, TraceSpans

#: the index: the trace table, the trace's number in its file (qlog) and its span
#: (``start``/``end``: null where the format has none, as in contained JSON and tables)
INDEX_SCHEMA: Final[dict[str, pl.DataType]] = {
    **TRACES_SCHEMA,
    "number": pl.Int64(),
    "start": pl.Int64(),
    "end": pl.Int64(),
}


def read_trace_index(
    paths: PathLike | Iterable[PathLike],
    *,
    on_error: str = "raise",
    diagnostics: Diagnostics | None = None,
) -> pl.DataFrame:
    """One row per trace (:data:`INDEX_SCHEMA`), in the order of :func:`read_traces`; what
    reading reported goes to ``diagnostics`` (no warning is emitted)."""
    lenient = check_on_error(on_error)
    diag = diagnostics if diagnostics is not None else Diagnostics()
    parts: list[pl.DataFrame] = []
    for loaded in load_all(paths, lenient=lenient, diag=diag, count=True, discard_metrics=True):
        rows: dict[str, list[Any]] = {name: [] for name in TRACES_SCHEMA}
        trace_rows(loaded, rows)
        frame = traces_frame(rows)
        numbers: list[int | None] = [None] * frame.height
        starts: list[int | None] = [None] * frame.height
        ends: list[int | None] = [None] * frame.height
        if loaded.read is not None:
            spans = {index: (a, b) for index, a, b in loaded.read.spans or ()}
            for i, trace in enumerate(loaded.read.traces):
                numbers[i] = trace.index
                starts[i], ends[i] = spans.get(trace.index, (None, None))
        parts.append(
            frame.with_columns(
                pl.Series("number", numbers, dtype=pl.Int64),
                pl.Series("start", starts, dtype=pl.Int64),
                pl.Series("end", ends, dtype=pl.Int64),
            )
        )
    if not parts:
        return pl.DataFrame(schema=INDEX_SCHEMA)
    return pl.concat(parts)


def spans_of(index: pl.DataFrame) -> list[PathLike]:
    """What to read for the traces of ``index`` (rows of :func:`read_trace_index`, any subset):
    per file, its :class:`~quicsm.qlog.paths.TraceSpans` when every chosen trace has a span,
    else the file itself (read whole), in the order files first appear."""
    out: dict[str, list[Span] | None] = {}
    for file, number, start, end in index.select(
        pl.col("file").cast(pl.String), "number", "start", "end"
    ).iter_rows():
        if file in out and out[file] is None:
            continue
        if number is None or start is None or end is None:
            out[file] = None
            continue
        out.setdefault(file, [])
        spans = out[file]
        assert spans is not None
        spans.append((number, start, end))
    return [
        file if spans is None else TraceSpans(file, tuple(spans)) for file, spans in out.items()
    ]
