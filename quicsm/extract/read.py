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

import math
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl

from quicsm.core import tables
from quicsm.core.aliases import CC_ALGORITHM_KEYS, canonical_state, is_numeric
from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.core.errors import InputError, QlogError
from quicsm.core.frames import (
    EVENT_DTYPE,
    METRICS_SCHEMA,
    TRANSITIONS_SCHEMA,
    normalize_transitions,
)
from quicsm.core.states import PAPER_STATES, UNKNOWN
from quicsm.extract.capabilities import METRICS, PTO, from_status
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
from quicsm.extract.deriver import (
    STATE_CODES,
    CompactRows,
    DerivedState,
    Deriver,
    describe_states,
)
from quicsm.extract.native import NativeDeriver, make_deriver, make_recorder
from quicsm.extract.profiles import Profile, detect_profile, profile_named
from quicsm.extract.wire import Packet, PacketRead, read_packets, tail_probes, wire_states
from quicsm.qlog.blocks import DEFAULT_LIMITS, DecompressedFile, ReadLimits
from quicsm.qlog.events import METRIC_FIELDS, MetricEvent
from quicsm.qlog.paths import PathLike, TraceSpans, expand_spans
from quicsm.qlog.source import CSV, PARQUET, FileRead, read_qlog, without_bom
from quicsm.qlog.tabular import read_table, trace_labels, trace_summary
from quicsm.qlog.trace import Discard, MetricSink, TraceBuilder, TraceData

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
    "file": TRANSITIONS_SCHEMA["file"],
    "trace": TRANSITIONS_SCHEMA["trace"],
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
    #: CSV / Parquet: the label columns' values per trace
    table_labels: dict[str, dict[str, str]] | None = None
    #: CSV / Parquet: one row per trace (:func:`quicsm.qlog.tabular.trace_summary`)
    table_summary: pl.DataFrame | None = None
    #: every trace's packets, read only when a trace needs them (:func:`_wire_pass`)
    packets: PacketRead | None = None
    limits: ReadLimits = DEFAULT_LIMITS


class _TraceSink:
    """Feeds one trace's deriver; in hybrid mode it stops wanting events once the trace has
    logged a state that only an instrumented stack logs (it logs all eight: nothing to derive,
    and the reader skips decoding its metrics)."""

    __slots__ = ("_builder", "_checked", "_deriver", "_wanted", "native_deriver", "scan_records")

    def __init__(self, deriver: Deriver | NativeDeriver, builder: TraceBuilder | None) -> None:
        self._deriver = deriver
        self._builder = builder
        self._checked = 0
        self._wanted = True
        #: the native deriver's pass over a block of records (the reader uses it if present)
        self.scan_records = getattr(deriver, "scan_records", None)
        #: the native deriver itself (the contained-JSON reader feeds it natively)
        self.native_deriver = getattr(deriver, "native", None)

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
        out.status = deriver.status()
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
    discard_metrics: bool = False,
    sink: MetricSink | None = None,
) -> Iterator[_Loaded]:
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
                sidecar = _sidecar(path, cache, lenient, diag)
                streamed = _Streamed(sidecar=sidecar, profile=profile, hybrid=hybrid)
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
            for problem in read.problems:
                diag.skip(problem)
            diag.skipped_records += max(0, read.skipped - len(read.problems))
            if read.truncated:
                diag.truncated.append(read.truncated)
            for trace in read.traces:
                note = trace.repair_note()
                if note is not None:
                    diag.note(f"{trace_id(str(path), trace.index)}: {note}")
        yield _Loaded(
            path,
            kind,
            read,
            table,
            _sidecar(path, cache, lenient, diag),
            streamed,
            table_labels,
            limits=limits,
            table_summary=summary[0] if summary else None,
        )


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


class _DerivedBatch:
    """The derived rows of many traces (traces whose rows are all derived), kept as the
    deriver's arrays and built into ONE frame at the end: no frame, no polars call and no
    Python object per row or per trace, whatever the number of traces (a file of thousands of
    short connections costs what one long connection of the same rows costs). Each column is
    built in its final type; every trace gets its ``Init`` row at its first event."""

    def __init__(self) -> None:
        self.times: list[Any] = []  # float64 buffers, one per trace (absolute times)
        self.states: list[Any] = []  # uint8 buffers (index into STATE_CODES)
        self.triggers: list[Any] = []  # uint16 buffers (index into the trace's own names)
        self.lengths: list[int] = []  # rows per trace, its Init row not counted
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.files: list[str] = []
        self.traces: list[str] = []
        self.vantages: list[str] = []
        #: every trace's trigger names, one after the other (``name_offsets``: where each begins)
        self.names: list[str] = []
        self.name_offsets: list[int] = []

    def __len__(self) -> int:
        return len(self.lengths)

    def add(
        self, file: str, tid: str, vantage: str, start: float, end: float, rows: CompactRows
    ) -> None:
        self.times.append(rows.times)
        self.states.append(rows.states)
        self.triggers.append(rows.triggers)
        self.lengths.append(len(rows))
        self.starts.append(start)
        self.ends.append(end)
        self.files.append(file)
        self.traces.append(tid)
        self.vantages.append(vantage)
        self.name_offsets.append(len(self.names))
        self.names.extend(rows.trigger_names)

    def frame(self) -> pl.DataFrame:
        """Every trace's rows, in the order the traces were added."""
        schema = TRANSITIONS_SCHEMA
        lengths = np.asarray(self.lengths, dtype=np.int64)
        k, n = len(lengths), int(lengths.sum())
        total = n + k  # each trace's Init row first
        # the position of each trace's Init row; every other row is a derived one
        firsts = np.zeros(k, dtype=np.int64)
        np.cumsum(lengths[:-1] + 1, out=firsts[1:])
        derived = np.ones(total, dtype=bool)
        derived[firsts] = False
        owner = np.repeat(np.arange(k, dtype=np.int64), lengths + 1)  # each row's trace

        def joined(parts: list[Any], dtype: Any) -> np.ndarray:
            return np.frombuffer(b"".join(parts), dtype=dtype)  # the buffers, one copy

        starts = np.asarray(self.starts, dtype=np.float64)
        times = np.empty(total, dtype=np.float64)
        times[firsts] = starts
        times[derived] = joined(self.times, np.float64)
        time_ms = np.round(times - starts[owner], TIME_DECIMALS)
        del times
        codes = np.zeros(total, dtype=np.uint32)  # Init is code 0
        codes[derived] = joined(self.states, np.uint8)
        # each trace's trigger codes index its own names: mapped to one table of names
        table: dict[str, int] = {}
        lookup = np.asarray(
            [table.setdefault(name, len(table) + 1) for name in self.names] or [0],
            dtype=np.int64,
        )
        trigger = np.zeros(total, dtype=np.int64)  # 0: no trigger (the Init rows)
        offsets = np.asarray(self.name_offsets, dtype=np.int64)
        local = joined(self.triggers, np.uint16).astype(np.int64)
        trigger[derived] = lookup[np.repeat(offsets, lengths) + local]
        del local
        names = pl.Series("trigger", [None, *table], dtype=schema["trigger"])

        def per_trace(values: list[Any], name: str) -> pl.Series:
            # one value per trace, in the column's type, repeated over the trace's rows
            return pl.Series(name, values, dtype=schema[name]).gather(owner)

        def constant(value: str | None, name: str) -> pl.Series:
            return pl.repeat(value, total, dtype=schema[name], eager=True).alias(name)

        return pl.DataFrame(
            [
                per_trace(self.files, "file"),
                per_trace(self.traces, "trace"),
                pl.Series("vantage", self.vantages, dtype=pl.String)
                .cast(schema["vantage"])
                .gather(owner),
                pl.Series("time_ms", time_ms, dtype=pl.Float64),
                pl.Series("state", codes).replace_strict(
                    dict(enumerate(STATE_CODES)), return_dtype=schema["state"]
                ),
                constant(None, "raw_state"),
                names.gather(trigger),
                constant("derived", "source"),
                pl.Series("end_ms", np.asarray(self.ends, dtype=np.float64)[owner]),
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
    batch: _DerivedBatch | None = None,
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
                if is_numeric(event.new) and cc is None:
                    if states == EXPLICIT:
                        diag.unknown_state(event.new)
                        diag.note(
                            f"{file}: numeric congestion states (picoquic) need the congestion "
                            "controller: give it as the label cc_algorithm (trace header or "
                            "run.json); kept raw as Unknown"
                        )
                    else:
                        # what a number means depends on the controller: it cannot stand in
                        # for the states derived from the trace's metrics
                        diag.note(
                            f"{file}: numeric congestion states (picoquic) need the congestion "
                            "controller: give it as the label cc_algorithm (trace header or "
                            "run.json); without it they are left out and the states derived "
                            "from the trace's metrics stand"
                        )
                        continue
                else:
                    diag.unknown_state(event.new)
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
            derivation = _wire_pass(loaded, trace, derivation, tid, diag)
            for what, reason in derivation.notices:
                named = what or PAPER_STATES[1:]  # none named: all (Init is always there)
                # a trace that logged no state at all logs none of them, whatever its
                # profile says producers of its name usually log
                claimed = logged if explicit else None
                missing = tuple(st for st in named if claimed is None or st not in claimed)
                if not missing:
                    continue  # the producer logs these states itself
                if len(missing) == len(PAPER_STATES) - 1:
                    missing = ()  # none at all
                diag.cannot_derive(tid, describe_states(missing), reason)
            compact = derivation.states
            if not explicit and batch is not None and isinstance(compact, CompactRows):
                # derived rows only: their arrays kept, the frame built once for all traces
                batch.add(file, tid, trace.vantage, start, end, compact)
                return
            chosen = merge_hybrid(explicit, list(compact), logged=logged or frozenset())
    add(0.0, "Init", None, None, "derived")
    for row in chosen:
        add(row.time - start, row.state, row.raw, row.trigger, row.source)


#: a trace whose profile says its producer logs probe timeouts, that logged none, and that goes
#: on at least this long (ms) after its last metric, loss or timer event, has its packets read to
#: find the probes sent after its last acknowledgement (quic-go's 2020 traces log no PTO)
PROBE_TAIL_MS = 1000.0


def _packets_of(loaded: _Loaded, index: int, diag: Diagnostics) -> list[Packet]:
    """A trace's packets (the file is read in full once, when a trace first needs them)."""
    if loaded.packets is None:
        loaded.packets = read_packets(loaded.path, limits=loaded.limits)
        # records the first reading skipped (a lenient read) were reported by it already
        n = loaded.packets.skipped - (loaded.read.skipped if loaded.read is not None else 0)
        if n > 0:
            diag.note(
                f"{loaded.path}: {n} record{'s' * (n != 1)} could not be decoded when its "
                f"packets were read and {'were' if n != 1 else 'was'} left out of the states "
                f"derived from packets (first: {loaded.packets.first_problem})"
            )
    return loaded.packets.packets.get(index, [])


def _wire_pass(
    loaded: _Loaded, trace: TraceData, derivation: Derivation, tid: str, diag: Diagnostics
) -> Derivation:
    """What the trace's content allows beyond the metrics rules (a pass after the deriver, the
    same for the native and the Python one): states from packets alone when it logs no recovery
    metrics, and the probes after its last acknowledgement when it logs no probe timeout that
    its profile expects (:mod:`quicsm.extract.capabilities`, :mod:`quicsm.extract.wire`)."""
    if derivation.status is None or loaded.kind in (CSV, PARQUET):
        return derivation
    caps = from_status(derivation.status)
    profile = derivation.profile
    if METRICS not in caps:
        packets = _packets_of(loaded, trace.index, diag)
        if not any(p.acks for p in packets):
            return derivation
        result = wire_states(packets)
        if result.captured:
            whose = (
                f"the {'client' if result.own_sends else 'server'}'s sender (a capture: "
                "directions told by connection IDs)"
            )
        elif result.own_sends:
            whose = "its own sender"
        else:
            whose = "the peer's sender, inferred from the packets it received and the ACKs it sent"
        if result.unnumbered and not result.data_packets:
            # an ACK names packet numbers: packets logged without one cannot be matched to it
            reason = (
                f"its {result.unnumbered} data packets log no packet number (an encrypted "
                "capture?), so no ACK can be matched to them"
            )
            return Derivation(profile, [], [((), reason)], derivation.status)
        if not result.acks and not result.rows:
            sender = "its own" if result.own_sends else "its peer's"
            reason = (
                f"no ACK frame it logs acknowledges a data packet of {sender} sender "
                f"({result.data_packets} data packets)"
            )
            return Derivation(profile, [], [((), reason)], derivation.status)
        diag.note(
            f"{tid}: no recovery metrics are logged: states derived from its packets and ACK "
            f"frames alone, for {whose}"
        )
        if result.unnumbered:
            diag.note(
                f"{tid}: {result.unnumbered} of its data packets log no packet number and were "
                "left out of the states derived from packets"
            )
        if result.partial_acks:
            diag.note(
                f"{tid}: {result.partial_acks} ACK frame{'s' * (result.partial_acks != 1)} "
                "name more ACK blocks than the capture exported; only the exported blocks "
                "were read"
            )
        rows = [DerivedState(t, s, trigger) for t, s, trigger in result.rows]
        cap: tuple[str, ...] = ("CongestionAvoidanceMaxed",)
        notices = [(cap, "a window cap cannot be seen in packets alone")]
        return Derivation(profile, rows, notices, derivation.status)
    if not profile.logs_pto or PTO in caps:
        return derivation
    end, last = trace.last_time, trace.last_derive_time
    if end is None or last is None or end - last < PROBE_TAIL_MS:
        return derivation
    probes = [r for r in tail_probes(_packets_of(loaded, trace.index, diag)) if r[0] > last]
    if not probes:
        probe_states: tuple[str, ...] = ("TailLossProbe", "RetransmissionTimeout")
        notices = [
            *derivation.notices,
            (
                probe_states,
                f"the trace logs no probe timeout (no pto_count, no expired pto timer) although "
                f"{profile.name} traces usually do, and its packets show none in the "
                f"{end - last:.0f} ms after its last recovery event: probes cannot be seen",
            ),
        ]
        return Derivation(profile, derivation.states, notices, derivation.status)
    diag.note(
        f"{tid}: the trace logs no probe timeout although {profile.name} traces usually do: "
        f"{len(probes)} probe timeout{'s' * (len(probes) != 1)} after its last acknowledgement "
        "were found from its packets (sends without ACKs, backing off; RFC 9002 section 6.2)"
    )
    rows = [*derivation.states, *(DerivedState(t, s, trigger) for t, s, trigger in probes)]
    return Derivation(profile, rows, derivation.notices, derivation.status)


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
        discard_metrics=mode == EXPLICIT,
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
        self.derived = _DerivedBatch()

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
                batch=self.derived,
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
            derived = [self.derived.frame()] if self.derived else []
            self.derived = _DerivedBatch()
            frame = pl.concat([frame, *derived, *self.tables])
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
            discard_metrics=mode == EXPLICIT,
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


#: the RTT sample of a metrics event: a column of read_metrics, not carried forward
_SAMPLE = "latest_rtt_ms"
_EVENT_NAMES: tuple[str, ...] = tuple(EVENT_DTYPE.categories.to_list())
_EVENT_CODES = {name: i for i, name in enumerate(_EVENT_NAMES)}


#: events a trace's columns take before they become a compact frame part (:class:`_MetricColumns`)
METRIC_BLOCK = 1 << 16


class _MetricColumns:
    """One trace's metric, loss and timer events as columns of numbers, filled as they are
    decoded (about 70 bytes per event instead of a Python object per event and value), and
    every :data:`METRIC_BLOCK` events turned into a compact frame part (absent values as
    nulls that take no memory, the event names shared), so a long trace is held about as
    compactly as the frame :func:`read_metrics` returns, not once as numbers and once as a
    frame."""

    __slots__ = (
        "events",
        "last",
        "native_deriver",
        "ordered",
        "parts",
        "present",
        "pto",
        "scan_records",
        "times",
        "trigger_codes",
        "triggers",
        "values",
    )

    def __init__(self) -> None:
        #: the finished blocks: raw time ``_t``, ``event``, the metric columns (not carried
        #: forward yet), the sample and ``trigger``
        self.parts: list[pl.DataFrame] = []
        #: whether every event so far came at or after the one before it (then no sort)
        self.ordered = True
        self.last = -math.inf
        self.trigger_codes: dict[str, int] = {}
        #: where the native core is used, a recorder (``quicsm._native.Deriver.recorder``) that
        #: the native scan and contained-JSON reader fill with the events they decode (the
        #: readers find it as the derived path finds its deriver); records handed back to
        #: Python are fed to it by :meth:`__call__`, in the same order
        self.native_deriver = make_recorder()
        self.scan_records = self._scan if self.native_deriver is not None else None
        self._new_block()

    def _scan(
        self,
        buf: Any,
        pos: int,
        end: int,
        sep: int,
        scale: float,
        latest: float | None,
        latest_other: float | None,
        feed: bool,
        no_states: bool = False,
    ) -> tuple[int, int, float | None, float | None, bool, int]:
        """The native pass over a region (:meth:`NativeDeriver.scan_records`), its events
        recorded; a block of them becomes a frame part."""
        result: tuple[int, int, float | None, float | None, bool, int] = self.native_deriver.scan(
            buf, pos, end, sep, scale, latest, latest_other, feed, no_states
        )
        if self.native_deriver.recorded() >= METRIC_BLOCK:
            self._flush()
        return result

    def _new_block(self) -> None:
        self.times = array("d")
        self.events = array("B")
        #: per float column, NaN where the event does not carry it (JSON has no NaN)
        self.values = {c: array("d") for c in (*_METRIC_COLUMNS, _SAMPLE) if c != "pto_count"}
        self.pto = array("q")
        self.present = array("B")  # whether the event carries pto_count
        self.triggers = array("H")  # 0: none, else 1 + index in trigger_codes

    def __call__(self, event: MetricEvent) -> None:
        if self.native_deriver is not None:
            values = event.values
            self.native_deriver.feed(
                float(event.time),
                _FEED_CODES[event.event],
                [values.get(name) for name in _FEED_METRICS],
                event.app_limited,
                event.trigger,
            )
            return
        values = event.values
        time = event.time
        if time < self.last:
            self.ordered = False
        self.last = time
        self.times.append(time)
        self.events.append(_EVENT_CODES.get(event.event, 0))
        for column, out in self.values.items():
            value = values.get(column)
            out.append(math.nan if value is None else value)
        pto = values.get("pto_count")
        self.pto.append(0 if pto is None else int(pto))
        self.present.append(pto is not None)
        trigger = event.trigger
        if trigger is None:
            self.triggers.append(0)
        else:
            code = self.trigger_codes.setdefault(trigger, len(self.trigger_codes) + 1)
            self.triggers.append(code)
        if len(self.times) >= METRIC_BLOCK:
            self._flush()

    def wanted(self) -> bool:
        if self.native_deriver is not None and self.native_deriver.recorded() >= METRIC_BLOCK:
            self._flush()  # the contained-JSON reader asks between its native calls
        return True

    def __len__(self) -> int:
        held = self.native_deriver.recorded() if self.native_deriver is not None else 0
        return sum(p.height for p in self.parts) + len(self.times) + held

    def _flush(self) -> None:
        """The current block as a frame part; its arrays are let go."""
        if self.native_deriver is not None:
            self._flush_native()
            return
        n = len(self.times)
        if not n:
            return
        values = {c: np.frombuffer(v, dtype=np.float64) for c, v in self.values.items()}
        present = np.frombuffer(self.present, dtype=np.uint8).astype(bool)
        self._add_part(
            np.frombuffer(self.times, dtype=np.float64),
            np.frombuffer(self.events, dtype=np.uint8),
            values,
            (np.frombuffer(self.pto, dtype=np.int64), present),
            np.frombuffer(self.triggers, dtype=np.uint16),
            [None, *self.trigger_codes],
        )
        self._new_block()

    def _flush_native(self) -> None:
        """The recorder's events as a frame part (it keeps none of them)."""
        assert self.native_deriver is not None
        times, kinds, values, triggers, names = self.native_deriver.take_columns()
        t = np.frombuffer(times, dtype=np.float64)
        if not len(t):
            return
        if t[0] < self.last or (len(t) > 1 and bool((t[1:] < t[:-1]).any())):
            self.ordered = False
        self.last = float(t[-1])
        metric = {
            name: np.frombuffer(v, dtype=np.float64)
            for name, v in zip(_FEED_METRICS, values, strict=True)
        }
        pto = metric["pto_count"]
        present = ~np.isnan(pto)
        self._add_part(
            t,
            _FEED_EVENT_CODES[np.frombuffer(kinds, dtype=np.uint8)],
            metric,
            (np.where(present, pto, 0).astype(np.int64), present),
            np.frombuffer(triggers, dtype=np.uint16),
            [None, *names],
        )

    def _add_part(
        self,
        times: np.ndarray,
        events: np.ndarray,
        values: dict[str, np.ndarray],
        pto: tuple[np.ndarray, np.ndarray],
        triggers: np.ndarray,
        trigger_names: list[str | None],
    ) -> None:
        """A raw frame part from a block's columns (``values``: NaN where absent; ``pto``:
        the counts and whether each event carries one)."""
        n = len(times)
        columns: dict[str, pl.Series] = {
            "_t": pl.Series(times),
            "event": _codes_to_names(events, _EVENT_SERIES),
        }
        for column in _METRIC_COLUMNS:
            if column == "pto_count":
                counts, present = pto
                if not present.any():
                    columns[column] = pl.repeat(None, n, dtype=pl.Int64, eager=True)
                else:
                    series = pl.Series(counts)
                    columns[column] = (
                        series if present.all() else series.set(pl.Series(~present), None)
                    )
            else:
                columns[column] = _floats(values[column])
        columns[_SAMPLE] = _floats(values[_SAMPLE])
        names = pl.Series(trigger_names, dtype=pl.String)
        columns["trigger"] = _codes_to_names(triggers, names)
        self.parts.append(pl.DataFrame({k: v.alias(k) for k, v in columns.items()}))

    def frames(self, file: str, tid: str, vantage: str, start: float) -> list[pl.DataFrame]:
        """The trace's rows of :func:`read_metrics`, in time order (stable: equal times keep
        their file order), every value carried forward; as parts, each finished (and the raw
        one let go) before the next."""
        self._flush()
        parts, self.parts = self.parts, []
        if not self.ordered:  # times went backwards: sorted at once (the only full copy)
            whole = pl.concat(parts, rechunk=False)
            parts.clear()
            order = np.argsort(whole.get_column("_t").to_numpy(), kind="stable")
            parts = [whole[order]]
            del whole, order
        carry: dict[str, Any] = {}
        out: list[pl.DataFrame] = []
        parts.reverse()
        while parts:  # each raw part let go once finished
            out.append(_finish(parts.pop(), file, tid, vantage, start, carry))
        return out


def _floats(values: np.ndarray) -> pl.Series:
    """A float column with NaN (absent) as null; a column with no value takes no memory."""
    absent = np.isnan(values)
    if absent.all():
        return pl.repeat(None, len(values), dtype=pl.Float64, eager=True)
    series = pl.Series(values)
    return series.fill_nan(None) if absent.any() else series


def _codes_to_names(codes: np.ndarray, names: pl.Series) -> pl.Series:
    """``names[codes]``; one code throughout is one name repeated (its text stored once)."""
    n = len(codes)
    if n and (codes == codes[0]).all():
        return pl.repeat(names[int(codes[0])], n, dtype=names.dtype, eager=True)
    return names.gather(codes.astype(np.uint32))


_EVENT_SERIES = pl.Series(list(_EVENT_NAMES), dtype=EVENT_DTYPE)
#: the metrics in the order the native core holds them, and the codes of its event kinds
_FEED_METRICS: tuple[str, ...] = tuple(METRIC_FIELDS)
_FEED_CODES: dict[str, int] = {kind: i for i, kind in enumerate(tables.FEED_KINDS)}
#: a native event kind (its position in the feed kinds) -> its code in ``_EVENT_SERIES``
_FEED_EVENT_CODES = np.asarray([_EVENT_CODES[k] for k in tables.FEED_KINDS], dtype=np.uint8)


def _finish(
    part: pl.DataFrame,
    file: str,
    tid: str,
    vantage: str,
    start: float,
    carry: dict[str, Any],
) -> pl.DataFrame:
    """A raw part as rows of :func:`read_metrics`: time from the trace's start, the file and
    trace, every metric carried forward from the part before (``carry``, updated)."""
    n = part.height
    times = part.get_column("_t").to_numpy()
    # rounded as Python rounds (correctly), one part at a time (bounded transient objects)
    time_ms = np.array([round(t - start, TIME_DECIMALS) for t in times.tolist()], np.float64)
    del times
    columns: dict[str, pl.Series] = {
        "file": pl.repeat(file, n, dtype=METRICS_SCHEMA["file"], eager=True),
        "trace": pl.repeat(tid, n, dtype=METRICS_SCHEMA["trace"], eager=True),
        "vantage": pl.repeat(vantage, n, dtype=METRICS_SCHEMA["vantage"], eager=True),
        "time_ms": pl.Series(time_ms, dtype=pl.Float64),
        "event": part.get_column("event"),
    }
    for column in _METRIC_COLUMNS:  # every value carried forward within the trace
        series = part.get_column(column)
        before = carry.get(column)
        if series.null_count() == n:
            if before is not None:
                series = pl.repeat(before, n, dtype=series.dtype, eager=True)
        elif series.null_count():
            series = series.forward_fill()
            if before is not None and series.null_count():
                series = series.fill_null(before)
        carry[column] = series[-1] if n else before
        columns[column] = series
    columns[_SAMPLE] = part.get_column(_SAMPLE)  # the event's own: not carried
    columns["trigger"] = part.get_column("trigger")
    return pl.DataFrame({name: columns[name].alias(name) for name in METRICS_SCHEMA})


class _MetricsStream:
    """The metric sink of :func:`read_metrics`: each trace's events as :class:`_MetricColumns`
    (a trace read again, in contained JSON, starts afresh)."""

    def __init__(self) -> None:
        self.traces: dict[int, _MetricColumns] = {}

    def __call__(self, builder: TraceBuilder) -> _MetricColumns:
        columns = _MetricColumns()
        self.traces[builder.index] = columns
        return columns


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
    Transition tables (CSV/Parquet) have no metrics and add no rows. Events are kept as columns
    of numbers while a file is read, not as Python objects, and every
    :data:`METRIC_BLOCK` events of a trace become a compact part of the frame returned: the
    peak follows the rows returned (about 95 bytes each), plus a block.
    """
    lenient = _check_on_error(on_error)
    diag = diagnostics if diagnostics is not None else Diagnostics()
    parts: list[pl.DataFrame] = []
    for path, spans in expand_spans(paths):
        stream = _MetricsStream()
        item = path if spans is None else TraceSpans(str(path), spans)
        for loaded in _load_all(
            [item], lenient=lenient, diag=diag, want_metrics=True, limits=limits, sink=stream
        ):
            if loaded.read is None:
                continue
            file = str(loaded.path)
            for trace in loaded.read.traces:
                columns = stream.traces.pop(trace.index, None)
                if columns is None or not len(columns):
                    continue
                start = trace.first_time if trace.first_time is not None else 0.0
                tid = trace_id(file, trace.index)
                parts += columns.frames(file, tid, trace.vantage, start)
    frame = pl.concat(parts, rechunk=False) if parts else pl.DataFrame(schema=METRICS_SCHEMA)
    del parts
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
    for loaded in _load_all(
        paths, lenient=lenient, diag=diag, count=True, limits=limits, discard_metrics=True
    ):
        _trace_rows(loaded, rows)
    frame = _traces_frame(rows)
    diag.warn()
    return frame


def _trace_rows(loaded: _Loaded, rows: dict[str, list[Any]]) -> None:
    """The rows of :func:`read_traces` for one loaded file."""
    file = str(loaded.path)
    if loaded.table is not None:
        summary = loaded.table_summary
        if summary is None:
            summary = trace_summary(loaded.table)
        # column by column (a table may hold a million traces), after the rows before it
        n = summary.height
        kind = "CSV" if file.lower().split(".")[-1] != "parquet" else "Parquet"
        if loaded.table_labels:  # the file's labels with each trace's own label columns
            table_labels = loaded.table_labels
            label_column = pl.Series(
                [
                    _labels_json({**loaded.sidecar, **trace_labels(table_labels, str(t))})
                    for t in summary.get_column("trace").to_list()
                ],
                dtype=pl.String,
            )
        else:
            label_column = pl.repeat(
                _labels_json({**loaded.sidecar}), n, dtype=pl.String, eager=True
            )
        part = summary.select(
            pl.lit(file, pl.String).alias("file"),
            "trace",
            pl.col("vantage").cast(pl.String),
            pl.lit(kind, pl.String).alias("format"),
            pl.lit(None, pl.String).alias("title"),
            pl.lit(None, pl.String).alias("code_version"),
            pl.col("n").alias("n_events"),
            pl.col("end_ms").alias("duration_ms"),
            label_column.alias("labels"),
        )
        parts = rows.setdefault(_PARTS, [])
        if rows["file"]:
            parts.append(_traces_frame({k: v for k, v in rows.items() if k != _PARTS}))
            for k in TRACES_SCHEMA:
                rows[k] = []
        parts.append(part.select([pl.col(c).cast(t) for c, t in TRACES_SCHEMA.items()]))
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


#: the key of ``rows`` (:func:`_trace_rows`) holding frames of rows built already, which come
#: before the rows in its lists
_PARTS = "_parts"


def _traces_frame(rows: dict[str, list[Any]]) -> pl.DataFrame:
    parts = rows.get(_PARTS)
    if parts is not None:
        rest = {k: v for k, v in rows.items() if k != _PARTS}
        if not parts:
            return _traces_frame(rest)
        tail = [_traces_frame(rest)] if rest["file"] else []
        return pl.concat([*parts, *tail])
    return pl.DataFrame(
        {
            k: pl.Series(v, dtype=pl.String if k == "vantage" else TRACES_SCHEMA[k])
            for k, v in rows.items()
        }
    ).select([pl.col(c).cast(t) for c, t in TRACES_SCHEMA.items()])
