"""The transitions frame of loaded files: each trace's logged states, derived states or both
(hybrid), one row per state entered, normalised once for every file read."""

from __future__ import annotations

from typing import Any

import polars as pl

from quicsm.core.aliases import canonical_state, is_numeric
from quicsm.core.diagnostics import Diagnostics
from quicsm.core.frames import TRANSITIONS_SCHEMA, normalize_transitions
from quicsm.core.states import PAPER_STATES, UNKNOWN
from quicsm.extract.derive import (
    DERIVED,
    EXPLICIT,
    HYBRID,
    Row,
    derive_states,
    logged_states,
    merge_hybrid,
)
from quicsm.extract.derived_batch import DerivedBatch
from quicsm.extract.deriver import CompactRows, describe_states
from quicsm.extract.loading import TIME_DECIMALS, LoadedFile, trace_id
from quicsm.extract.profiles import Profile, detect_profile
from quicsm.extract.sidecar import cc_algorithm
from quicsm.extract.wire_pass import wire_pass
from quicsm.qlog.trace import TraceData


def trace_profile(loaded: LoadedFile, trace: TraceData, profile: Profile | None) -> Profile:
    if profile is not None:
        return profile
    labels = {**loaded.sidecar, **trace.labels}
    return detect_profile(title=trace.title, code_version=trace.code_version, labels=labels)


def transition_rows(
    loaded: LoadedFile,
    trace: TraceData,
    rows: dict[str, list[Any]],
    diag: Diagnostics,
    *,
    states: str = HYBRID,
    profile: Profile | None = None,
    batch: DerivedBatch | None = None,
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
        cc = cc_algorithm(trace, loaded.sidecar)
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
            derivation = derive_states(trace.metrics, profile=trace_profile(loaded, trace, profile))
        used = derivation.profile
        logged = logged_states(used, (r.state for r in explicit)) if states == HYBRID else None
        if logged is not None and logged >= set(PAPER_STATES):
            chosen = explicit  # the producer logs every state itself: nothing to derive
        else:
            derivation = wire_pass(loaded, trace, derivation, tid, diag)
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


class Transitions:
    """The transition rows (and derived frames and tables) of many files, normalised once."""

    def __init__(self, mode: str, profile: Profile | None) -> None:
        self.mode = mode
        self.profile = profile
        self.rows: dict[str, list[Any]] = {name: [] for name in TRANSITIONS_SCHEMA}
        self.tables: list[pl.DataFrame] = []
        self.derived = DerivedBatch()

    def add(self, loaded: LoadedFile, diag: Diagnostics) -> None:
        if loaded.table is not None:
            self.tables.append(loaded.table)
            return
        assert loaded.read is not None
        for trace in loaded.read.traces:
            transition_rows(
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
            self.derived = DerivedBatch()
            frame = pl.concat([frame, *derived, *self.tables])
        return normalize_transitions(frame)
