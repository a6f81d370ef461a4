"""The numbers behind each section of the comparison report, composed from the results it is
handed (:class:`quicsm.compare.run.Compared` and each group's observed model) and shared by the
HTML and Markdown writers. Nothing here reads files or runs a comparison."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import polars as pl

from quicsm.compare.diff import DiffResult, fractions, keyed_transitions, split_key
from quicsm.compare.evidence import Explanation, loss_detection
from quicsm.compare.grouping import (
    NOT_FACTOR_PREFIXES,
    NOT_FACTORS,
    OUTCOMES,
    Comparison,
    Group,
    label_text,
    natural_key,
)
from quicsm.compare.run import Compared
from quicsm.core.numbers import format_p
from quicsm.model.tables import Model
from quicsm.render import svg_charts as svg
from quicsm.render.diff_format import cautions
from quicsm.stats import significance as sig

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


#: the report's one definition of "% of time", named in its captions and used by every number
#: and drawing of a state's share on the page (the diagrams, the time-in-state chart, the verdict)
SHARE_OF_TIME: Final[str] = (
    "% of time: the mean over the group's traces of each trace's share of its time in the state "
    "(each trace counts once, as the test of the difference does)"
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
    explanations: list[Explanation] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    #: the stratum (or scenario) the representative traces come from; None: every trace
    stratum: str | None = None
    #: shared axes of the representative traces' charts: (end ms, largest bytes)
    axes: tuple[float, float] | None = None
    #: how losses were detected, per group (:func:`quicsm.compare.evidence.loss_detection`):
    #: over every trace, and in the representative traces' stratum when there is one
    loss: pl.DataFrame | None = None
    loss_in_stratum: pl.DataFrame | None = None

    @property
    def title(self) -> str:
        return title_by_value(self.result.names[1], self.result.names[0])


def _pairs(name: str) -> dict[str, str] | None:
    """``key=value, key=value`` -> its pairs; None for any other name."""
    out: dict[str, str] = {}
    for part in name.split(", "):
        key, eq, value = part.partition("=")
        if not eq or not key or key in out:
            return None
        out[key] = value
    return out


def title_by_value(b: str, a: str) -> str:
    """``B vs A`` naming the groups by the values that tell them apart, the label after them:
    ``version=v0.65.0`` vs ``version=v0.48.2`` -> ``v0.65.0 vs v0.48.2 (version)``; labels
    both share follow (``v0.65.0 vs v0.48.2 (version; scenario=loss1)``). Names that are not
    ``key=value`` lists on the same keys stay as they are."""
    pb, pa = _pairs(b), _pairs(a)
    if pb is None or pa is None or pb.keys() != pa.keys():
        return f"{b} vs {a}"
    differ = [k for k in pb if pb[k] != pa[k]]
    if not differ:
        return f"{b} vs {a}"
    same = [f"{k}={pb[k]}" for k in pb if pb[k] == pa[k]]
    what = ", ".join(differ) + (f"; {', '.join(same)}" if same else "")
    return f"{' '.join(pb[k] for k in differ)} vs {' '.join(pa[k] for k in differ)} ({what})"


def build_views(
    compared: Sequence[Compared],
    models: Sequence[tuple[Model | None, Model | None]],
    *,
    alpha: float,
    matrix: tuple[str, str | None] | None,
    metric: str | None,
) -> list[ComparisonView]:
    """One view per comparison, from its results and each group's observed model."""
    from quicsm.render.dot import shared_model_dots

    views = []
    for done, pair in zip(compared, models, strict=True):
        comp, result = done.comparison, done.result
        stratum = _stratum(comp, done.explanations)
        # both groups on one layout: a state sits at the same spot in each drawing
        # the page's one "% of time" (SHARE_OF_TIME): the mean of per-trace shares, as the
        # time-in-state chart and its test, not the model's pooled share
        shares = [
            {st: v for st, v in result.states.select("state", col).iter_rows() if v is not None}
            for col in ("a_fraction", "b_fraction")
        ]
        shared = shared_model_dots(list(pair), captions=["", ""], shares=shares)
        dots = tuple("" if m is None else d for m, d in zip(pair, shared, strict=True))
        ga = _group_view(comp, comp.a, dots[0], stratum)
        gb = _group_view(comp, comp.b, dots[1], stratum)
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
                explanations=list(done.explanations),
                caveats=cautions(result),
                stratum=stratum,
                axes=_shared_axes(ga.series, gb.series),
                loss=loss_detection(comp),
                loss_in_stratum=None if stratum is None else loss_detection(comp, stratum),
            )
        )
    return views


# -- representative traces --------------------------------------------------------------------


def _cell_of(comp: Comparison, group: Group) -> dict[tuple[str, str], str]:
    """(file, trace) -> stratum, or scenario, of the group's traces (empty: neither)."""
    if comp.strata is not None:
        return {k: v for k, v in comp.strata.items()}
    out = {}
    for key, labels in zip(
        group.traces.select("file", "trace").iter_rows(), _labels(group), strict=True
    ):
        if "scenario" in labels:
            out[(str(key[0]), str(key[1]))] = label_text(labels["scenario"])
    return out


def _stratum(comp: Comparison, explanations: Sequence[Explanation]) -> str | None:
    """Where the representative traces come from: the stratum of the first explained change,
    else the stratum (or scenario) with the most traces in both groups; None: every trace."""
    for e in explanations:
        if e.cell is not None:
            return e.cell
    ca, cb = _cell_of(comp, comp.a), _cell_of(comp, comp.b)
    shared: dict[str, int] = {}
    for c in set(ca.values()) & set(cb.values()):
        shared[c] = min(
            sum(1 for v in ca.values() if v == c), sum(1 for v in cb.values() if v == c)
        )
    if not shared:
        return None
    return sorted(shared, key=lambda c: (-shared[c], natural_key(c)))[0]


def representative_trace(
    group: Group, *, candidates: set[tuple[str, str]] | None = None
) -> tuple[str, str] | None:
    """The trace whose time-in-state profile is closest (L1) to the mean profile of the
    candidates (default: every trace of the group).

    When the candidates include server traces, only those count: in the lab the server sends
    the data, so its congestion window is the one that matters.
    """
    keyed = keyed_transitions(group.transitions)
    if keyed.height == 0:
        return None
    states = sorted({str(s) for s in keyed["state"].cast(pl.String).unique().to_list()})
    ids, m = fractions(keyed, states)
    keys = [split_key(k) for k in ids]
    keep = [candidates is None or k in candidates for k in keys]
    servers = _server_keys(group)
    if any(k in servers for k, ok in zip(keys, keep, strict=True) if ok):
        keep = [ok and k in servers for k, ok in zip(keys, keep, strict=True)]
    rows = [i for i, ok in enumerate(keep) if ok]
    if not rows:
        return None
    sub = m[rows]
    dist = np.abs(sub - sub.mean(axis=0)).sum(axis=1)
    best = rows[int(np.argmin(dist))]  # first of equals: keys are sorted
    return keys[best]


def _group_view(comp: Comparison, group: Group, dot: str, stratum: str | None) -> GroupView:
    files = sorted({str(f) for f in group.traces["file"].to_list()}) if group.traces.height else []
    candidates = None
    if stratum is not None:
        cells = _cell_of(comp, group)
        candidates = {k for k, v in cells.items() if v == stratum}
    rep = representative_trace(group, candidates=candidates)
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
    return GroupView(group.name, group.n_traces, files, rep, series, note, dot, title)


def _shared_axes(*series: svg.Series | None) -> tuple[float, float] | None:
    ends: list[float] = []
    tops: list[float] = []
    for s in series:
        if s is None or not s.times_ms:
            continue
        ends += [*s.times_ms, *(b[1] for b in s.bands)]
        tops += [v for v in (*s.cwnd_bytes, *s.in_flight_bytes) if v is not None]
    if not ends:
        return None
    return (max(ends), max(tops) if tops else 1.0)


def _series(group: Group, rep: tuple[str, str]) -> tuple[svg.Series | None, str]:
    file, trace = rep
    metrics = group.metrics
    tr = group.transitions.filter((pl.col("file") == file) & (pl.col("trace") == trace))
    tr = tr.sort("time_ms")
    times = tr["time_ms"].to_list()
    states = [str(s) for s in tr["state"].cast(pl.String).to_list()]
    end = float(tr["end_ms"].max()) if tr.height else 0.0  # type: ignore[arg-type]
    bands = [
        (float(t), float(times[i + 1]) if i + 1 < len(times) else end, s)
        for i, (t, s) in enumerate(zip(times, states, strict=True))
    ]
    if metrics is None:
        return svg.Series([], [], [], [], [], bands), "the metrics of this trace were not read"
    m = metrics.filter((pl.col("file") == file) & (pl.col("trace") == trace)).sort("time_ms")
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
        d = dwell_times(keyed_transitions(group.transitions)).with_columns(
            pl.col("state").cast(pl.String)
        )
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
    return group.label_dicts()


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
        ids, m = fractions(keyed_transitions(group.transitions), [metric.split(":", 1)[1]])
        return {split_key(k): float(v) for k, v in zip(ids, m[:, 0].tolist(), strict=True)}
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
    # the comparison's own outcome tests (primary, Holm-adjusted as everywhere), when the matrix
    # is the outcome's cells; otherwise a descriptive family of its own (Holm over the cells)
    own = _outcome_tests(comp, result, metric=metric, row_key=row_key, col_key=col_key)
    cells: dict[tuple[str, str], svg.Cell] = {}
    if own is not None:
        note = (
            "tests: the comparison's outcome tests (primary family; Holm-adjusted p-values, "
            "the same as in every other section)"
        )
        for cell, (xa, xb) in buckets.items():
            r = own.get(cell[0])
            if r is None:
                continue
            pct = 100.0 * r["change"] if r["change"] == r["change"] else None
            p = r["p_value"]
            text = (
                format_p(p, note=r["note"])
                if p is None
                else f"Holm {format_p(p)}"
                if p < alpha
                else f"n.s. (Holm {format_p(p)})"
            )
            text += f" · {len(xa)}/{len(xb)}"
            cells[cell] = svg.Cell(pct, bool(r["significant"]), text, (len(xa), len(xb)))
        return Matrix(row_key, col_key, rows, cols, cells, metric, note), ""
    tests = {}
    for cell, (xa, xb) in buckets.items():
        tests[cell] = sig.mean_shift(xa, xb)
    order = sorted(tests)
    adjusted = sig.holm([tests[c].result.p_value for c in order])
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
            text = f"Holm (matrix) {format_p(p)}"
            text = text if p < alpha else f"n.s. ({text})"
        text += f" · {len(xa)}/{len(xb)}"
        cells[cell] = svg.Cell(pct, p is not None and p < alpha, text, (len(xa), len(xb)))
    note = (
        "tests: per cell, exact permutation or Welch; Holm over the cells of this matrix only "
        "(a descriptive view, outside the comparison's family)"
    )
    return Matrix(row_key, col_key, rows, cols, cells, metric, note), ""


def _outcome_tests(
    comp: Comparison, result: DiffResult, *, metric: str, row_key: str, col_key: str | None
) -> dict[str, dict[str, Any]] | None:
    """The result's outcome rows by cell, when the matrix shows one of them over its cells."""
    if metric not in OUTCOMES or col_key is not None:
        return None
    cell_label = "scenario" if comp.strata is None else None
    if comp.strata is not None and tuple(comp.within) == (row_key,):
        cell_label = row_key
    if cell_label != row_key:
        return None
    rows = result.outcomes.filter(pl.col("metric") == metric)
    out = {}
    for r in rows.iter_rows(named=True):
        cell = r["cell"]
        if comp.strata is not None:
            cell = cell.split("=", 1)[1] if "=" in cell else cell
        out[cell] = r
    return out or None


#: a count's provenance (:mod:`quicsm.extract.account`) after it in the loss-detection table
_SOURCE_CELL = {
    "logged": "",
    "packets": " (from packets)",
    "metrics": " (from metrics)",
    "mixed": " (mixed sources)",
}


def loss_rows(view: ComparisonView) -> tuple[list[str], list[list[str]]]:
    """The loss-detection table of a view: header and rows of text (mean per trace from the
    connection account, its provenance when not logged, e.g. ``117.4 (from packets)``; "not
    logged" where no source holds the kind for a group's traces); empty when there is no
    table."""
    if view.loss is None or view.loss.height == 0:
        return [], []
    a, b = view.result.names
    parts = [("", view.loss)]
    if view.loss_in_stratum is not None and view.loss_in_stratum.height:
        parts.append((f" in {view.stratum}", view.loss_in_stratum))
    header = ["per trace (mean)"]
    for where, df in parts:
        n_a, n_b = (df["n_a"][0], df["n_b"][0]) if df.height else (0, 0)
        header += [f"{a}{where} ({n_a})", f"{b}{where} ({n_b})"]
    rows = []
    for name in view.loss["indicator"].to_list():
        row = [name]
        for _, df in parts:
            hit = df.filter(pl.col("indicator") == name)
            for g in ("a", "b"):
                if hit.height == 0 or not hit[f"{g}_logged"][0]:
                    row.append("not logged")
                else:
                    source = hit[f"{g}_from"][0] if f"{g}_from" in hit.columns else "logged"
                    said = _SOURCE_CELL.get(source or "logged", f" ({source})")
                    row.append(f"{hit[f'{g}_mean'][0]:.1f}{said}")
        rows.append(row)
    return header, rows
