"""Split traces into the groups ``quicsm diff`` and ``quicsm report`` compare — over frames it
is given (reading files is :mod:`quicsm.compare.load`'s job).

Two ways to form groups:

- :func:`split_paths`: group A is every trace read from some paths, group B every trace read from
  others (``quicsm diff A... --vs B...``);
- :func:`split_by_label`: one group per value of a label (``--by version``); with more than two
  values, each value is compared with the previous one in natural order (1.9 before 1.10), or
  every value with a chosen ``baseline``.

Like with like: when the two groups ran different mixes of a condition (``scenario``, …), the
comparison is stratified by it (every trace is compared only with traces of its own stratum),
by default or as asked with ``within``; when the strata do not overlap at all, there is nothing
like-with-like to compare and :class:`~quicsm.core.errors.InputError` names the confounder.
A condition with one value per group (a different ``stack`` behind ``--by version``) cannot be
stratified away: it becomes a caveat shown above the findings.

Labels are the per-trace ``labels`` of :func:`quicsm.extract.read.read_traces` (the trace header's
``quicsm_labels``, a ``run.json`` sidecar, the qlog's own title / code_version / vantage point),
joined to the transitions on ``(file, trace)``. The trace table's own columns ``vantage``,
``title``, ``code_version`` and ``format`` are labels too, unless a label of that name exists.
``--where key=value`` filters keep only traces whose label equals the value (as text);
``key=v1,v2`` accepts any of the values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
import polars as pl

from quicsm.compare.labels import check_keys, matches
from quicsm.core.errors import InputError
from quicsm.core.frames import KEY_DTYPE
from quicsm.core.labels import label_text

OnError = Literal["raise", "skip"]

#: per-trace outcome labels compared as outcomes (the lab's run.json: completion time and
#: throughput of the transfer)
OUTCOMES: tuple[str, ...] = ("completion_ms", "throughput_mbit")

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
    #: the connection account of its traces (:mod:`quicsm.extract.account`); None: made from
    #: the frames when first wanted (:func:`quicsm.compare.evidence.group_account`)
    account: pl.DataFrame | None = None

    @property
    def n_traces(self) -> int:
        return self.traces.height

    def label_dicts(self) -> list[dict[str, Any]]:
        return [orjson.loads(s) for s in self.traces["labels"].to_list()]


@dataclass
class Comparison:
    """Group B compared with group A.

    ``notes`` say what was left out and how the groups were matched; ``caveats`` what the
    comparison cannot separate (shown above the findings); ``strata`` the stratum of every
    ``(file, trace)`` when the comparison is stratified by the labels ``within``.
    """

    a: Group
    b: Group
    label: str | None = None
    notes: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    within: tuple[str, ...] = ()
    strata: dict[tuple[str, str], str] | None = None


def parse_where(items: Iterable[str]) -> dict[str, str]:
    """``["scenario=jitter", "vantage=server"]`` -> ``{"scenario": "jitter", ...}``.

    A key given more than once means "one of": ``scenario=loss scenario=jitter`` gives
    ``{"scenario": "loss,jitter"}``, the same as ``scenario=loss,jitter``."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--where {item!r}: expected KEY=VALUE, e.g. scenario=jitter")
        key, value = key.strip(), value.strip()
        out[key] = f"{out[key]},{value}" if key in out else value
    return out


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
        pl.col("file").cast(KEY_DTYPE), pl.col("trace").cast(KEY_DTYPE)
    ).with_columns(pl.Series("labels", merged, dtype=pl.String))


def filter_traces(traces: pl.DataFrame, where: Mapping[str, str]) -> pl.DataFrame:
    """The rows of a ``file, trace, labels`` table whose labels satisfy ``where`` (all rows when
    ``where`` is empty)."""
    if not where:
        return traces
    dicts = [orjson.loads(s) for s in traces["labels"].to_list()]
    check_keys(list(where), dicts, option="--where")  # a key no trace has: name those there are
    keep = [matches(d, where) for d in dicts]
    return traces.filter(pl.Series(keep, dtype=pl.Boolean))


def labelled_traces(traces: pl.DataFrame, *, where: Mapping[str, str]) -> pl.DataFrame:
    """``file, trace, labels`` of a trace table (:func:`quicsm.extract.read.read_traces`), its
    built-in columns merged into the labels, filtered by ``where``."""
    return filter_traces(_labelled_traces(traces), where)


def _restrict(transitions: pl.DataFrame, traces: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Transitions of the listed traces, and the traces that have transitions (a trace with no
    state at all takes no part in the statistics)."""
    transitions = transitions.join(traces.select("file", "trace"), on=["file", "trace"], how="semi")
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
#: ... and label families of the same kind: the files of a run, the relay's counters, and an
#: A/B experiment's bookkeeping (``ab.arm`` is the grouping itself; ``ab.pair``, ``ab.position``
#: which pair and which turn a run was: `quicsm lab ab`)
NOT_FACTOR_PREFIXES = ("files.", "relay.", "ab.")


def _is_condition(key: str) -> bool:
    return key not in NOT_FACTORS and not key.startswith(NOT_FACTOR_PREFIXES)


def _values(labels: Sequence[Mapping[str, Any]], key: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for d in labels:
        if key in d:
            v = label_text(d[key])
            counts[v] = counts.get(v, 0) + 1
    return counts


def _show(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{v} ×{counts[v]}" for v in sorted(counts, key=natural_key))


def _mix_differs(ca: Mapping[str, int], cb: Mapping[str, int]) -> bool:
    na, nb = sum(ca.values()), sum(cb.values())
    return any(ca.get(v, 0) * nb != cb.get(v, 0) * na for v in set(ca) | set(cb))


def _identifies(ca: Mapping[str, int], cb: Mapping[str, int]) -> bool:
    """Does a label name each trace (a connection id, a run number) rather than a condition?
    No value is shared by two traces, and some group has several traces carrying it."""
    combined = {v: ca.get(v, 0) + cb.get(v, 0) for v in set(ca) | set(cb)}
    return max(combined.values()) == 1 and max(sum(ca.values()), sum(cb.values())) >= 2


def condition_labels(a: Group, b: Group, *, exclude: Iterable[str] = ()) -> list[str]:
    """The labels of either group that describe how a run was made (not run ids, outcomes or
    the qlog's own fields, and not labels that name each trace)."""
    la, lb = a.label_dicts(), b.label_dicts()
    skip = set(exclude)
    return [
        key
        for key in sorted({k for d in la + lb for k in d})
        if key not in skip
        and _is_condition(key)
        and not _identifies(_values(la, key), _values(lb, key))
    ]


def confounders(
    a: Group, b: Group, *, exclude: Iterable[str] = (), max_values: int = 64
) -> tuple[list[str], list[str]]:
    """Condition labels (not run ids or outcomes) whose values are mixed differently in the two
    groups: ``(stratifiable, fixed)``. *Stratifiable* ones take several values (the groups ran
    different mixes of them); *fixed* ones take one value per group, so every difference is
    between those values as much as between the groups."""
    la, lb = a.label_dicts(), b.label_dicts()
    skip = set(exclude)
    keys = sorted({k for d in la + lb for k in d})
    mixed, fixed = [], []
    for key in keys:
        if key in skip or not _is_condition(key):
            continue
        ca, cb = _values(la, key), _values(lb, key)
        if not ca or not cb or len(set(ca) | set(cb)) > max_values or not _mix_differs(ca, cb):
            continue
        if _identifies(ca, cb):
            continue
        if len(ca) == 1 and len(cb) == 1:
            fixed.append(key)
        else:
            mixed.append(key)
    return mixed, fixed


def _stratum(labels: Mapping[str, Any], keys: Sequence[str]) -> str:
    return ", ".join(f"{k}={label_text(labels[k])}" if k in labels else f"{k}=(none)" for k in keys)


def _strata(groups: Sequence[Group], keys: Sequence[str]) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for g in groups:
        for (file, trace), labels in zip(
            g.traces.select("file", "trace").iter_rows(), g.label_dicts(), strict=True
        ):
            out[(str(file), str(trace))] = _stratum(labels, keys)
    return out


def _strata_word(keys: Sequence[str]) -> str:
    return f"{keys[0]} value(s)" if len(keys) == 1 else "strata"


def _distinct_partitions(
    labels: Sequence[Mapping[str, Any]], keys: Sequence[str]
) -> tuple[str, ...]:
    """``keys`` without those that split the traces exactly as an earlier one does (a scenario's
    rate, delay and queue labels usually move together)."""
    seen: set[tuple[int, ...]] = set()
    out = []
    for key in keys:
        codes: dict[str, int] = {}
        part = tuple(codes.setdefault(label_text(d.get(key)), len(codes)) for d in labels)
        if part not in seen:
            seen.add(part)
            out.append(key)
    return tuple(out)


def design(
    a: Group, b: Group, *, label: str | None, within: Sequence[str] = ()
) -> tuple[tuple[str, ...], dict[tuple[str, str], str] | None, list[str], list[str]]:
    """How to compare ``a`` with ``b`` like with like: ``(within, strata, notes, caveats)``.

    With ``within``, the comparison is stratified by those labels. Without, it is stratified by
    default by the conditions whose mix differs between the groups (``scenario`` alone when it
    is one of them: the other conditions follow from it), and a note says so. Raises
    :class:`InputError` naming the confounder when no stratum has traces in both groups.
    """
    exclude = {label} if label else set()
    mixed, fixed = confounders(a, b, exclude=exclude | set(within))
    notes: list[str] = []
    caveats: list[str] = []
    la, lb = a.label_dicts(), b.label_dicts()
    if not condition_labels(a, b, exclude=exclude):
        caveats.append(
            "the traces carry no labels saying how they were run (scenario, device, network, "
            "…): nothing here rules out that the groups differ in their conditions rather than "
            "in what is compared — label the runs (a run.json, trace.quicsm_labels or label "
            "columns of a table) to have quicsm compare like with like"
        )
    for key in fixed:
        (va,), (vb,) = _values(la, key), _values(lb, key)
        what = f"{label}s" if label else "the two path groups"
        if key == "stack":
            caveats.append(
                f"cross-stack comparison: {a.name} runs {va}, {b.name} runs {vb} — every "
                f"difference below is between implementations, not only between {what}"
            )
        else:
            caveats.append(
                f"{a.name} and {b.name} also differ in {key} ({va} vs {vb}): every difference "
                f"below is between {key} values as much as between {what}"
            )
    keys: tuple[str, ...] = tuple(within)
    default = False
    if not keys and mixed:
        keys = ("scenario",) if "scenario" in mixed else _distinct_partitions(la + lb, mixed)
        default = True
    for key in keys:
        if not any(key in d for d in la + lb):
            raise InputError(f"--within {key}: no trace of either group has the label {key!r}")
    if not keys:
        return (), None, notes, caveats
    strata = _strata((a, b), keys)
    in_a = {strata[(str(f), str(t))] for f, t in a.traces.select("file", "trace").iter_rows()}
    in_b = {strata[(str(f), str(t))] for f, t in b.traces.select("file", "trace").iter_rows()}
    shared = in_a & in_b
    what = " and ".join(keys)
    if not shared:
        mixes = "; ".join(
            f"{g.name}: {_show(_values(ls, k))}" for k in keys for g, ls in ((a, la), (b, lb))
        )
        raise InputError(
            f"the groups differ in {what} ({mixes}) and no {what} has traces in both groups: "
            f"any difference could come from {what} rather than from the grouping. Narrow "
            f"both groups to one {what} with --where {keys[0]}=VALUE"
        )
    left = sorted((in_a | in_b) - shared, key=natural_key)
    them = "it" if len(keys) == 1 else "them"
    how = f"by default, because the groups ran different mixes of {them}" if default else "as asked"
    text = f"compared within {what} ({how}): {len(shared)} {_strata_word(keys)} in both groups"
    if left:
        n_left = sum(1 for s in strata.values() if s in left)
        shown = ", ".join(left) if len(keys) == 1 and len(left) <= 8 else f"{len(left)} strata"
        text += f"; left out, present in one group only: {shown} ({n_left} traces)"
    notes.append(text)
    return keys, strata, notes, caveats


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


def _comparison(
    a: Group, b: Group, *, label: str | None, within: Sequence[str], notes: list[str]
) -> Comparison:
    keys, strata, more, caveats = design(a, b, label=label, within=within)
    return Comparison(
        a, b, label=label, notes=notes + more, caveats=caveats, within=keys, strata=strata
    )


def split_paths(
    a: tuple[pl.DataFrame, pl.DataFrame],
    b: tuple[pl.DataFrame, pl.DataFrame],
    *,
    names: tuple[str, str],
    paths: tuple[Sequence[str], Sequence[str]] = ((), ()),
    where: Mapping[str, str] | None = None,
    within: Sequence[str] = (),
    metrics: pl.DataFrame | None = None,
) -> Comparison:
    """Group A and group B from ``(transitions, traces)`` pairs already read (``traces`` as
    :func:`labelled_traces` returns them)."""
    where = dict(where or {})
    ta, ra = _restrict(a[0], filter_traces(a[1], where))
    tb, rb = _restrict(b[0], filter_traces(b[1], where))
    ga = Group(names[0], ta, ra, list(paths[0]), _metrics_of(metrics, ra))
    gb = Group(names[1], tb, rb, list(paths[1]), _metrics_of(metrics, rb))
    _require(ga, where)
    _require(gb, where)
    return _comparison(ga, gb, label=None, within=within, notes=vantage_notes([ta, tb]))


def _metrics_of(metrics: pl.DataFrame | None, traces: pl.DataFrame) -> pl.DataFrame | None:
    if metrics is None:
        return None
    return metrics.join(traces.select("file", "trace"), on=["file", "trace"], how="semi")


def split_by_label(
    transitions: pl.DataFrame,
    traces: pl.DataFrame,
    label: str,
    *,
    where: Mapping[str, str] | None = None,
    baseline: str | None = None,
    within: Sequence[str] = (),
    paths: Sequence[str] = (),
    metrics: pl.DataFrame | None = None,
) -> list[Comparison]:
    """One comparison per pair of label values (consecutive in natural order, or each value
    against ``baseline``) over traces already read."""
    where = dict(where or {})
    transitions, traces = _restrict(transitions, filter_traces(traces, where))
    check_keys([label], traces["labels"].to_list(), option="--by")
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
    if label in within:
        raise InputError(f"--within {label}: that is the label the groups are formed by")
    if baseline is None:
        pairs = list(zip(distinct, distinct[1:], strict=False))
    else:
        pairs = [(baseline, v) for v in distinct if v != baseline]

    def group(value: str) -> Group:
        rows = traces.filter(pl.col("_value") == value).drop("_value")
        tr = transitions.join(rows.select("file", "trace"), on=["file", "trace"], how="semi")
        return Group(f"{label}={value}", tr, rows, list(paths), _metrics_of(metrics, rows))

    groups = {v: group(v) for v in distinct}
    return [
        _comparison(groups[x], groups[y], label=label, within=within, notes=list(notes))
        for x, y in pairs
    ]


def outcomes_frame(comp: Comparison, *, metrics: Sequence[str] = OUTCOMES) -> pl.DataFrame:
    """Per-trace outcomes (numeric labels such as ``completion_ms``) of both groups, one row per
    trace and metric: ``file, trace, cell, metric, value``. The cell is the trace's stratum
    when the comparison is stratified, else its ``scenario`` when it has one, else ``all``.
    When a group holds server traces only those count (one value per connection: a run's
    client and server traces carry the same run labels)."""
    rows: dict[str, list[Any]] = {k: [] for k in ("file", "trace", "cell", "metric", "value")}
    for g in (comp.a, comp.b):
        servers = _server_keys(g)
        for (file, trace), labels in zip(
            g.traces.select("file", "trace").iter_rows(), g.label_dicts(), strict=True
        ):
            if servers and (file, trace) not in servers:
                continue
            if comp.strata is not None:
                cell = comp.strata.get((file, trace), "all")
            else:
                cell = label_text(labels["scenario"]) if "scenario" in labels else "all"
            for metric in metrics:
                v = labels.get(metric)
                if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
                    for k, x in zip(rows, (file, trace, cell, metric, float(v)), strict=True):
                        rows[k].append(x)
    return pl.DataFrame(
        rows,
        schema={
            "file": KEY_DTYPE,
            "trace": KEY_DTYPE,
            "cell": pl.String,
            "metric": pl.String,
            "value": pl.Float64,
        },
    )


def _server_keys(group: Group) -> set[tuple[str, str]]:
    if "vantage" not in group.transitions.columns:
        return set()
    servers = group.transitions.filter(pl.col("vantage").cast(pl.String) == "server")
    return {(str(f), str(t)) for f, t in servers.select("file", "trace").unique().iter_rows()}


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
            pl.col("file").cast(KEY_DTYPE).fill_null(""), pl.col("trace").cast(KEY_DTYPE)
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
    if metrics is not None:  # a frame of the caller's: its keys as every frame has them
        metrics = metrics.with_columns(
            pl.col(c).cast(KEY_DTYPE) for c in ("file", "trace") if c in metrics.columns
        )
    return Group(name, tr, traces, [], metrics)
