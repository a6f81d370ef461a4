"""Why each group's senders were short of data: their ApplicationLimited time by cause, from the
connection account (:mod:`quicsm.extract.account`, :mod:`quicsm.extract.sendable`), the same
numbers the account gives each trace.

:func:`app_limited_breakdown` takes the two groups' accounts and gives one row per line of the
breakdown (the whole, each cause, and the time flow control held data back in any state): per
group, the mean per sender trace (servers only when the group has any, as the loss table),
the share of the group's ApplicationLimited time, how many traces have a value, and where the
values come from (one provenance, or ``mixed``) with the producers' notes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import polars as pl

from quicsm.extract.account import ABSENT, APP_LIMITED_PARTS
from quicsm.extract.sendable import CAUSES

__all__ = ["BREAKDOWN_LINES", "BREAKDOWN_SCHEMA", "app_limited_breakdown", "senders"]

#: the lines of the breakdown: account column -> what it is, in words
BREAKDOWN_LINES: Final[dict[str, str]] = {
    "app_limited_ms": "ApplicationLimited, all",
    APP_LIMITED_PARTS["application"]: "application (no data left)",
    APP_LIMITED_PARTS["flow_control_connection"]: "flow control: MAX_DATA",
    APP_LIMITED_PARTS["flow_control_stream"]: "flow control: MAX_STREAM_DATA",
    APP_LIMITED_PARTS["pacing"]: "pacing",
    APP_LIMITED_PARTS["unknown"]: "unknown (data left, no limit)",
    "flow_control_ms": "flow control, in any state",
}
assert set(CAUSES) == set(APP_LIMITED_PARTS)

BREAKDOWN_SCHEMA: Final[dict[str, Any]] = {
    "line": pl.String,
    "column": pl.String,
    **{
        f"{g}_{name}": dtype
        for g in ("a", "b")
        for name, dtype in (
            ("mean_ms", pl.Float64),
            ("share", pl.Float64),
            ("traces", pl.Int64),
            ("n", pl.Int64),
            ("from", pl.String),
            ("note", pl.String),
        )
    },
}


def senders(account: pl.DataFrame) -> pl.DataFrame:
    """The account's sender traces: its servers when it has any, else every trace."""
    servers = account.filter(pl.col("vantage") == "server")
    return servers if servers.height else account


def _source(frame: pl.DataFrame, column: str) -> tuple[str | None, str | None]:
    """Where the values of ``column`` come from over the traces: one provenance, ``mixed``, or
    ``absent`` (none has a value); and the note, when the traces share one (else the first)."""
    if frame.height == 0:
        return None, None
    told = frame.filter(pl.col(f"{column}_from") != ABSENT)
    pool = told if told.height else frame
    sources = sorted(set(pool.get_column(f"{column}_from").to_list()))
    notes = [n for n in pool.get_column(f"{column}_note").to_list() if n]
    note = notes[0] if notes else None
    if len(set(notes)) > 1:
        note = f"{note} (and {len(set(notes)) - 1} other notes)"
    return (sources[0] if len(sources) == 1 else "mixed"), note


def app_limited_breakdown(accounts: Sequence[pl.DataFrame | None]) -> pl.DataFrame:
    """Each group's ApplicationLimited time by cause over its sender traces (``accounts``: the
    two groups' accounts, A then B; a None account gives empty cells). Shares are of the
    group's ApplicationLimited time summed over its traces (absent parts count 0, so the causes'
    shares sum to 1); ``traces``: traces with a value; ``n``: sender traces."""
    chosen = [senders(a) if a is not None else None for a in accounts]
    rows: list[dict[str, Any]] = []
    for column, line in BREAKDOWN_LINES.items():
        row: dict[str, Any] = {"line": line, "column": column}
        for g, frame in zip(("a", "b"), chosen, strict=True):
            if frame is None or frame.height == 0:
                row.update({f"{g}_n": 0, f"{g}_traces": 0})
                continue
            values = frame.get_column(column).drop_nulls()
            total = frame.get_column("app_limited_ms").fill_null(0.0).sum()
            source, note = _source(frame, column)
            row[f"{g}_n"] = frame.height
            row[f"{g}_traces"] = values.len()
            row[f"{g}_mean_ms"] = float(values.mean()) if values.len() else None  # type: ignore[arg-type]
            share = None
            if values.len() and total > 0 and column != "flow_control_ms":
                share = float(values.sum()) / float(total)
            row[f"{g}_share"] = share
            row[f"{g}_from"], row[f"{g}_note"] = source, note
        rows.append(row)
    return pl.DataFrame(rows, schema=BREAKDOWN_SCHEMA, orient="row")
