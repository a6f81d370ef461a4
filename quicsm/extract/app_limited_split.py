"""ApplicationLimited split by cause in the transitions: the opt-in state machine of
``split_app_limited``.

Each ApplicationLimited visit (from its row's time until the trace's next row, the last one
until ``end_ms``: the rule of time-in-state) is cut where the sender's reason for being short
of data changes (:func:`quicsm.extract.sendable.segments_in`) and becomes consecutive visits of
:data:`quicsm.core.states.APP_LIMITED_CAUSES`, one per piece, each starting when its piece
does. Nothing is rounded to a dominant cause: the pieces' times sum to the visit's, every other
row is kept as it was, so the time in every other state and the transitions between them are
those of the unsplit model.

The connection's and a stream's flow control are one state (``ApplicationLimited (flow
control)``); the account (:mod:`quicsm.extract.account`) keeps them apart. A trace whose packets
tell nothing (no packets logged, a capture, no STREAM frames: no sendable timeline) has its
visits all ``ApplicationLimited (unknown)``, as the account puts all their time in unknown.
A visit of no duration takes the cause at its start. Every part keeps the visit's
``raw_state`` and ``source``; only the first keeps its ``trigger`` (what the trace logged as
moving the sender into ApplicationLimited), the others have none: no event began them.

:func:`split_app_limited` is sans-I/O: it takes the transitions and each trace's timeline, read
already (:func:`quicsm.extract.packets.read_packet_timelines`); :func:`read_split` reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import polars as pl

from quicsm.core.diagnostics import Diagnostics
from quicsm.core.states import (
    APP_LIMITED,
    APP_LIMITED_APPLICATION,
    APP_LIMITED_FLOW_CONTROL,
    APP_LIMITED_PACING,
    APP_LIMITED_UNKNOWN,
    STATE_DTYPE,
)
from quicsm.extract.sendable import (
    APPLICATION,
    FLOW_CONTROL_CONNECTION,
    FLOW_CONTROL_STREAM,
    PACING,
    UNKNOWN,
    SendableTimeline,
    segments_in,
)
from quicsm.qlog.blocks import DEFAULT_LIMITS, ReadLimits

#: the state of each cause of :data:`quicsm.extract.sendable.CAUSES`
STATE_OF_CAUSE: Final[dict[str, str]] = {
    APPLICATION: APP_LIMITED_APPLICATION,
    FLOW_CONTROL_CONNECTION: APP_LIMITED_FLOW_CONTROL,
    FLOW_CONTROL_STREAM: APP_LIMITED_FLOW_CONTROL,
    PACING: APP_LIMITED_PACING,
    UNKNOWN: APP_LIMITED_UNKNOWN,
}


def cause_at(timeline: SendableTimeline, t: float) -> str:
    """The timeline's cause at time ``t`` (ms): that of the last segment starting at or
    before it (the first one before the first segment)."""
    k = 0
    for i, start in enumerate(timeline.times):
        if start <= t:
            k = i
        else:
            break
    return timeline.causes[k]


def pieces(start: float, end: float, timeline: SendableTimeline | None) -> list[tuple[float, str]]:
    """The visit ``[start, end)`` as consecutive pieces ``(start, state)``, one per change
    of cause (each lasts until the next one's start, the last until ``end``)."""
    if timeline is None:
        return [(start, APP_LIMITED_UNKNOWN)]
    if not end > start:
        return [(start, STATE_OF_CAUSE[cause_at(timeline, start)])]
    out: list[tuple[float, str]] = []
    for a, _, cause in segments_in([(start, end)], timeline):
        state = STATE_OF_CAUSE[cause]
        if not out or out[-1][1] != state:  # both flow controls are one state
            out.append((a, state))
    return out


def split_app_limited(
    transitions: pl.DataFrame, timelines: Mapping[str, SendableTimeline | None]
) -> pl.DataFrame:
    """``transitions`` (:data:`quicsm.core.frames.TRANSITIONS_SCHEMA`, grouped by trace in time
    order) with each ApplicationLimited visit split by cause (see the module docstring);
    ``timelines``: each trace id's sendable timeline (a trace missing from it, or None, tells
    nothing). Same columns and dtypes; rows of other states untouched."""
    if transitions.height == 0:
        return transitions
    until = pl.col("time_ms").shift(-1).over("trace").fill_null(pl.col("end_ms")).alias("_until")
    indexed = transitions.with_row_index("_row").with_columns(until)
    al = indexed.filter(pl.col("state") == APP_LIMITED)
    if al.height == 0:
        return transitions
    rows: list[int] = []
    times: list[float] = []
    states: list[str] = []
    parts: list[int] = []
    for row, trace, a, b in al.select("_row", "trace", "time_ms", "_until").iter_rows():
        b = a if b is None else b
        for part, (t, state) in enumerate(pieces(a, b, timelines.get(str(trace)))):
            rows.append(row)
            times.append(t)
            states.append(state)
            parts.append(part)
    split = (
        indexed.drop("_until")
        .join(
            pl.DataFrame(
                {
                    "_row": pl.Series(rows, dtype=pl.UInt32),
                    "_time": pl.Series(times, dtype=pl.Float64),
                    "_state": pl.Series(states, dtype=STATE_DTYPE),
                    "_part": pl.Series(parts, dtype=pl.Int64),
                }
            ),
            on="_row",
            how="inner",
        )
        .with_columns(
            pl.col("_time").alias("time_ms"),
            pl.col("_state").alias("state"),
            # what moved the sender into ApplicationLimited is the first part's; the next
            # parts begin where the cause changes, which no event of the trace triggered
            pl.when(pl.col("_part") == 0).then(pl.col("trigger")).alias("trigger"),
        )
    )
    others = indexed.filter(pl.col("state") != APP_LIMITED).drop("_until")
    columns = transitions.columns
    return (
        pl.concat(
            [
                others.with_columns(pl.lit(0, dtype=pl.Int64).alias("_part")).select(
                    *columns, "_row", "_part"
                ),
                split.select(*columns, "_row", "_part"),
            ]
        )
        .sort("_row", "_part")
        .select(columns)
    )


def read_split(
    transitions: pl.DataFrame,
    *,
    on_error: str = "raise",
    diagnostics: Diagnostics | None = None,
    limits: ReadLimits = DEFAULT_LIMITS,
) -> pl.DataFrame:
    """:func:`split_app_limited` with the timelines read from the files the transitions came
    from (their packets: only files holding an ApplicationLimited visit are read). Traces of a
    table (CSV, Parquet) have no packets: their visits are ``ApplicationLimited (unknown)``."""
    from quicsm.extract.packets import read_packet_timelines

    if transitions.height == 0:
        return transitions
    al = transitions.filter(pl.col("state") == APP_LIMITED)
    if al.height == 0:
        return transitions
    ids = [str(t) for t in al.get_column("trace").unique(maintain_order=True)]
    files = [str(f) for f in al.get_column("file").unique(maintain_order=True)]
    read = read_packet_timelines(
        files, ids, on_error=on_error, diagnostics=diagnostics, limits=limits, byte_offsets=False
    )
    return split_app_limited(transitions, {t: p.sendable for t, p in read.items()})


__all__ = ["STATE_OF_CAUSE", "cause_at", "pieces", "read_split", "split_app_limited"]
