"""Schemas of the tables every part of quicsm exchanges, and their normalisation.

The *transitions frame* is the canonical input of inference, statistics and diff: one row per
state entered, in time order per trace.  Every trace starts with ``Init`` at its first event time
and consecutive repeats of a state are not transitions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from quicsm.core.errors import InputError
from quicsm.core.states import STATE_DTYPE

if TYPE_CHECKING:  # imported where used: reading a file does not need numpy
    import numpy as np

VANTAGE_DTYPE: Final[pl.Enum] = pl.Enum(["client", "server", "unknown"])
SOURCE_DTYPE: Final[pl.Enum] = pl.Enum(["explicit", "derived"])
#: the kinds of row of :func:`quicsm.extract.read.read_metrics` (one byte a row, where a string
#: takes sixteen; compared with a string as a string is: ``pl.col("event") == "pto"``)
EVENT_DTYPE: Final[pl.Enum] = pl.Enum(["metrics", "packet_lost", "pto", "spurious_loss"])
#: the ``file`` and ``trace`` columns of every frame the readers return: a trace's name repeats
#: on each of its rows, and a categorical holds it once (four bytes a row where a string takes
#: sixteen; on a file of millions of metric events that is the difference between fitting in
#: memory and not). Polars' categoricals share one global mapping, so these columns join,
#: concatenate, compare and sort (by their text) across every frame; a frame of the user's own
#: with string keys joins after ``pl.col("trace").cast(pl.Categorical)`` (or casting ours to
#: ``pl.String``).
KEY_DTYPE: Final[pl.Categorical] = pl.Categorical()

TRANSITIONS_SCHEMA: Final[dict[str, pl.DataType]] = {
    "file": KEY_DTYPE,
    "trace": KEY_DTYPE,
    "vantage": VANTAGE_DTYPE,
    "time_ms": pl.Float64(),
    "state": STATE_DTYPE,
    "raw_state": pl.String(),
    "trigger": pl.String(),
    "source": SOURCE_DTYPE,
    # time of the trace's last event (ms from the trace's start), the same on every row of a
    # trace: the last state is taken to last until then (the censoring rule of time-in-state).
    "end_ms": pl.Float64(),
}

#: one row per metrics update, values carried forward within a trace; loss/PTO events are rows
#: with ``event`` set accordingly.
METRICS_SCHEMA: Final[dict[str, pl.DataType]] = {
    "file": KEY_DTYPE,
    "trace": KEY_DTYPE,
    "vantage": VANTAGE_DTYPE,
    "time_ms": pl.Float64(),
    "event": EVENT_DTYPE,  # "metrics" | "packet_lost" | "pto" | "spurious_loss"
    "cwnd_bytes": pl.Float64(),
    "bytes_in_flight": pl.Float64(),
    "ssthresh_bytes": pl.Float64(),
    "smoothed_rtt_ms": pl.Float64(),
    "min_rtt_ms": pl.Float64(),
    "pto_count": pl.Int64(),
    "pacing_rate_bps": pl.Float64(),  # null unless the producer logs it (quiche does)
    "latest_rtt_ms": pl.Float64(),  # the RTT sample of this event (not carried forward)
    "trigger": pl.String(),
}

# -- the model's tables (see quicsm.model.tables)
# ------------------------------------------------------

NODES_SCHEMA: Final[dict[str, pl.DataType]] = {
    "id": pl.Int64(),
    "state": pl.String(),  # a canonical state name, or "INITIAL" / "TERMINAL"
    "events": pl.Int64(),
}
EDGES_SCHEMA: Final[dict[str, pl.DataType]] = {
    "source": pl.Int64(),
    "target": pl.Int64(),
    "count": pl.Int64(),
    "probability": pl.Float64(),
}
INVARIANTS_SCHEMA: Final[dict[str, pl.DataType]] = {
    "kind": pl.String(),  # AlwaysFollowedBy | NeverFollowedBy | AlwaysPrecedes
    "a": pl.String(),
    "b": pl.String(),
    "support": pl.Int64(),
}


def empty_transitions() -> pl.DataFrame:
    return pl.DataFrame(schema=TRANSITIONS_SCHEMA)


def normalize_transitions(df: pl.DataFrame) -> pl.DataFrame:
    """Bring a frame of state observations into the canonical transitions form.

    - casts to :data:`TRANSITIONS_SCHEMA` (missing optional columns are filled with nulls);
    - sorts stably by trace, then time (input order breaks ties);
    - inserts ``Init`` at each trace's first time when the trace does not start with it;
    - drops consecutive repeats of the same state within a trace;
    - fills a missing ``end_ms`` with the trace's last transition time.
    """
    import numpy as np

    missing = {"trace", "time_ms", "state"} - set(df.columns)
    if missing:
        raise InputError(
            f"transitions need columns trace, time_ms, state; missing {sorted(missing)}"
        )
    fill = {
        "file": pl.lit(None, KEY_DTYPE),
        "vantage": pl.lit("unknown", VANTAGE_DTYPE),
        "raw_state": pl.lit(None, pl.String()),
        "trigger": pl.lit(None, pl.String()),
        "source": pl.lit("explicit", SOURCE_DTYPE),
        "end_ms": pl.col("time_ms").cast(pl.Float64).max().over("trace"),
    }
    df = df.with_columns(
        [expr.alias(name) for name, expr in fill.items() if name not in df.columns]
    )
    df = df.select([pl.col(n).cast(t) for n, t in TRANSITIONS_SCHEMA.items()])
    # Each step below copies every column, so a step with nothing to do is skipped: a frame that
    # is already in order, starts every trace with Init and repeats no state (a derived trace's
    # rows) is not copied again (the result is the same either way: a stable sort of sorted rows
    # keeps them, and no Init is inserted and no row dropped).
    # "Per trace" is per run of equal trace ids once the rows of a trace are contiguous
    # (sorted, or in order with no null trace), found in one pass (``_runs``): no step hashes
    # the trace ids (a window over a million traces costs seconds).
    tid, first = _runs(df)
    if not _in_order(df, first):
        df = (
            df.with_row_index("_order")
            .with_columns(pl.col("_order").cast(pl.Int64))
            .sort(["trace", "time_ms", "_order"], maintain_order=True)
            .drop("_order")
        )
        tid, first = _runs(df)
    inits = df.filter(first & (pl.col("state") != "Init")).with_columns(
        pl.lit("Init", STATE_DTYPE).alias("state"),
        pl.lit(None, pl.String()).alias("raw_state"),
        pl.lit(None, pl.String()).alias("trigger"),
        pl.lit("derived", SOURCE_DTYPE).alias("source"),
    )
    if inits.height:
        # an inserted Init goes before the trace's rows at its first time (order -1), that is
        # right before the trace's first row: each row moves down by the Inits at or before
        # its trace, each Init goes to its trace's first row's place
        n = df.height
        needs = np.zeros(n, dtype=np.int64)
        firsts = np.flatnonzero(first.to_numpy())
        missing = firsts[_lacks_init(df, firsts)]
        needs[missing] = 1
        shift = np.cumsum(needs)
        place = np.empty(n + len(missing), dtype=np.int64)
        place[np.arange(n) + shift] = np.arange(n)
        place[missing + shift[missing] - 1] = n + np.arange(len(missing))
        df = pl.concat([df, inits.select(df.columns)], rechunk=False)[place]
        tid, first = _runs(df)
    previous = pl.col("state").shift(1)
    keep = (pl.col("state") != previous) | previous.is_null() | pl.col("_first")
    df = df.with_columns(
        pl.max_horizontal("end_ms", pl.col("time_ms").max().over(tid)).alias("end_ms"),
        first.alias("_first"),
    )
    if df.select(keep.fill_null(False).all()).item():
        return df.drop("_first")
    return df.filter(keep).drop("_first")


def _runs(df: pl.DataFrame) -> tuple[pl.Series, pl.Series]:
    """Run ids of ``trace`` (consecutive equal ids, nulls included, are one run) and whether
    each row starts a run."""
    tid = df.get_column("trace").rle_id()
    first = tid.diff(null_behavior="ignore").fill_null(1) != 0 if len(tid) else tid.cast(pl.Boolean)
    return tid, first


def _lacks_init(df: pl.DataFrame, firsts: np.ndarray) -> np.ndarray:
    """Whether each of the given first rows has a state other than Init (null: no)."""
    return df.get_column("state").gather(firsts).ne("Init").fill_null(False).to_numpy().astype(bool)


def _in_order(df: pl.DataFrame, first: pl.Series) -> bool:
    """Whether ``df`` is sorted by trace, then time, with no null in either (``first``: where
    the runs of trace ids start): the runs' ids increase, and times within each run."""
    if df.height < 2:
        return True
    trace, time = df.get_column("trace"), df.get_column("time_ms")
    if trace.null_count() or time.null_count():
        return False
    ids = trace.filter(first)
    if not (ids.slice(1) > ids.slice(0, ids.len() - 1)).all():
        return False
    return bool(((time >= time.shift(1)) | first).slice(1).all())
