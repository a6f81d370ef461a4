"""Finding labels: which keys the traces carry, which values, on how many traces.

Labels are the per-trace key/value pairs ``--where`` and ``--by`` select on (see
:mod:`quicsm.compare.grouping`). This module lists them (``quicsm labels``) and turns a key no
trace carries into an error that names the keys that do exist.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import polars as pl

from quicsm.core.errors import InputError
from quicsm.core.labels import label_text

#: schema of :func:`label_table`
LABELS_SCHEMA: dict[str, pl.DataType] = {
    "key": pl.String(),
    "value": pl.String(),
    "traces": pl.Int64(),
}


def _dicts(labels: Iterable[str | Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [orjson.loads(s) if isinstance(s, str) else s for s in labels]


def label_table(labels: Iterable[str | Mapping[str, Any]]) -> pl.DataFrame:
    """One row per (key, value) with the number of traces carrying it, sorted by key, then by
    falling count, then by value. ``labels`` are the per-trace label objects (JSON text or
    dicts), e.g. the ``labels`` column of :func:`quicsm.compare.grouping.traces_where`."""
    counts: Counter[tuple[str, str]] = Counter()
    for d in _dicts(labels):
        for key, value in d.items():
            counts[(str(key), label_text(value))] += 1
    rows = sorted(counts.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1]))
    return pl.DataFrame(
        {
            "key": [k for (k, _), _ in rows],
            "value": [v for (_, v), _ in rows],
            "traces": [n for _, n in rows],
        },
        schema=LABELS_SCHEMA,
    )


@dataclass(frozen=True)
class KeySummary:
    """One label key: how many traces carry it and its values (most common first)."""

    key: str
    traces: int
    values: list[tuple[str, int]]

    def describe(self, *, max_values: int = 6) -> str:
        """``scenario: baseline (60), loss (50), ... 3 more`` — or a range for numbers."""
        shown = self.values[:max_values]
        rest = len(self.values) - len(shown)
        numbers = [_number(v) for v, _ in self.values]
        if rest > 0 and all(n is not None for n in numbers):
            lo = min(n for n in numbers if n is not None)
            hi = max(n for n in numbers if n is not None)
            return f"{len(self.values)} values from {lo:g} to {hi:g}"
        text = ", ".join(f"{v} ({n})" for v, n in shown)
        return text + (f", … {rest} more" if rest > 0 else "")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def key_summaries(table: pl.DataFrame) -> list[KeySummary]:
    """Group a :func:`label_table` by key (a trace carries a key at most once, so the key's
    trace count is the sum over its values)."""
    out: list[KeySummary] = []
    for (key,), part in table.group_by("key", maintain_order=True):
        values = [(str(v), int(n)) for v, n in part.select("value", "traces").iter_rows()]
        out.append(KeySummary(str(key), sum(n for _, n in values), values))
    return out


def check_keys(
    keys: Sequence[str], labels: Iterable[str | Mapping[str, Any]], *, option: str
) -> None:
    """Raise :class:`InputError` naming the valid keys if no trace carries one of ``keys``
    (nothing to check when there are no traces at all)."""
    dicts = _dicts(labels)
    known = sorted({str(k) for d in dicts for k in d})
    for key in keys:
        if key in known or not dicts:
            continue
        close = difflib.get_close_matches(key, known, n=3)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise InputError(
            f"{option} {key}: no trace has the label {key!r}{hint}; the traces' labels are "
            f"{', '.join(compact_keys(known))} (`quicsm labels PATHS` lists them all with "
            "their values)"
        )


def compact_keys(keys: Sequence[str], *, max_per_prefix: int = 3) -> list[str]:
    """Sorted keys, with families of dotted keys (``relay.up.loss``, ``relay.down.loss``, ...)
    longer than ``max_per_prefix`` shown as ``relay.* (27 keys)``."""
    families: dict[str, list[str]] = {}
    for key in sorted(keys):
        families.setdefault(key.split(".", 1)[0] if "." in key else key, []).append(key)
    out: list[str] = []
    for prefix, members in families.items():
        dotted = [k for k in members if "." in k]
        if len(dotted) > max_per_prefix:
            out += [k for k in members if "." not in k]
            out.append(f"{prefix}.* ({len(dotted)} keys)")
        else:
            out += members
    return out


def matches(labels: Mapping[str, Any], where: Mapping[str, str]) -> bool:
    """Every condition holds; ``KEY=V1,V2`` accepts any of the listed values."""
    return all(k in labels and label_text(labels[k]) in v.split(",") for k, v in where.items())


def where_hint(traces: pl.DataFrame, where: Mapping[str, str]) -> str:
    """What the ``where`` keys could have been: ``scenario is one of baseline, loss`` (the
    values of each key among ``traces``, a frame with a ``labels`` column)."""
    table = label_table(traces["labels"].to_list())
    parts = []
    for summary in key_summaries(table.filter(pl.col("key").is_in(list(where)))):
        parts.append(f"{summary.key} takes {summary.describe()}")
    return "; ".join(parts)
