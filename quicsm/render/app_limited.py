"""The breakdown of ApplicationLimited time by cause
(:func:`quicsm.compare.app_limited.app_limited_breakdown`) as a table of text, the same cells in
the diff's text and Markdown, and the report's Markdown and HTML."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import polars as pl

from quicsm.compare.app_limited import app_limited_breakdown

__all__ = ["BREAKDOWN_NOTE", "BREAKDOWN_TITLE", "breakdown_table", "group_accounts"]

BREAKDOWN_TITLE: Final = "ApplicationLimited time by cause"
#: what the table says, under it
BREAKDOWN_NOTE: Final = (
    "Mean per sender trace (servers when the group has any), in ms, with the share of the "
    "group's ApplicationLimited time, from each connection's account. application: every byte "
    "of its streams was sent (or none written yet); flow control: it had data left but had "
    "sent up to the peer's connection (MAX_DATA) or stream (MAX_STREAM_DATA) limit "
    "(“logged”: after a DATA_BLOCKED / STREAM_DATA_BLOCKED frame it sent; “from packets”: "
    "its bytes sent against the peer's transport parameters and MAX_DATA / MAX_STREAM_DATA "
    "frames); pacing: no producer logs when its pacer releases the next packet, so pacing "
    "waits are in unknown; unknown: data was left and no limit held it (pacing, the CPU or the "
    "application's writes: not told apart). The last line is flow control in any state (a "
    "producer may log SlowStart while flow control holds it). “not logged”: no trace of the "
    "group can tell."
)

#: a value's provenance after it
_SOURCE: Final = {
    "logged": "logged",
    "packets": "from packets",
    "metrics": "from metrics",
    "mixed": "mixed sources",
}


def _cell(row: dict[str, Any], g: str) -> str:
    n, traces, mean = row[f"{g}_n"], row[f"{g}_traces"], row[f"{g}_mean_ms"]
    if not n:
        return "–"
    if mean is None or not traces:
        return "not logged"
    said = []
    if row[f"{g}_share"] is not None and row["column"] != "app_limited_ms":
        said.append(f"{100 * row[f'{g}_share']:.0f}%")
    source = row[f"{g}_from"] or ""
    said.append(_SOURCE.get(source, source))
    if traces < n:
        said.append(f"{traces} of {n} traces")
    return f"{mean:.1f} ms ({', '.join(s for s in said if s)})"


def group_accounts(view_groups: Sequence[Any]) -> list[pl.DataFrame | None]:
    """The connection accounts of a comparison's two groups (anything with ``account``)."""
    return [getattr(g, "account", None) for g in view_groups]


def breakdown_table(
    accounts: Sequence[pl.DataFrame | None], names: tuple[str, str]
) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the breakdown of the two groups (``accounts``: A's then B's); empty
    when neither group has an account."""
    if all(a is None for a in accounts):
        return [], []
    frame = app_limited_breakdown(accounts)
    a, b = names
    header = ["per sender trace (mean)", f"{a} ({frame['a_n'][0]})", f"{b} ({frame['b_n'][0]})"]
    rows = [[r["line"], _cell(r, "a"), _cell(r, "b")] for r in frame.iter_rows(named=True)]
    return header, rows
