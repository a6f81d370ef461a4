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

The readers are thin: the I/O driver is :mod:`quicsm.extract.loading` (run labels:
:mod:`~quicsm.extract.sidecar`; states derived while a file is read:
:mod:`~quicsm.extract.streaming`; the packet pass after the deriver:
:mod:`~quicsm.extract.wire_pass`), and the frames are built by
:mod:`~quicsm.extract.transitions`, :mod:`~quicsm.extract.metric_columns` and
:mod:`~quicsm.extract.traces_frame`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from quicsm.core.choices import HYBRID
from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.core.frames import METRICS_SCHEMA
from quicsm.extract.loading import TIME_DECIMALS, OnError, check_on_error, load_all, trace_id
from quicsm.extract.metric_columns import MetricsBatch, MetricsStream
from quicsm.extract.traces_frame import TRACES_SCHEMA, trace_rows, traces_frame
from quicsm.qlog.blocks import DEFAULT_LIMITS, ReadLimits
from quicsm.qlog.paths import PathLike, TraceSpans, expand_spans

__all__ = [
    "TIME_DECIMALS",
    "TRACES_SCHEMA",
    "BatchRead",
    "Diagnostics",
    "OnError",
    "QuicsmWarning",
    "read_batch",
    "read_metrics",
    "read_traces",
    "read_transitions",
    "scan_transitions",
    "trace_id",
]


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
    from quicsm.extract.derive import EXPLICIT, check_mode
    from quicsm.extract.profiles import profile_named
    from quicsm.extract.transitions import Transitions

    lenient = check_on_error(on_error)
    mode = check_mode(states)
    chosen_profile = profile_named(profile) if profile is not None else None
    diag = diagnostics if diagnostics is not None else Diagnostics()
    collected = Transitions(mode, chosen_profile)
    for loaded in load_all(
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
    from quicsm.extract.derive import EXPLICIT, check_mode
    from quicsm.extract.profiles import profile_named
    from quicsm.extract.transitions import Transitions

    lenient = check_on_error(on_error)
    mode = check_mode(states)
    chosen_profile = profile_named(profile) if profile is not None else None
    collected = Transitions(mode, chosen_profile)
    traces: dict[str, list[Any]] = {name: [] for name in TRACES_SCHEMA}
    diagnostics: dict[str, Diagnostics] = {}
    sidecars: dict[Path, dict[str, Any]] = {}  # each run.json read (and reported) once
    for file in files:
        diag = diagnostics.setdefault(str(file), Diagnostics())
        for loaded in load_all(
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
            trace_rows(loaded, traces)
            collected.add(loaded, diag)
    return BatchRead(collected.frame(), traces_frame(traces), diagnostics)


def read_transitions(
    paths: PathLike | Iterable[PathLike],
    *,
    on_error: OnError = "raise",
    diagnostics: Diagnostics | None = None,
    states: str = HYBRID,
    profile: str | None = None,
    limits: ReadLimits = DEFAULT_LIMITS,
    split_app_limited: bool = False,
) -> pl.DataFrame:
    """:func:`scan_transitions`, collected. ``split_app_limited``: each ApplicationLimited
    visit split by why the sender was short of data, into the states
    :data:`quicsm.core.states.APP_LIMITED_CAUSES`
    (:mod:`quicsm.extract.app_limited_split`; the files' packets are read for it)."""
    if not split_app_limited:
        return scan_transitions(
            paths,
            on_error=on_error,
            diagnostics=diagnostics,
            states=states,
            profile=profile,
            limits=limits,
        ).collect()
    from quicsm.extract.app_limited_split import read_split

    # one warning for both reads of the files (states, then packets), a bad record in it once
    diag = diagnostics if diagnostics is not None else Diagnostics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        frame = scan_transitions(
            paths,
            on_error=on_error,
            diagnostics=diag,
            states=states,
            profile=profile,
            limits=limits,
        ).collect()
    frame = read_split(frame, on_error=on_error, diagnostics=diag, limits=limits)
    diag.warn(stacklevel=2)
    return frame


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
    :data:`~quicsm.extract.metric_columns.METRIC_BLOCK` events of a trace become a compact
    part of the frame returned: the peak follows the rows returned (about 95 bytes each), plus
    a block.
    """
    lenient = check_on_error(on_error)
    diag = diagnostics if diagnostics is not None else Diagnostics()
    batch = MetricsBatch()
    for path, spans in expand_spans(paths):
        stream = MetricsStream()
        item = path if spans is None else TraceSpans(str(path), spans)
        for loaded in load_all(
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
                batch.add(columns, file, tid, trace.vantage, start)
    batch.flush()
    parts = batch.out
    frame = pl.concat(parts, rechunk=False) if parts else pl.DataFrame(schema=METRICS_SCHEMA)
    del parts, batch
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
    lenient = check_on_error(on_error)
    diag = diagnostics if diagnostics is not None else Diagnostics()
    rows: dict[str, list[Any]] = {name: [] for name in TRACES_SCHEMA}
    for loaded in load_all(
        paths, lenient=lenient, diag=diag, count=True, limits=limits, discard_metrics=True
    ):
        trace_rows(loaded, rows)
    frame = traces_frame(rows)
    diag.warn()
    return frame
