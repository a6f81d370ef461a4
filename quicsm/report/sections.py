"""The numbers behind each section of the comparison report, computed once and shared by the
HTML and Markdown writers."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import polars as pl

from quicsm.compare.diff import DiffResult, diff
from quicsm.compare.grouping import (
    NOT_FACTOR_PREFIXES,
    NOT_FACTORS,
    Comparison,
    Group,
    label_text,
    natural_key,
)
from quicsm.core.errors import QuicsmError
from quicsm.report import svg
from quicsm.stats import significance as sig

_SEP = "\x1f"

#: labels that never make a scenario-matrix axis: run ids, outcomes, and what groups usually
_NOT_AXES = NOT_FACTORS | {"stack", "version"}
#: labels tried first as axes, in this order
_PREFERRED_AXES = (
    "network.down.rate_mbit",
    "object_size",
    "network.down.delay_ms",
    "network.down.loss",
    "objects",
    "parallel",
    "device",
    "scenario",
)


@dataclass
class GroupView:
    name: str
    n_traces: int
    files: list[str]
    representative: tuple[str, str] | None  # (file, trace)
    series: svg.Series | None
    series_note: str
    fsm_dot: str  # the group's observed model in the paper's Fig. 13 style ("" if no states)
    representative_title: str = ""  # the representative trace's qlog title, if any


@dataclass
class Matrix:
    row_label: str
    col_label: str | None
    rows: list[str]
    cols: list[str]
    cells: dict[tuple[str, str], svg.Cell]
    metric: str
    note: str = ""


@dataclass
class ComparisonView:
    comparison: Comparison
    result: DiffResult
    groups: tuple[GroupView, GroupView]
    dwell_quantiles: dict[str, tuple[list[float] | None, list[float] | None]]
    matrix: Matrix | None
    matrix_note: str
    notes: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        return f"{self.result.names[1]} vs {self.result.names[0]}"


def build_views(
    comparisons: Sequence[Comparison],
    *,
    alpha: float,
    seed: int,
    permutations: int,
    matrix: tuple[str, str | None] | None,
    metric: str | None,
) -> list[ComparisonView]:
    views = []
    for comp in comparisons:
        result = diff(
            comp.a.transitions,
            comp.b.transitions,
            alpha=alpha,
            seed=seed,
            permutations=permutations,
            names=(comp.a.name, comp.b.name),
        )
        dot_a, dot_b = _fsm_dots(comp.a, comp.b)
        ga, gb = _group_view(comp.a, dot_a), _group_view(comp.b, dot_b)
        mat, note = _matrix(comp, result, alpha=alpha, axes=matrix, metric=metric)
        views.append(
            ComparisonView(
                comparison=comp,
                result=result,
                groups=(ga, gb),
                dwell_quantiles=_dwell_quantiles(comp.a, comp.b),
                matrix=mat,
                matrix_note=note,
                notes=list(comp.notes),
            )
        )
    return views


# -- keyed per-trace statistics ---------------------------------------------------------------


def _keyed(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(
        pl.concat_str([pl.col("file").fill_null(""), pl.lit(_SEP), pl.col("trace")]).alias("trace")
    )


def _fractions(group: Group) -> pl.DataFrame:
    """key, file, trace, state, fraction (positive-duration traces only)."""
    from quicsm.stats.descriptive import time_in_state

    if group.transitions.height == 0:
        return pl.DataFrame(
            schema={
                "key": pl.String,
                "file": pl.String,
                "trace": pl.String,
                "state": pl.String,
                "fraction": pl.Float64,
            }
        )
    tis = time_in_state(_keyed(group.transitions)).filter(pl.col("fraction").is_not_null())
    parts = pl.col("trace").str.split_exact(_SEP, 1)
    return tis.select(
        pl.col("trace").alias("key"),
        parts.struct.field("field_0").alias("file"),
        parts.struct.field("field_1").alias("trace"),
        pl.col("state").cast(pl.String),
        "fraction",
    )


def representative_trace(group: Group) -> tuple[str, str] | None:
    """The trace whose time-in-state profile is closest (L1) to its group's mean profile.

    When the group holds server traces, only those are candidates: in the lab the server sends
    the data, so its congestion window is the one that matters.
    """
    fr = _fractions(group)
    if "vantage" in group.transitions.columns:
        servers = (
            group.transitions.filter(pl.col("vantage").cast(pl.String) == "server")
            .select(pl.col("file").cast(pl.String), pl.col("trace").cast(pl.String))
            .unique()
        )
        if servers.height:
            fr = fr.join(servers, on=["file", "trace"], how="semi")
    if fr.height == 0:
        return None
    wide = fr.pivot(on="state", index=["key", "file", "trace"], values="fraction").fill_null(0.0)
    wide = wide.sort("key")
    states = [c for c in wide.columns if c not in ("key", "file", "trace")]
    m = wide.select(states).to_numpy()
    dist = np.abs(m - m.mean(axis=0)).sum(axis=1)
    best = int(np.argmin(dist))  # first of equals: keys are sorted
    return (str(wide["file"][best]), str(wide["trace"][best]))


def _group_view(group: Group, fsm_dot: str) -> GroupView:
    files = sorted({str(f) for f in group.traces["file"].to_list()}) if group.traces.height else []
    rep = representative_trace(group)
    series, note = (None, "no trace with states")
    if rep is not None:
        series, note = _series(group, rep)
    title = ""
    if rep is not None:
        for (file, trace), labels in zip(
            group.traces.select("file", "trace").iter_rows(), _labels(group), strict=True
        ):
            if (file, trace) == rep and isinstance(labels.get("title"), str):
                title = labels["title"]
    return GroupView(group.name, group.n_traces, files, rep, series, note, fsm_dot, title)


def _fsm_dots(a: Group, b: Group) -> tuple[str, str]:
    """Both groups' observed models on one layout (a state sits at the same spot in both)."""
    from quicsm.model.inference import infer
    from quicsm.render.dot import shared_model_dots

    models = [
        infer(_keyed(g.transitions), algorithm="observed") if g.transitions.height else None
        for g in (a, b)
    ]
    dots = shared_model_dots(models, captions=["", ""])
    return (dots[0] if models[0] else "", dots[1] if models[1] else "")


def _series(group: Group, rep: tuple[str, str]) -> tuple[svg.Series | None, str]:
    file, trace = rep
    metrics = group.metrics
    if metrics is None:
        try:
            from quicsm.extract.read import read_metrics

            metrics = read_metrics([file])
        except (QuicsmError, OSError) as exc:
            return None, f"metrics could not be read: {exc}"
    m = metrics.filter((pl.col("file") == file) & (pl.col("trace") == trace)).sort("time_ms")
    tr = group.transitions.filter((pl.col("file") == file) & (pl.col("trace") == trace))
    tr = tr.sort("time_ms")
    times = tr["time_ms"].to_list()
    states = [str(s) for s in tr["state"].cast(pl.String).to_list()]
    end = float(tr["end_ms"].max()) if tr.height else 0.0  # type: ignore[arg-type]
    bands = [
        (float(t), float(times[i + 1]) if i + 1 < len(times) else end, s)
        for i, (t, s) in enumerate(zip(times, states, strict=True))
    ]
    upd = m.filter(pl.col("cwnd_bytes").is_not_null() | pl.col("bytes_in_flight").is_not_null())
    losses = m.filter(pl.col("event") == "packet_lost")["time_ms"].to_list()
    ptos = m.filter(pl.col("event") == "pto")["time_ms"].to_list()
    if upd.height == 0:
        note = "this trace logs no congestion window or bytes in flight"
        return svg.Series([], [], [], losses, ptos, bands), note
    return (
        svg.Series(
            times_ms=upd["time_ms"].to_list(),
            cwnd_bytes=upd["cwnd_bytes"].to_list(),
            in_flight_bytes=upd["bytes_in_flight"].to_list(),
            losses_ms=losses,
            ptos_ms=ptos,
            bands=bands,
        ),
        "",
    )


def _dwell_quantiles(
    a: Group, b: Group
) -> dict[str, tuple[list[float] | None, list[float] | None]]:
    from quicsm.stats.descriptive import dwell_times

    out: dict[str, list[list[float] | None]] = {}
    for g, group in enumerate((a, b)):
        if group.transitions.height == 0:
            continue
        d = dwell_times(_keyed(group.transitions)).with_columns(pl.col("state").cast(pl.String))
        q = d.group_by("state").agg(
            [
                pl.col("dwell_ms").quantile(p, "linear").alias(f"q{p}")
                for p in (0.1, 0.25, 0.5, 0.75, 0.9)
            ]
        )
        for row in q.iter_rows():
            out.setdefault(row[0], [None, None])[g] = [float(v) for v in row[1:]]
    return {k: (v[0], v[1]) for k, v in out.items()}


# -- scenario matrix --------------------------------------------------------------------------


def _labels(group: Group) -> list[dict[str, Any]]:
    return [orjson.loads(s) for s in group.traces["labels"].to_list()]


def choose_axes(comp: Comparison, *, exclude: set[str]) -> tuple[str, str | None] | None:
    """Up to two labels that span a scenario matrix shared by both groups.

    Candidates are condition labels (not run ids or outcomes) that most traces of both groups
    carry, with 2-8 values, the same set of values in both groups. Preferred: two candidates
    that cross fully (every combination present, e.g. rate x object size), in the order of
    :data:`_PREFERRED_AXES`; else the named ``scenario`` alone; else the first candidate.
    """
    la, lb = _labels(comp.a), _labels(comp.b)
    if not la or not lb:
        return None
    keys = sorted(set().union(*la) & set().union(*lb))
    candidates: list[tuple[int, int, str]] = []
    partitions: dict[str, tuple[str, ...]] = {}
    for key in keys:
        if key in _NOT_AXES or key in exclude or key.startswith(NOT_FACTOR_PREFIXES):
            continue
        va = [label_text(d[key]) for d in la if key in d]
        vb = [label_text(d[key]) for d in lb if key in d]
        if len(va) < 0.9 * len(la) or len(vb) < 0.9 * len(lb):
            continue
        values = set(va) | set(vb)
        if not 2 <= len(values) <= 8 or set(va) != set(vb):
            continue
        pref = _PREFERRED_AXES.index(key) if key in _PREFERRED_AXES else len(_PREFERRED_AXES)
        candidates.append((pref, -len(values), key))
        partitions[key] = tuple(label_text(d.get(key)) for d in la + lb)
    ordered: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for _, _, key in sorted(candidates):
        if partitions[key] not in seen:  # not the same split of the traces as another axis
            seen.add(partitions[key])
            ordered.append(key)
    for i, row in enumerate(ordered):
        for col in ordered[i + 1 :]:
            if row == "scenario" or col == "scenario":
                continue
            combos = set(zip(partitions[row], partitions[col], strict=True))
            if len(combos) == len(set(partitions[row])) * len(set(partitions[col])):
                return (row, col)
    if "scenario" in ordered:
        return ("scenario", None)
    return (ordered[0], None) if ordered else None


def _metric_values(group: Group, metric: str) -> dict[tuple[str, str], float]:
    """(file, trace) -> value of the metric: ``state:NAME`` (time share) or a numeric label."""
    if metric.startswith("state:"):
        state = metric.split(":", 1)[1]
        fr = _fractions(group)
        keys = fr.select("file", "trace").unique()
        vals = fr.filter(pl.col("state") == state)
        got = {(f, t): v for f, t, v in vals.select("file", "trace", "fraction").iter_rows()}
        return {(f, t): float(got.get((f, t), 0.0)) for f, t in keys.iter_rows()}
    out: dict[tuple[str, str], float] = {}
    for (file, trace), labels in zip(
        group.traces.select("file", "trace").iter_rows(), _labels(group), strict=True
    ):
        v = labels.get(metric)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            out[(file, trace)] = float(v)
    return out


def _server_keys(group: Group) -> set[tuple[str, str]]:
    if "vantage" not in group.transitions.columns:
        return set()
    servers = group.transitions.filter(pl.col("vantage").cast(pl.String) == "server")
    return {(str(f), str(t)) for f, t in servers.select("file", "trace").unique().iter_rows()}


def _servers_only(
    group: Group, values: dict[tuple[str, str], float]
) -> dict[tuple[str, str], float]:
    servers = _server_keys(group)
    kept = {k: v for k, v in values.items() if k in servers}
    return kept or values


def default_metric(comp: Comparison, result: DiffResult) -> str:
    la, lb = _labels(comp.a), _labels(comp.b)
    has = [isinstance(d.get("completion_ms"), int | float) for d in la + lb]
    if has and sum(has) >= 0.9 * len(has):
        return "completion_ms"
    top = result.states.filter(pl.col("state") != "Init")
    return f"state:{top['state'][0]}" if top.height else "state:Init"


def _matrix(
    comp: Comparison,
    result: DiffResult,
    *,
    alpha: float,
    axes: tuple[str, str | None] | None,
    metric: str | None,
) -> tuple[Matrix | None, str]:
    metric = metric or default_metric(comp, result)
    exclude = {comp.label or "", metric}
    if axes is None:
        axes = choose_axes(comp, exclude=exclude)
        if axes is None:
            return None, (
                "The traces' labels do not span a scenario matrix shared by both groups "
                "(pass --matrix ROW,COL to choose labels)."
            )
    row_key, col_key = axes
    va, vb = _metric_values(comp.a, metric), _metric_values(comp.b, metric)
    # one value per connection: when a group has server traces, the heatmap uses only those
    # (a run's client and server traces carry the same run labels)
    va, vb = _servers_only(comp.a, va), _servers_only(comp.b, vb)
    if not va or not vb:
        return None, f"No trace has a numeric value of {metric!r} in both groups."

    def cell_of(labels: Mapping[str, Any]) -> tuple[str, str] | None:
        if row_key not in labels or (col_key is not None and col_key not in labels):
            return None
        col = label_text(labels[col_key]) if col_key is not None else "all"
        return (label_text(labels[row_key]), col)

    buckets: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for g, (group, values) in enumerate(((comp.a, va), (comp.b, vb))):
        for key, labels in zip(
            group.traces.select("file", "trace").iter_rows(), _labels(group), strict=True
        ):
            cell = cell_of(labels)
            if cell is None or key not in values:
                continue
            buckets.setdefault(cell, ([], []))[g].append(values[key])
    rows = sorted({r for r, _ in buckets}, key=natural_key)
    cols = sorted({c for _, c in buckets}, key=natural_key)
    tests = {}
    for cell, (xa, xb) in buckets.items():
        tests[cell] = sig.welch(xa, xb)
    order = sorted(tests)
    adjusted = sig.holm([tests[c].result.p_value for c in order])
    cells: dict[tuple[str, str], svg.Cell] = {}
    for cell, p in zip(order, adjusted, strict=True):
        xa, xb = buckets[cell]
        w = tests[cell]
        mean_a = float(np.mean(xa)) if xa else math.nan
        pct = None
        if xa and xb and mean_a != 0:
            pct = 100.0 * w.difference / abs(mean_a)
        if p is None:
            text = w.result.note or "no test"
        else:
            text = sig.format_p(p) if p < alpha else f"n.s. ({sig.format_p(p)})"
        text += f" · {len(xa)}/{len(xb)}"
        cells[cell] = svg.Cell(pct, p is not None and p < alpha, text, (len(xa), len(xb)))
    return Matrix(row_key, col_key, rows, cols, cells, metric), ""
