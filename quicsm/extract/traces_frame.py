"""The traces frame: one row per trace (:data:`TRACES_SCHEMA`), from qlog files and from
transition tables, with each trace's labels merged."""

from __future__ import annotations

from typing import Any

import polars as pl

from quicsm.core.frames import TRANSITIONS_SCHEMA
from quicsm.extract.loading import TIME_DECIMALS, LoadedFile, trace_id
from quicsm.extract.sidecar import labels_json
from quicsm.qlog.tabular import trace_labels, trace_summary

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


def trace_rows(loaded: LoadedFile, rows: dict[str, list[Any]]) -> None:
    """The rows of :func:`quicsm.extract.read.read_traces` for one loaded file."""
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
                    labels_json({**loaded.sidecar, **trace_labels(table_labels, str(t))})
                    for t in summary.get_column("trace").to_list()
                ],
                dtype=pl.String,
            )
        else:
            label_column = pl.repeat(
                labels_json({**loaded.sidecar}), n, dtype=pl.String, eager=True
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
            parts.append(traces_frame({k: v for k, v in rows.items() if k != _PARTS}))
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
        rows["labels"].append(labels_json(labels))


#: the key of ``rows`` (:func:`trace_rows`) holding frames of rows built already, which come
#: before the rows in its lists
_PARTS = "_parts"


def traces_frame(rows: dict[str, list[Any]]) -> pl.DataFrame:
    parts = rows.get(_PARTS)
    if parts is not None:
        rest = {k: v for k, v in rows.items() if k != _PARTS}
        if not parts:
            return traces_frame(rest)
        tail = [traces_frame(rest)] if rest["file"] else []
        return pl.concat([*parts, *tail])
    return pl.DataFrame(
        {
            k: pl.Series(v, dtype=pl.String if k == "vantage" else TRACES_SCHEMA[k])
            for k, v in rows.items()
        }
    ).select([pl.col(c).cast(t) for c, t in TRACES_SCHEMA.items()])
