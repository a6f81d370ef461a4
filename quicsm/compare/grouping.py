"""Split traces into the groups ``quicsm diff`` and ``quicsm report`` compare.

Two ways to form groups:

- :func:`compare_paths`: group A is every trace under some paths, group B every trace under others
  (``quicsm diff A... --vs B...``);
- :func:`compare_by_label`: one group per value of a label (``--by version``); with more than two
  values, each value is compared with the previous one in natural order (1.9 before 1.10), or
  every value with a chosen ``baseline``.

Labels are the per-trace ``labels`` of :func:`quicsm.extract.read.read_traces` (the trace header's
``quicsm_labels``, a ``run.json`` sidecar, the qlog's own title / code_version / vantage point),
joined to the transitions on ``(file, trace)``. The trace table's own columns ``vantage``,
``title``, ``code_version`` and ``format`` are labels too, unless a label of that name exists.
``--where key=value`` filters keep only traces whose label equals the value (as text);
``key=v1,v2`` accepts any of the values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
import polars as pl

from quicsm.core.errors import InputError

OnError = Literal["raise", "skip"]

#: trace-table columns that also serve as labels
_BUILTIN_LABELS = ("vantage", "title", "code_version", "format")


@dataclass
class Group:
    """One side of a comparison: its transitions and one row per trace with its labels."""

    name: str
    transitions: pl.DataFrame
    traces: pl.DataFrame  # file, trace, labels (String: JSON object)
    paths: list[str] = field(default_factory=list)
    #: congestion metrics (:data:`quicsm.core.frames.METRICS_SCHEMA`); None = read from the files
    metrics: pl.DataFrame | None = None

    @property
    def n_traces(self) -> int:
        return self.traces.height

    def label_dicts(self) -> list[dict[str, Any]]:
        return [orjson.loads(s) for s in self.traces["labels"].to_list()]


@dataclass
class Comparison:
    """Group B compared with group A; ``notes`` says what was left out and why."""

    a: Group
    b: Group
    label: str | None = None
    notes: list[str] = field(default_factory=list)


def parse_where(items: Iterable[str]) -> dict[str, str]:
    """``["scenario=jitter", "vantage=server"]`` -> ``{"scenario": "jitter", ...}``."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--where {item!r}: expected KEY=VALUE, e.g. scenario=jitter")
        out[key.strip()] = value.strip()
    return out


def label_text(value: Any) -> str:
    """A label value as the text ``--where`` and ``--by`` compare against."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value is None:
        return "null"
    return str(value)


def natural_key(text: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key putting "1.9" before "1.10" and "v2" before "v10"."""
    parts = re.split(r"(\d+)", text)
    return tuple((1, int(p), "") if p.isdigit() else (0, 0, p) for p in parts if p)


def _labelled_traces(traces: pl.DataFrame) -> pl.DataFrame:
    """file, trace, labels with the built-in columns merged into the labels JSON."""
    merged: list[str] = []
    builtin = [c for c in _BUILTIN_LABELS if c in traces.columns]
    for row in traces.select("labels", *builtin).iter_rows(named=True):
        raw = row["labels"] or "{}"
        try:
            labels = orjson.loads(raw)
        except orjson.JSONDecodeError:
            labels = {}
        if not isinstance(labels, dict):
            labels = {}
        for c in builtin:
            if c not in labels and row[c] is not None:
                labels[c] = str(row[c])
        merged.append(orjson.dumps(labels, option=orjson.OPT_SORT_KEYS).decode())
    return traces.select(
        pl.col("file").cast(pl.String), pl.col("trace").cast(pl.String)
    ).with_columns(pl.Series("labels", merged, dtype=pl.String))


def _matches(labels: Mapping[str, Any], where: Mapping[str, str]) -> bool:
    """Every condition holds; ``KEY=V1,V2`` accepts any of the listed values."""
    return all(k in labels and label_text(labels[k]) in v.split(",") for k, v in where.items())


def filter_traces(traces: pl.DataFrame, *, where: Mapping[str, str]) -> pl.DataFrame:
    """``file, trace, labels`` of the rows of a trace table
    (:func:`quicsm.extract.read.read_traces`) whose labels satisfy ``where`` (every row when
    ``where`` is empty)."""
    labelled = _labelled_traces(traces)
    if where:
        keep = [_matches(orjson.loads(s), where) for s in labelled["labels"].to_list()]
        labelled = labelled.filter(pl.Series(keep, dtype=pl.Boolean))
    return labelled


def traces_where(
    paths: Sequence[str], *, where: Mapping[str, str], on_error: OnError
) -> pl.DataFrame:
    """``file, trace, labels`` of the traces under ``paths`` whose labels satisfy ``where``
    (every trace when ``where`` is empty). Reads only the trace headers."""
    from quicsm.extract.read import read_traces

    return filter_traces(read_traces(list(paths), on_error=on_error), where=where)


#: reads paths into (transitions frame, trace table) — how a parallel engine plugs in
Reader = Callable[[Sequence[str], OnError], tuple[pl.DataFrame, pl.DataFrame]]


def _load(
    paths: Sequence[str], *, where: Mapping[str, str], on_error: OnError, reader: Reader | None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Transitions and labelled traces under ``paths``, filtered by ``where``."""
    from quicsm.extract.read import read_transitions

    if not paths:
        raise InputError("no input paths given")
    if reader is not None:
        transitions, table = reader(paths, on_error)
        traces = filter_traces(table, where=where)
    else:
        traces = traces_where(paths, where=where, on_error=on_error)
        transitions = read_transitions(list(paths), on_error=on_error)
    transitions = transitions.join(traces.select("file", "trace"), on=["file", "trace"], how="semi")
    # a trace with no state at all still counts as a trace of its group only if it has
    # transitions; the trace table keeps only those the statistics see
    traces = traces.join(
        transitions.select("file", "trace").unique(), on=["file", "trace"], how="semi"
    )
    return transitions, traces.sort("file", "trace")


#: labels that identify a run or describe its outcome rather than its conditions
NOT_FACTORS: frozenset[str] = frozenset({
    "title", "code_version", "format", "vantage", "role", "run", "seed", "status", "reason",
    "patch", "run_dir", "ok", "error", "bytes", "completion_ms", "wall_s", "throughput_mbit",
    "repetitions", "scenario.description", "scenario.file", "device.mechanism",
})  # fmt: skip
NOT_FACTOR_PREFIXES = ("files.", "relay.")


def confounder_notes(
    a: Group, b: Group, *, exclude: Iterable[str] = (), max_values: int = 8
) -> list[str]:
    """Notes naming experimental conditions (labels such as ``scenario``) whose values differ
    between the groups: a difference found may come from them rather than from the grouping."""
    la, lb = a.label_dicts(), b.label_dicts()
    skip = set(exclude)
    keys = sorted({k for d in la + lb for k in d})
    notes = []
    for key in keys:
        if key in skip or key in NOT_FACTORS or key.startswith(NOT_FACTOR_PREFIXES):
            continue
        va = {label_text(d[key]) for d in la if key in d}
        vb = {label_text(d[key]) for d in lb if key in d}
        if not va or not vb or va == vb or len(va | vb) > max_values:
            continue
        if len(va) == 1 and len(vb) == 1:
            continue  # one value per group: a property of the groups themselves

        def show(values: set[str]) -> str:
            return ", ".join(sorted(values, key=natural_key))

        notes.append(
            f"the groups also differ in {key} ({a.name}: {show(va)}; {b.name}: {show(vb)}); "
            f"differences may come from it — narrow with --where {key}=..."
        )
    # the named scenario says it best (other conditions usually follow from it)
    scenario = [n for n in notes if n.startswith("the groups also differ in scenario ")]
    return scenario or notes[:2]


def vantage_notes(
    frames: Sequence[pl.DataFrame], *, subject: str = "the groups mix", purpose: str = "compare"
) -> list[str]:
    """A note when client and server traces are mixed: the two ends of one connection are not
    independent samples, and only the sender's congestion controller does much."""
    seen: set[str] = set()
    for df in frames:
        if "vantage" in df.columns and df.height:
            seen.update(str(v) for v in df["vantage"].cast(pl.String).unique().to_list())
    if {"client", "server"} <= seen:
        return [
            f"{subject} client and server traces (both ends of a connection count as two "
            f"traces); add --where vantage=server to {purpose} one end only"
        ]
    return []


def _where_text(where: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in where.items())


def _require(group: Group, where: Mapping[str, str]) -> None:
    if group.n_traces == 0:
        cond = f" matching {_where_text(where)}" if where else ""
        raise InputError(
            f"group {group.name!r}: no traces with states{cond} under {', '.join(group.paths)}"
        )


def compare_paths(
    a_paths: Sequence[str],
    b_paths: Sequence[str],
    *,
    where: Mapping[str, str] | None = None,
    on_error: OnError = "raise",
    names: tuple[str, str] | None = None,
    reader: Reader | None = None,
) -> Comparison:
    """Group A = traces under ``a_paths``, group B = traces under ``b_paths``. ``reader``
    replaces the default reading (:mod:`quicsm.extract.read`), e.g. by a parallel engine."""
    where = dict(where or {})
    if not b_paths:
        raise InputError("--vs needs at least one path for group B")
    ta, ra = _load(a_paths, where=where, on_error=on_error, reader=reader)
    tb, rb = _load(b_paths, where=where, on_error=on_error, reader=reader)
    if names is None:
        names = (
            a_paths[0] if len(a_paths) == 1 else "A",
            b_paths[0] if len(b_paths) == 1 else "B",
        )
        if names[0] == names[1]:
            names = ("A", "B")
    a = Group(names[0], ta, ra, list(a_paths))
    b = Group(names[1], tb, rb, list(b_paths))
    _require(a, where)
    _require(b, where)
    notes = vantage_notes([ta, tb]) + confounder_notes(a, b)
    return Comparison(a, b, notes=notes)


def compare_by_label(
    paths: Sequence[str],
    label: str,
    *,
    where: Mapping[str, str] | None = None,
    baseline: str | None = None,
    on_error: OnError = "raise",
    reader: Reader | None = None,
) -> list[Comparison]:
    """One comparison per pair of label values: consecutive in natural order, or each value
    against ``baseline``. ``reader``: as for :func:`compare_paths`."""
    where = dict(where or {})
    transitions, traces = _load(paths, where=where, on_error=on_error, reader=reader)
    values: list[str | None] = []
    for s in traces["labels"].to_list():
        labels = orjson.loads(s)
        values.append(label_text(labels[label]) if label in labels else None)
    traces = traces.with_columns(pl.Series("_value", values, dtype=pl.String))
    notes = vantage_notes([transitions])
    missing = traces.filter(pl.col("_value").is_null()).height
    if missing:
        notes.append(f"{missing} trace(s) without label {label!r} left out")
    distinct = sorted({v for v in values if v is not None}, key=natural_key)
    if len(distinct) < 2:
        found = ", ".join(distinct) or "none"
        cond = f" matching {_where_text(where)}" if where else ""
        raise InputError(
            f"--by {label}: need at least two values among the traces{cond}, found {found}"
        )
    if baseline is not None and baseline not in distinct:
        raise InputError(
            f"--baseline {baseline!r}: not a value of label {label!r} "
            f"(values: {', '.join(distinct)})"
        )
    if baseline is None:
        pairs = list(zip(distinct, distinct[1:], strict=False))
    else:
        pairs = [(baseline, v) for v in distinct if v != baseline]

    def group(value: str) -> Group:
        rows = traces.filter(pl.col("_value") == value).drop("_value")
        tr = transitions.join(rows.select("file", "trace"), on=["file", "trace"], how="semi")
        return Group(f"{label}={value}", tr, rows, list(paths))

    groups = {v: group(v) for v in distinct}
    return [
        Comparison(
            groups[x],
            groups[y],
            label=label,
            notes=notes + confounder_notes(groups[x], groups[y], exclude={label}),
        )
        for x, y in pairs
    ]


def group_from_frame(
    name: str,
    transitions: pl.DataFrame,
    *,
    labels: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    metrics: pl.DataFrame | None = None,
) -> Group:
    """A group made from an in-memory transitions frame (and optional per-trace labels keyed
    by ``(file, trace)``), for library use without files."""
    keys = (
        transitions.select(
            pl.col("file").cast(pl.String).fill_null(""), pl.col("trace").cast(pl.String)
        )
        .unique()
        .sort("file", "trace")
    )
    labels = labels or {}
    texts = [
        orjson.dumps(dict(labels.get((f, t), {})), option=orjson.OPT_SORT_KEYS).decode()
        for f, t in keys.iter_rows()
    ]
    traces = keys.with_columns(pl.Series("labels", texts, dtype=pl.String))
    from quicsm.core.frames import normalize_transitions

    tr = normalize_transitions(transitions).with_columns(pl.col("file").fill_null(""))
    return Group(name, tr, traces, [], metrics)
