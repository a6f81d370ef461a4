"""Summarise and fully validate one trace file (what ``quicsm inspect`` prints).

Unlike the readers' fast path, inspection decodes and validates *every* record, so it finds
problems in records that reading for transitions does not look at (``docs/formats.md``,
section "Validation").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

from quicsm.core.aliases import canonical_state
from quicsm.core.diagnostics import Diagnostics
from quicsm.core.states import UNKNOWN
from quicsm.qlog.blocks import DecompressedFile
from quicsm.qlog.source import CSV, PARQUET, read_qlog, without_bom
from quicsm.qlog.trace import Discard, MetricSink, TraceData

#: how many problems an inspection lists verbatim
MAX_LISTED = 20


@dataclass
class TraceSummary:
    index: int
    vantage: str
    format: str
    title: str | None
    n_events: int
    start_ms: float | None
    end_ms: float | None
    state_events: int
    unknown_states: list[str]
    #: the trace's repaired-times note (:meth:`quicsm.qlog.trace.TraceData.repair_note`)
    repaired: str | None = None


@dataclass
class Inspection:
    path: Path
    format: str
    compression: str | None
    traces: list[TraceSummary] = field(default_factory=list)
    event_counts: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    n_problems: int = 0
    truncated: str | None = None
    #: the traces as read (JSON-SEQ, NDJSON and JSON; their events are not kept)
    read: list[TraceData] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The human-readable report."""
        comp = f" ({self.compression}-compressed)" if self.compression else ""
        out = [f"file: {self.path}", f"format: {self.format}{comp}", f"traces: {len(self.traces)}"]
        for t in self.traces:
            span = (
                f"{t.start_ms:.3f} .. {t.end_ms:.3f} ms ({t.end_ms - t.start_ms:.3f} ms)"
                if t.start_ms is not None and t.end_ms is not None
                else "no events"
            )
            title = f" {t.title!r}" if t.title else ""
            out.append(
                f"  #{t.index}: {t.vantage}{title} [{t.format}] {t.n_events} events, "
                f"{t.state_events} state events, time {span}"
            )
            if t.repaired:
                out.append(f"    repaired: {t.repaired}")
            if t.unknown_states:
                out.append(f"    state names not in the alias table: {', '.join(t.unknown_states)}")
        if self.event_counts:
            out.append("events by name:")
            width = max(len(n) for n in self.event_counts)
            for name, n in sorted(self.event_counts.items(), key=lambda kv: (-kv[1], kv[0])):
                out.append(f"  {name:<{width}}  {n}")
        if self.truncated:
            out.append(f"truncated: {self.truncated}")
        if self.n_problems:
            listed = len(self.problems)
            out.append(f"problems: {self.n_problems} (first {listed} listed)")
            out.extend(f"  {p}" for p in self.problems)
        else:
            out.append("problems: none")
        return out


def inspect_file(path: str | PathLike[str], *, metric_sink: MetricSink | None = None) -> Inspection:
    """Decode and validate every record of ``path``; never raises for bad records.
    ``metric_sink``: sees each trace's metric, loss and timer events (by default they are
    checked, not kept)."""
    path = Path(path)
    # every event is decoded and validated; metric, loss and timer events are not kept
    read = read_qlog(
        path,
        full=True,
        want_metrics=metric_sink is not None,
        lenient=True,
        max_problems=MAX_LISTED,
        metric_sink=Discard.of if metric_sink is None else metric_sink,
    )
    result = Inspection(path, read.kind, read.compression, truncated=read.truncated)
    result.read = read.traces
    if read.kind in (CSV, PARQUET):
        import polars as pl

        from quicsm.qlog.tabular import read_table

        diag = Diagnostics()
        blocks = without_bom(DecompressedFile(path).blocks()) if read.kind == CSV else None
        table = read_table(path, read.kind, blocks=blocks, lenient=True, diagnostics=diag)
        summary = table.group_by("trace", maintain_order=True).agg(
            n=pl.len(), start=pl.col("time_ms").min(), end=pl.col("end_ms").max()
        )
        for i, (trace, n, start, end) in enumerate(summary.iter_rows()):
            result.traces.append(TraceSummary(i, "unknown", read.kind, trace, n, start, end, n, []))
        result.n_problems = diag.skipped_records
        result.problems = diag.reasons
        return result
    for t in read.traces:
        unknown = sorted(
            {
                s.new
                for s in t.states
                if canonical_state(s.new, cc_algorithm=t.cc_algorithm) == UNKNOWN
            }
        )
        result.traces.append(
            TraceSummary(
                t.index,
                t.vantage,
                t.format,
                t.title,
                t.n_events or 0,
                t.first_time,
                t.last_time,
                len(t.states),
                unknown,
                t.repair_note(),
            )
        )
        if t.event_counts:
            result.event_counts.update(t.event_counts)
    result.n_problems = read.skipped
    result.problems = [str(p) for p in read.problems]
    return result
