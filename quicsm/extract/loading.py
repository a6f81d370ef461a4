"""The I/O driver of the readers: paths to files read (qlog) or loaded (CSV / Parquet tables),
each with its run labels and, when states are derived, the states derived while it was read.

:func:`load_all` is what every public reader (:mod:`quicsm.extract.read`) iterates; trace ids
(:func:`trace_id`) and the rounding of times (:data:`TIME_DECIMALS`) are shared by every frame
built from what it loads.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from quicsm.core.diagnostics import Diagnostics, RecordKey
from quicsm.core.errors import InputError, QlogError
from quicsm.extract.sidecar import sidecar_labels
from quicsm.qlog.blocks import DEFAULT_LIMITS, DecompressedFile, ReadLimits
from quicsm.qlog.paths import PathLike, expand_spans
from quicsm.qlog.source import CSV, PARQUET, FileRead, Span, read_qlog, without_bom
from quicsm.qlog.tabular import read_table
from quicsm.qlog.trace import Discard, MetricSink

if TYPE_CHECKING:  # the deriving path's modules are imported where it runs (read_metrics does
    # not derive, and its process need not pay for them)
    from quicsm.extract.profiles import Profile
    from quicsm.extract.streaming import StreamedStates
    from quicsm.extract.wire import PacketRead

#: "raise" (strict, the default) or "skip" (lenient); checked at run time
OnError = str

#: times are rounded to the microsecond: float64 epoch milliseconds (about 1.7e12) carry only
#: about 0.2 microseconds of precision, and no producer logs finer than that
TIME_DECIMALS = 3


def trace_id(file: str, index: int) -> str:
    return f"{file}#{index:04d}"


def report_skipped(diag: Diagnostics, read: FileRead) -> None:
    """The records a lenient read skipped, into ``diag``: counted, the first few with their
    reasons, each reason naming the file, the record (or line), what was expected and the
    trace holding the record where the file tells it. A record that another read of the same
    file reported already (the same :data:`~quicsm.core.diagnostics.RecordKey`: the states and
    the packets of a file are read apart) is neither counted nor given again."""
    if not read.skipped:
        return
    file = str(read.path)
    reasons = []
    for key, error in zip(read.problem_keys, read.problems, strict=False):
        index = _trace_of(key, read.spans)
        reason = str(error) if index is None else f"{error} (trace {trace_id(file, index)})"
        reasons.append((key, reason))
    diag.skip_records(file, skipped=read.skipped, keys=read.skipped_keys, reasons=reasons)


def _trace_of(key: RecordKey | None, spans: list[Span] | None) -> int | None:
    """The index of the trace whose bytes hold the record at offset ``key`` (JSON-SEQ,
    NDJSON); None where it is not known or the key names it itself (contained JSON's
    ``traces[i].events[j]``)."""
    if not isinstance(key, int) or not spans:
        return None
    for index, start, end in spans:
        if start <= key < end:
            return index
    return None


@dataclass
class LoadedFile:
    path: Path
    kind: str  # the detected format
    read: FileRead | None  # qlog
    table: pl.DataFrame | None  # CSV / Parquet transitions
    sidecar: dict[str, Any]
    #: states derived while the file was read (hybrid and derived modes)
    streamed: StreamedStates | None = None
    #: CSV / Parquet: the label columns' values per trace
    table_labels: dict[str, dict[str, str]] | None = None
    #: CSV / Parquet: one row per trace (:func:`quicsm.qlog.tabular.trace_summary`)
    table_summary: pl.DataFrame | None = None
    #: every trace's packets, read only when a trace needs them
    #: (:func:`quicsm.extract.wire_pass.wire_pass`)
    packets: PacketRead | None = None
    limits: ReadLimits = DEFAULT_LIMITS
    #: read with ``on_error="skip"``
    lenient: bool = False


def check_on_error(on_error: str) -> bool:
    if on_error not in ("raise", "skip"):
        raise InputError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
    return on_error == "skip"


def load_all(
    paths: PathLike | Iterable[PathLike],
    *,
    lenient: bool,
    diag: Diagnostics,
    want_metrics: bool = False,
    count: bool = False,
    derive: bool = False,
    profile: Profile | None = None,
    hybrid: bool = False,
    limits: ReadLimits = DEFAULT_LIMITS,
    sidecars: dict[Path, dict[str, Any]] | None = None,
    discard_metrics: bool = False,
    sink: MetricSink | None = None,
) -> Iterator[LoadedFile]:
    """Each file read (qlog) or loaded (tables); a qlog file without a trace is an error.
    ``sidecars`` caches the run.json files read, across calls; ``discard_metrics``: metric,
    loss and timer events are not wanted (neither kept nor decoded); ``sink``: where they go
    instead of the traces' ``metrics`` lists."""
    cache: dict[Path, dict[str, Any]] = {} if sidecars is None else sidecars
    for path, spans in expand_spans(paths):
        streamed = None
        if discard_metrics:
            sink = Discard.of
        try:
            if derive:
                from quicsm.extract.streaming import StreamedStates

                sidecar = sidecar_labels(path, cache, lenient, diag)
                streamed = StreamedStates(sidecar=sidecar, profile=profile, hybrid=hybrid)
            read: FileRead | None = read_qlog(
                path,
                want_metrics=want_metrics or derive,
                count=count,
                lenient=lenient,
                limits=limits,
                metric_sink=streamed if streamed is not None else sink,
                spans=spans,
            )
            assert read is not None
            table = None
            table_labels: dict[str, dict[str, str]] = {}
            summary: list[pl.DataFrame] = []
            kind = read.kind
            if read.kind in (CSV, PARQUET):
                blocks = None
                if read.kind == CSV:
                    blocks = without_bom(DecompressedFile(path, limits=limits).blocks())
                table = read_table(
                    path,
                    read.kind,
                    blocks=blocks,
                    lenient=lenient,
                    diagnostics=diag,
                    max_line_bytes=limits.max_record_bytes,
                    labels=table_labels,
                    summary=summary,
                )
                read = None
            elif not read.traces:
                raise QlogError(str(path), "at least one complete qlog trace", got="none")
        except QlogError as error:
            if not lenient:
                raise
            diag.skip(error, file_level=True)
            continue
        if read is not None:
            report_skipped(diag, read)
            if read.truncated:
                diag.truncated.append(read.truncated)
            for trace in read.traces:
                note = trace.repair_note()
                if note is not None:
                    diag.note(f"{trace_id(str(path), trace.index)}: {note}")
        yield LoadedFile(
            path,
            kind,
            read,
            table,
            sidecar_labels(path, cache, lenient, diag),
            streamed,
            table_labels,
            limits=limits,
            table_summary=summary[0] if summary else None,
            lenient=lenient,
        )
