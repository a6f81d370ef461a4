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

import os
import shutil
import tempfile
from pathlib import Path
from typing import Final

import polars as pl

from quicsm.core.errors import InputError, QuicsmError
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


#: every file name :func:`write_outputs` may write
OUTPUT_NAMES: Final[frozenset[str]] = frozenset(
    {"model.json", "model.dot", "stats.csv", "transitions.csv"}
    | {f"model.{f}" for f in RENDER_FORMATS}
)
_TEMP_PREFIX = ".quicsm-"


class WrittenFiles(list[Path]):
    """The paths written, and which of them replaced the outputs of an earlier run."""

    def __init__(self, paths: list[Path], *, replaced: list[Path]) -> None:
        super().__init__(paths)
        self.replaced = replaced
        self.removed: list[Path] = []


def write_outputs(model: Model, out_dir: Path | str, *, fmt: str = "svg") -> WrittenFiles:
    """Write the model's files into ``out_dir`` (created if missing); returns their paths.

    ``fmt`` is the diagram format: svg, png or pdf renders ``model.<fmt>`` with Graphviz; dot
    and json write no image. When the diagram cannot be rendered the other files are still
    written (together), then the error is raised.

    Every file is first written into a temporary directory beside (or inside) ``out_dir`` and
    moved into place only when all are ready, so a failed or interrupted run leaves no mix of
    old and new files. A directory holding files quicsm did not write is left alone (an
    :class:`InputError`); the outputs of an earlier run are replaced, and reported in
    :attr:`WrittenFiles.replaced` (an earlier run's outputs that this run does not write, such
    as ``model.png`` after ``--format svg``, are removed: :attr:`WrittenFiles.removed`).
    """
    if fmt not in (*RENDER_FORMATS, "dot", "json"):
        raise InputError(
            f"unknown format {fmt!r}; choose one of {', '.join((*RENDER_FORMATS, 'dot', 'json'))}"
        )
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: expected a directory for the outputs, got a file")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"{out}: cannot create the output directory: {parent} is a file")
            break
    existing: list[str] = []
    if out.is_dir():
        try:
            existing = sorted(p.name for p in out.iterdir() if not p.name.startswith(_TEMP_PREFIX))
        except OSError as exc:
            raise InputError(f"{out}: cannot read the output directory: {exc.strerror}") from None
        foreign = [name for name in existing if name not in OUTPUT_NAMES]
        if foreign:
            shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            raise InputError(
                f"{out}: the output directory holds files quicsm did not write ({shown}); "
                "choose a new or empty directory"
            )
    files, failure = _render(model, fmt)
    try:
        if out.is_dir():
            written = _replace_into(out, files, existing)
            if failure is not None:
                raise failure
            return written
        out.parent.mkdir(parents=True, exist_ok=True)
        temp = Path(tempfile.mkdtemp(prefix=_TEMP_PREFIX, dir=out.parent))
        try:
            _write_all(temp, files)
            temp.rename(out)  # atomic: the directory appears complete
        finally:
            shutil.rmtree(temp, ignore_errors=True)
    except OSError as exc:
        raise InputError(f"{out}: cannot write the outputs: {exc.strerror or exc}") from None
    if failure is not None:
        raise failure
    return WrittenFiles([out / name for name in files], replaced=[])


def _render(model: Model, fmt: str) -> tuple[dict[str, str | bytes], QuicsmError | None]:
    """Every output's content, in the order they are listed, and why the diagram could not be
    rendered (Graphviz missing or failing): the other files are still written, together."""
    files: dict[str, str | bytes] = {"model.json": model.to_json()}
    dot = model_to_dot(model)
    files["model.dot"] = dot
    files["stats.csv"] = _csv(state_table(model))
    files["transitions.csv"] = _csv(model.stats.transition_probabilities)
    if fmt in RENDER_FORMATS:
        try:
            files[f"model.{fmt}"] = render_dot(dot, format=fmt)
        except QuicsmError as exc:
            return files, exc
    return files, None


def _write_all(directory: Path, files: dict[str, str | bytes]) -> None:
    for name, data in files.items():
        path = directory / name
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)


def _replace_into(out: Path, files: dict[str, str | bytes], existing: list[str]) -> WrittenFiles:
    """Write into a temporary directory inside ``out``, then move each file into place
    (``os.replace`` is atomic per file) and remove an earlier run's other outputs."""
    temp = Path(tempfile.mkdtemp(prefix=_TEMP_PREFIX, dir=out))
    try:
        _write_all(temp, files)
        for name in files:
            os.replace(temp / name, out / name)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    written = WrittenFiles(
        [out / name for name in files], replaced=[out / n for n in existing if n in files]
    )
    for name in existing:
        if name not in files:
            (out / name).unlink(missing_ok=True)
            written.removed.append(out / name)
    return written
