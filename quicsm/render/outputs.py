"""The files ``quicsm infer`` writes for a model, and the per-state table behind them.

=====================  =====================================================================
``model.json``         :meth:`quicsm.model.tables.Model.to_json` (schema in ``docs/model.md``)
``model.dot``          :func:`quicsm.render.dot.model_to_dot` (Fig. 13 style)
``model.svg|png|pdf``  the diagram rendered by Graphviz (only for those formats)
``stats.csv``          :func:`state_table`: one row per state
``transitions.csv``    transition probabilities with 95 % confidence intervals
=====================  =====================================================================

Every float in the CSV files is rounded to 12 significant digits, so the same input gives
byte-identical files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import polars as pl

from quicsm.core.errors import InputError
from quicsm.model.tables import Model
from quicsm.render.dot import RENDER_FORMATS, model_to_dot, render_dot

#: significant digits kept for floats in CSV outputs.
CSV_DIGITS: Final[int] = 12

STATE_TABLE_SCHEMA: Final[dict[str, pl.DataType]] = {
    "state": pl.String(),
    "seconds": pl.Float64(),
    "fraction": pl.Float64(),
    "mean_fraction": pl.Float64(),
    "traces": pl.Int64(),
    "visits": pl.Int64(),
    "censored": pl.Int64(),
    "nodes": pl.Int64(),
    "dwell_mean_ms": pl.Float64(),
    "dwell_median_ms": pl.Float64(),
    "dwell_p10_ms": pl.Float64(),
    "dwell_p90_ms": pl.Float64(),
}


def state_table(model: Model) -> pl.DataFrame:
    """One row per state (canonical order): time in state (total seconds, pooled and mean
    fraction), traces visiting it, visits, censored visits, model nodes carrying its label, and
    its dwell-time distribution (mean, median, p10, p90 in ms)."""
    s = model.stats
    tis = s.time_in_state.with_columns(pl.col("state").cast(pl.String))
    dwell = s.dwell.select(
        pl.col("state").cast(pl.String),
        "visits",
        "censored",
        pl.col("mean_ms").alias("dwell_mean_ms"),
        pl.col("median_ms").alias("dwell_median_ms"),
        pl.col("p10_ms").alias("dwell_p10_ms"),
        pl.col("p90_ms").alias("dwell_p90_ms"),
    )
    nodes = model.nodes.group_by("state").agg(pl.len().cast(pl.Int64).alias("nodes"))
    out = (
        tis.join(dwell, on="state", how="left", maintain_order="left")
        .join(nodes, on="state", how="left", maintain_order="left")
        .with_columns(pl.col("nodes").fill_null(0))
    )
    return out.select([pl.col(c).cast(t) for c, t in STATE_TABLE_SCHEMA.items()])


def _csv(df: pl.DataFrame) -> str:
    rounded = df.with_columns(
        pl.col(pl.Float64).round_sig_figs(CSV_DIGITS),
        pl.col(pl.Enum, pl.Categorical).cast(pl.String),
    )
    return rounded.write_csv()


def write_outputs(model: Model, out_dir: Path | str, *, fmt: str = "svg") -> list[Path]:
    """Write the model's files into ``out_dir`` (created if missing); returns their paths.

    ``fmt`` is the diagram format: svg, png or pdf renders ``model.<fmt>`` with Graphviz; dot
    and json write no image (model.dot and model.json are always written, first, so they exist
    even if rendering fails).
    """
    if fmt not in (*RENDER_FORMATS, "dot", "json"):
        raise InputError(
            f"unknown format {fmt!r}; choose one of {', '.join((*RENDER_FORMATS, 'dot', 'json'))}"
        )
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: expected a directory for the outputs, got a file")
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def put(name: str, data: str | bytes) -> None:
        path = out / name
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)
        written.append(path)

    put("model.json", model.to_json())
    dot = model_to_dot(model)
    put("model.dot", dot)
    put("stats.csv", _csv(state_table(model)))
    put("transitions.csv", _csv(model.stats.transition_probabilities))
    if fmt in RENDER_FORMATS:
        put(f"model.{fmt}", render_dot(dot, format=fmt))
    return written
