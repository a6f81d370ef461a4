"""The public readers: qlog files (any draft, any serialization) and transition tables to frames.

::

    read_transitions(paths, *, on_error="raise" | "skip", diagnostics=None) -> pl.DataFrame
    scan_transitions(paths, ...) -> pl.LazyFrame
    read_metrics(paths, ...) -> pl.DataFrame
    read_traces(paths, ...) -> pl.DataFrame

``paths`` are files, directories (searched recursively) and glob patterns
(:mod:`quicsm.qlog.paths`).
Strict by default: the first bad record raises :class:`quicsm.core.errors.QlogError`. With
``on_error="skip"`` bad records (and unreadable files) are skipped, counted, and reported with
the first few reasons in ``diagnostics`` (pass a :class:`Diagnostics` to read them) and in one
:class:`QuicsmWarning`. Truncated files and unknown state names are reported the same way in
both modes.

Trace ids are ``"<file>#<n>"`` (n = the trace's 0-based position in its file, zero-padded to
four digits), so the same inputs always give the same ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl

from quicsm.core.aliases import CC_ALGORITHM_KEYS, canonical_state, is_numeric
from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.core.errors import InputError, QlogError
from quicsm.core.frames import METRICS_SCHEMA, TRANSITIONS_SCHEMA, normalize_transitions
from quicsm.core.states import PAPER_STATES, UNKNOWN
from quicsm.extract.derive import (
    DERIVED,
    EXPLICIT,
    HYBRID,
    INSTRUMENTED_ONLY,
    Derivation,
    Row,
    check_mode,
    derive_states,
    logged_states,
    merge_hybrid,
)
from quicsm.extract.deriver import STATE_CODES, CompactRows, Deriver, describe_states
from quicsm.extract.native import NativeDeriver, make_deriver
from quicsm.extract.profiles import Profile, detect_profile, profile_named
from quicsm.qlog.blocks import DEFAULT_LIMITS, DecompressedFile, ReadLimits
from quicsm.qlog.events import MetricEvent
from quicsm.qlog.paths import PathLike, expand_paths
from quicsm.qlog.source import CSV, PARQUET, FileRead, read_qlog, without_bom
from quicsm.qlog.tabular import read_table
from quicsm.qlog.trace import TraceBuilder, TraceData

__all__ = [
    "BatchRead",
    "Diagnostics",
    "QuicsmWarning",
    "read_batch",
    "read_metrics",
    "read_traces",
    "read_transitions",
    "scan_transitions",
    "trace_id",
]

#: "raise" (strict, the default) or "skip" (lenient); checked at run time
OnError = str

#: times are rounded to the microsecond: float64 epoch milliseconds (about 1.7e12) carry only
#: about 0.2 microseconds of precision, and no producer logs finer than that
TIME_DECIMALS = 3

TRACES_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String(),
    "trace": pl.String(),
    "vantage": TRANSITIONS_SCHEMA["vantage"],
    "format": pl.String(),
    "title": pl.String(),
    "code_version": pl.String(),
    "n_events": pl.Int64(),
    "duration_ms": pl.Float64(),
    "labels": pl.String(),
}


def trace_id(file: str, index: int) -> str:
    return f"{file}#{index:04d}"


@dataclass
class _Loaded:
    path: Path
    kind: str  # the detected format
    read: FileRead | None  # qlog
    table: pl.DataFrame | None  # CSV / Parquet transitions
    sidecar: dict[str, Any]
    #: states derived while the file was read (hybrid and derived modes)
    streamed: _Streamed | None = None


class _TraceSink:
    """Feeds one trace's deriver; in hybrid mode it stops wanting events once the trace has
    logged a state that only an instrumented stack logs (it logs all eight: nothing to derive,
    and the reader skips decoding its metrics)."""

    __slots__ = ("_builder", "_checked", "_deriver", "_wanted", "scan_records")

    def __init__(self, deriver: Deriver | NativeDeriver, builder: TraceBuilder | None) -> None:
        self._deriver = deriver
        self._builder = builder
        self._checked = 0
        self._wanted = True
        #: the native deriver's pass over a block of records (the reader uses it if present)
        self.scan_records = getattr(deriver, "scan_records", None)

    def __call__(self, event: MetricEvent) -> object:
        return self._deriver.feed(event)

    def wanted(self) -> bool:
        builder = self._builder
        if builder is not None and self._wanted:
            logged = builder.states
            while self._checked < len(logged):
                if canonical_state(logged[self._checked].new) in INSTRUMENTED_ONLY:
                    self._wanted = False
                    break
                self._checked += 1
        return self._wanted


class _Streamed:
    """Derives states while a file is read: one deriver per trace is fed each metric, loss and
    timer event as it is decoded; the rows are kept, the events are not (memory O(one trace's
    open state), not O(file))."""

    def __init__(self, *, sidecar: dict[str, Any], profile: Profile | None, hybrid: bool) -> None:
        self.sidecar = sidecar
        self.profile = profile
        self.hybrid = hybrid
        self._traces: dict[int, tuple[Deriver | NativeDeriver, Derivation]] = {}

    def __call__(self, builder: TraceBuilder) -> _TraceSink:
        profile = self.profile or detect_profile(
            title=builder.title,
            code_version=builder.code_version,
            labels={**self.sidecar, **builder.labels},
        )
        deriver = make_deriver(profile)
        self._traces[builder.index] = (deriver, Derivation(profile))
        return _TraceSink(deriver, builder if self.hybrid else None)

    def derivation(self, index: int) -> Derivation | None:
        found = self._traces.get(index)
        if found is None:
            return None
        deriver, out = found
        out.states = deriver.rows
        out.notices = deriver.notices()
        return out


def _check_on_error(on_error: str) -> bool:
    if on_error not in ("raise", "skip"):
        raise InputError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
    return on_error == "skip"


def _sidecar(
    path: Path, cache: dict[Path, dict[str, Any]], lenient: bool, diag: Diagnostics
) -> dict[str, Any]:
    """Scalar fields of ``run.json`` next to a trace file (lab runs), ``{}`` if there is none."""
    directory = path.parent
    if directory in cache:
        return cache[directory]
    labels: dict[str, Any] = {}
    run = directory / "run.json"
    if run.is_file():
        try:
            try:
                text = run.read_bytes()
            except OSError as exc:
                raise QlogError(
                    str(run), "a readable JSON object of run labels", got=exc.strerror
                ) from None
            value = orjson.loads(text)
            if not isinstance(value, dict):
                raise QlogError(str(run), "a JSON object of run labels", got=type(value).__name__)
            labels = {
                str(k): v
                for k, v in value.items()
                if v is None or isinstance(v, str | int | float | bool)
            }
        except orjson.JSONDecodeError as exc:
            error = QlogError(
                str(run), "a JSON object of run labels", line=exc.lineno, got="invalid JSON"
            )
            if not lenient:
                raise error from None
            diag.skip(error, file_level=True)
        except QlogError as error:
            if not lenient:
                raise
            diag.skip(error, file_level=True)
    cache[directory] = labels
    return labels


def _load_all(
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
) -> Iterator[_Loaded]:
    """Each file read (qlog) or loaded (tables); a qlog file without a trace is an error.
    ``sidecars`` caches the run.json files read, across calls."""
    cache: dict[Path, dict[str, Any]] = {} if sidecars is None else sidecars
    for path in expand_paths(paths):
        streamed = None
        try:
            if derive:
                sidecar = _sidecar(path, cache, lenient, diag)
                streamed = _Streamed(sidecar=sidecar, profile=profile, hybrid=hybrid)
            read: FileRead | None = read_qlog(
                path,
                want_metrics=want_metrics or derive,
                count=count,
                lenient=lenient,
                limits=limits,
                metric_sink=streamed,
            )
            assert read is not None
            table = None
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
            for problem in read.problems:
                diag.skip(problem)
            diag.skipped_records += max(0, read.skipped - len(read.problems))
            if read.truncated:
                diag.truncated.append(read.truncated)
        yield _Loaded(path, kind, read, table, _sidecar(path, cache, lenient, diag), streamed)


def _labels_json(labels: dict[str, Any]) -> str:
    return orjson.dumps(labels, option=orjson.OPT_SORT_KEYS).decode()


def _cc_algorithm(trace: TraceData, sidecar: dict[str, Any]) -> str | None:
    if trace.cc_algorithm:
        return trace.cc_algorithm
    for key in CC_ALGORITHM_KEYS:
        if isinstance(sidecar.get(key), str):
            return str(sidecar[key])
    return None


def _trace_profile(loaded: _Loaded, trace: TraceData, profile: Profile | None) -> Profile:
    if profile is not None:
        return profile
    labels = {**loaded.sidecar, **trace.labels}
    return detect_profile(title=trace.title, code_version=trace.code_version, labels=labels)


def _derived_frame(
    file: str, tid: str, vantage: str, start: float, end: float, rows: CompactRows
) -> pl.DataFrame:
    """A trace's derived rows as a frame, built from the arrays (no object per row), each
    column in its final type (a long trace's frame is built once, not cast again)."""
    times = np.frombuffer(rows.times, dtype=np.float64) if len(rows) else np.zeros(0)
    n = len(rows) + 1
    codes = np.frombuffer(rows.states, dtype=np.uint8) if len(rows) else np.zeros(0, np.uint8)
    triggers = np.frombuffer(rows.triggers, dtype=np.uint16) if len(rows) else np.zeros(0, "u2")
    names = pl.Series("names", [None, *rows.trigger_names], dtype=pl.String)
    schema = TRANSITIONS_SCHEMA

    def constant(value: str | float | None, name: str) -> pl.Series:
        return pl.repeat(value, n, dtype=schema[name], eager=True).alias(name)

    return pl.DataFrame(
        [
            constant(file, "file"),
            constant(tid, "trace"),
            constant(vantage, "vantage"),
            pl.Series("time_ms", np.round(np.concatenate([[start], times]) - start, TIME_DECIMALS)),
            pl.Series("state", np.concatenate([[0], codes]).astype(np.uint32)).replace_strict(
                dict(enumerate(STATE_CODES)), return_dtype=schema["state"]
            ),
            constant(None, "raw_state"),
            names.gather(np.concatenate([[0], triggers.astype(np.int64) + 1])).alias("trigger"),
            constant("derived", "source"),
            constant(end, "end_ms"),
        ]
    )


def _transition_rows(
    loaded: _Loaded,
    trace: TraceData,
    rows: dict[str, list[Any]],
    diag: Diagnostics,
    *,
    states: str = HYBRID,
    profile: Profile | None = None,
    frames: list[pl.DataFrame] | None = None,
) -> None:
    file = str(loaded.path)
    tid = trace_id(file, trace.index)
    start = trace.first_time if trace.first_time is not None else 0.0
    end = round(trace.duration_ms, TIME_DECIMALS)

    def add(time: float, state: str, raw: str | None, trigger: str | None, source: str) -> None:
        rows["file"].append(file)
        rows["trace"].append(tid)
        rows["vantage"].append(trace.vantage)
        rows["time_ms"].append(round(time, TIME_DECIMALS))
        rows["state"].append(state)
        rows["raw_state"].append(raw)
        rows["trigger"].append(trigger)
        rows["source"].append(source)
        rows["end_ms"].append(end)

    explicit: list[Row] = []
    if trace.states and states != DERIVED:
        cc = _cc_algorithm(trace, loaded.sidecar)
        for event in trace.states:
            state = canonical_state(event.new, cc_algorithm=cc)
            if state == UNKNOWN:
                diag.unknown_state(event.new)
                if is_numeric(event.new) and cc is None:
                    diag.note(
                        f"{file}: numeric congestion states (picoquic) need the congestion "
                        "controller: give it as the label cc_algorithm (trace header or run.json); "
                        "kept raw as Unknown"
                    )
            explicit.append(Row(event.time, state, event.new, event.trigger, EXPLICIT))
    if states == EXPLICIT:
        chosen = explicit
    else:
        derivation = loaded.streamed.derivation(trace.index) if loaded.streamed else None
        if derivation is None:  # read without streaming (or a trace without a builder)
            derivation = derive_states(
                trace.metrics, profile=_trace_profile(loaded, trace, profile)
            )
        used = derivation.profile
        logged = logged_states(used, (r.state for r in explicit)) if states == HYBRID else None
        if logged is not None and logged >= set(PAPER_STATES):
            chosen = explicit  # the producer logs every state itself: nothing to derive
        else:
            for what, reason in derivation.notices:
                named = what or PAPER_STATES[1:]  # none named: all (Init is always there)
                missing = tuple(st for st in named if logged is None or st not in logged)
                if not missing:
                    continue  # the producer logs these states itself
                if len(missing) == len(PAPER_STATES) - 1:
                    missing = ()  # none at all
                diag.cannot_derive(tid, describe_states(missing), reason)
            compact = derivation.states
            if not explicit and frames is not None and isinstance(compact, CompactRows):
                # derived rows only: straight from the arrays into a frame
                frames.append(_derived_frame(file, tid, trace.vantage, start, end, compact))
                return
            chosen = merge_hybrid(explicit, list(compact), logged=logged or frozenset())
    add(0.0, "Init", None, None, "derived")
    for row in chosen:
        add(row.time - start, row.state, row.raw, row.trigger, row.source)


def scan_transitions(
    paths: PathLike | Iterable[PathLike],
    *,
    on_error: OnError = "raise",
    diagnostics: Diagnostics | None = None,
    states: str = HYBRID,
    profile: str | None = None,
    limits: ReadLimits = DEFAULT_LIMITS,
) -> pl.LazyFrame:
    """One row per state entered, per trace, in time order (:data:`TRANSITIONS_SCHEMA`), as a
    LazyFrame; the files are read (and problems raised or reported) when this is called.

    ``states`` chooses where states come from (:mod:`quicsm.extract.derive`): ``"explicit"``
    (``congestion_state_updated`` events, names mapped by :mod:`quicsm.core.aliases`),
    ``"derived"`` (metrics, losses and timers through the rule table
    :mod:`quicsm.extract.rules`, explicit events set aside) or ``"hybrid"`` (the default:
    explicit states where the producer logs them, derived ones for the states it does not
    log). ``source`` says which for every row. ``profile`` names the producer profile
    (:mod:`quicsm.extract.profiles`) instead of detecting it per trace. States a trace cannot
    show are reported in ``diagnostics`` ("... cannot be derived: ..."). Every trace starts
    with ``Init`` at its first event (0 ms); ``end_ms`` is its last event. ``limits`` caps what
    one file may inflate to (:class:`quicsm.qlog.blocks.ReadLimits`).
    """
    lenient = _check_on_error(on_error)
    mode = check_mode(states)
    chosen_profile = profile_named(profile) if profile is not None else None
    diag = diagnostics if diagnostics is not None else Diagnostics()
    collected = _Transitions(mode, chosen_profile)
    for loaded in _load_all(
        paths,
        lenient=lenient,
        diag=diag,
        derive=mode != EXPLICIT,
        profile=chosen_profile,
        hybrid=mode == HYBRID,
        limits=limits,
    ):
        collected.add(loaded, diag)
    out = collected.frame()
    diag.warn()
    return out.lazy()


class _Transitions:
    """The transition rows (and derived frames and tables) of many files, normalised once."""

    def __init__(self, mode: str, profile: Profile | None) -> None:
        self.mode = mode
        self.profile = profile
        self.rows: dict[str, list[Any]] = {name: [] for name in TRANSITIONS_SCHEMA}
        self.tables: list[pl.DataFrame] = []
        self.derived: list[pl.DataFrame] = []

    def add(self, loaded: _Loaded, diag: Diagnostics) -> None:
        if loaded.table is not None:
            self.tables.append(loaded.table)
            return
        assert loaded.read is not None
        for trace in loaded.read.traces:
            _transition_rows(
                loaded,
                trace,
                self.rows,
                diag,
                states=self.mode,
                profile=self.profile,
                frames=self.derived,
            )

    def frame(self) -> pl.DataFrame:
        frame = pl.DataFrame(
            {
                k: pl.Series(
                    v,
                    dtype=pl.String
                    if k in ("state", "vantage", "source")
                    else TRANSITIONS_SCHEMA[k],
                )
                for k, v in self.rows.items()
            }
        ).select([pl.col(c).cast(t) for c, t in TRANSITIONS_SCHEMA.items()])
        if self.tables or self.derived:
            frame = pl.concat([frame, *self.derived, *self.tables])
        return normalize_transitions(frame)


@dataclass
class BatchRead:
    """What :func:`read_batch` read: the transitions and traces of every file, and what each
    file's reading reported (files that were skipped included)."""

    transitions: pl.DataFrame
    traces: pl.DataFrame
    diagnostics: dict[str, Diagnostics]


def read_batch(
    files: Iterable[PathLike],
    *,
    on_error: OnError = "raise",
    states: str = HYBRID,
    profile: str | None = None,
    limits: ReadLimits = DEFAULT_LIMITS,
) -> BatchRead:
    """:func:`read_transitions` and :func:`read_traces` of many files at once: every file is
    read once, the transitions are normalised once for the whole batch, and the diagnostics
    are kept per file (so a caller can tell which files read cleanly). No warning is emitted.

    ``files`` are files (not directories or patterns); the result equals what the two readers
    return for the same list (``states``, ``profile`` and ``limits`` as in
    :func:`read_transitions`).
    """
    lenient = _check_on_error(on_error)
    mode = check_mode(states)
    chosen_profile = profile_named(profile) if profile is not None else None
    collected = _Transitions(mode, chosen_profile)
    trace_rows: dict[str, list[Any]] = {name: [] for name in TRACES_SCHEMA}
    diagnostics: dict[str, Diagnostics] = {}
    sidecars: dict[Path, dict[str, Any]] = {}  # each run.json read (and reported) once
    for file in files:
        diag = diagnostics.setdefault(str(file), Diagnostics())
        for loaded in _load_all(
            [file],
            lenient=lenient,
            diag=diag,
            count=True,
            derive=mode != EXPLICIT,
            profile=chosen_profile,
            hybrid=mode == HYBRID,
            limits=limits,
            sidecars=sidecars,
        ):
            _trace_rows(loaded, trace_rows)
            collected.add(loaded, diag)
    return BatchRead(collected.frame(), _traces_frame(trace_rows), diagnostics)


def read_transitions(
    paths: PathLike | Iterable[PathLike],
    *,
    on_error: OnError = "raise",
    diagnostics: Diagnostics | None = None,
    states: str = HYBRID,
    profile: str | None = None,
    limits: ReadLimits = DEFAULT_LIMITS,
) -> pl.DataFrame:
    """:func:`scan_transitions`, collected."""
    return scan_transitions(
        paths,
        on_error=on_error,
        diagnostics=diagnostics,
        states=states,
        profile=profile,
        limits=limits,
    ).collect()


_METRIC_COLUMNS = (
    "cwnd_bytes",
    "bytes_in_flight",
    "ssthresh_bytes",
    "smoothed_rtt_ms",
    "min_rtt_ms",
    "pto_count",
    "pacing_rate_bps",
)


def read_metrics(
    paths: PathLike | Iterable[PathLike],
    *,
    on_error: OnError = "raise",
    diagnostics: Diagnostics | None = None,
    limits: ReadLimits = DEFAULT_LIMITS,
) -> pl.DataFrame:
    """One row per metrics update and loss/PTO event (:data:`METRICS_SCHEMA`).

    ``event`` is ``metrics``, ``packet_lost``, ``pto`` (a PTO timer expired) or
    ``spurious_loss``. Metric events usually carry only the fields that changed; every value is
    carried forward within its trace. ``time_ms`` counts from the trace's first event.
    Transition tables (CSV/Parquet) have no metrics and add no rows.
    """
    lenient = _check_on_error(on_error)
    diag = diagnostics if diagnostics is not None else Diagnostics()
    rows: dict[str, list[Any]] = {name: [] for name in METRICS_SCHEMA}
    for loaded in _load_all(paths, lenient=lenient, diag=diag, want_metrics=True, limits=limits):
        if loaded.read is None:
            continue
        file = str(loaded.path)
        for trace in loaded.read.traces:
            tid = trace_id(file, trace.index)
            start = trace.first_time if trace.first_time is not None else 0.0
            for event in sorted(trace.metrics, key=lambda e: e.time):
                rows["file"].append(file)
                rows["trace"].append(tid)
                rows["vantage"].append(trace.vantage)
                rows["time_ms"].append(round(event.time - start, TIME_DECIMALS))
                rows["event"].append(event.event)
                for column in _METRIC_COLUMNS:
                    value = event.values.get(column)
                    rows[column].append(
                        int(value) if column == "pto_count" and value is not None else value
                    )
                rows["trigger"].append(event.trigger)
    frame = pl.DataFrame(
        {
            k: pl.Series(v, dtype=pl.String if k == "vantage" else METRICS_SCHEMA[k])
            for k, v in rows.items()
        }
    ).select([pl.col(c).cast(t) for c, t in METRICS_SCHEMA.items()])
    frame = frame.with_columns([pl.col(c).forward_fill().over("trace") for c in _METRIC_COLUMNS])
    diag.warn()
    return frame


def read_traces(
    paths: PathLike | Iterable[PathLike],
    *,
    on_error: OnError = "raise",
    diagnostics: Diagnostics | None = None,
    limits: ReadLimits = DEFAULT_LIMITS,
) -> pl.DataFrame:
    """One row per trace: file, trace, vantage, format, title, code_version, n_events,
    duration_ms, labels.

    ``labels`` is a JSON object (keys sorted) merged from, in increasing precedence: the qlog
    ``title``, ``code_version`` and ``vantage`` of the trace; the scalar fields of a ``run.json``
    next to the file; the trace header's ``trace.quicsm_labels``.
    """
    lenient = _check_on_error(on_error)
    diag = diagnostics if diagnostics is not None else Diagnostics()
    rows: dict[str, list[Any]] = {name: [] for name in TRACES_SCHEMA}
    for loaded in _load_all(paths, lenient=lenient, diag=diag, count=True, limits=limits):
        _trace_rows(loaded, rows)
    frame = _traces_frame(rows)
    diag.warn()
    return frame


def _trace_rows(loaded: _Loaded, rows: dict[str, list[Any]]) -> None:
    """The rows of :func:`read_traces` for one loaded file."""
    file = str(loaded.path)
    if loaded.table is not None:
        summary = loaded.table.group_by("trace", maintain_order=True).agg(
            pl.col("vantage").first(), pl.len().alias("n"), pl.col("end_ms").max()
        )
        # column by column: a table may hold a million traces, all with the file's labels
        n = summary.height
        rows["file"].extend([file] * n)
        rows["trace"].extend(summary.get_column("trace").to_list())
        rows["vantage"].extend(summary.get_column("vantage").cast(pl.String).to_list())
        kind = "CSV" if file.lower().split(".")[-1] != "parquet" else "Parquet"
        rows["format"].extend([kind] * n)
        rows["title"].extend([None] * n)
        rows["code_version"].extend([None] * n)
        rows["n_events"].extend(summary.get_column("n").to_list())
        rows["duration_ms"].extend(summary.get_column("end_ms").to_list())
        rows["labels"].extend([_labels_json({**loaded.sidecar})] * n)
        return
    assert loaded.read is not None
    for t in loaded.read.traces:
        own: dict[str, Any] = {"vantage": t.vantage}
        if t.title is not None:
            own["title"] = t.title
        if t.code_version is not None:
            own["code_version"] = t.code_version
        labels = {**own, **loaded.sidecar, **t.labels}
        rows["file"].append(file)
        rows["trace"].append(trace_id(file, t.index))
        rows["vantage"].append(t.vantage)
        rows["format"].append(t.format)
        rows["title"].append(t.title)
        rows["code_version"].append(t.code_version)
        rows["n_events"].append(t.n_events)
        rows["duration_ms"].append(round(t.duration_ms, TIME_DECIMALS))
        rows["labels"].append(_labels_json(labels))


def _traces_frame(rows: dict[str, list[Any]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            k: pl.Series(v, dtype=pl.String if k == "vantage" else TRACES_SCHEMA[k])
            for k, v in rows.items()
        }
    ).select([pl.col(c).cast(t) for c, t in TRACES_SCHEMA.items()])
