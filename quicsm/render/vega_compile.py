"""A Vega-Lite specification compiled to Vega once per *shape*: the specification without its
inline data.

Compiling starts the renderer's JavaScript engine (about 0.4 s of CPU in a fresh process) and
copies every data row through it; yet a specification's Vega depends on its data only through
which datasets are the same (Vega-Lite shares a source between views whose inline values are
equal). So each non-empty list of inline values (a view's ``data.values``, a top-level
``datasets`` entry) is replaced by a placeholder row that stands for its content (equal
values, equal placeholders), the rest is compiled, and the values are put back where the
placeholders came out. The compiled shape is kept in the cache directory
(:func:`quicsm.engine.cache.default_cache_dir`) as ``vega/<key>.json``, ``<key>`` a hash of
the shape and the renderer's version: the same plot drawn again (or another connection whose
panels, states and titles are the same) does not start the engine at all.

The result is the Vega that compiling the whole specification gives (tests compare them on
the shipped traces' pages); should the compiled shape carry a placeholder anywhere but as a
dataset's values, the whole specification is compiled instead. A kept copy that cannot be
read or whose digest does not match, and a cache that cannot be written, only mean compiling
again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

Spec = dict[str, Any]

#: the key of a placeholder row (never a field name of a quicsm chart)
MARK: Final[str] = "quicsm-data"
#: bump when what a kept shape holds changes
FORMAT: Final[str] = "quicsm-vega-shape/1"


def compile_vega(
    spec: Spec, *, compile_spec: Callable[[Spec], Spec], version: str, cache_dir: Path | None
) -> Spec:
    """The Vega of the Vega-Lite ``spec``, as ``compile_spec`` (the renderer's compiler,
    ``version`` its version) gives it, through the shape kept under ``cache_dir`` (None: no
    cache, the shape compiled each time)."""
    shape, values = without_data(spec)
    key = shape_key(shape, version=version)
    kept = None if cache_dir is None else cache_dir / "vega" / f"{key}.json"
    compiled = None if kept is None else read_kept(kept)
    if compiled is None:
        compiled = compile_spec(shape)
        if kept is not None:
            with contextlib.suppress(OSError):  # read-only or full: compiled again next time
                write_kept(kept, compiled)
    out = with_data(compiled, values)
    return compile_spec(spec) if out is None else out


def without_data(spec: Spec) -> tuple[Spec, list[list[Any]]]:
    """``spec`` with each non-empty list of inline values replaced by ``[{MARK: k}]``, and the
    lists by ``k`` (equal lists share one ``k``)."""
    numbers: dict[str, int] = {}
    values: list[list[Any]] = []

    def placeholder(rows: list[Any]) -> list[Any]:
        text = json.dumps(rows, sort_keys=True, separators=(",", ":"))
        k = numbers.setdefault(text, len(numbers))
        if k == len(values):
            values.append(rows)
        return [{MARK: k}]

    def visit(node: Any) -> Any:
        if isinstance(node, list):
            return [visit(n) for n in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for key, value in node.items():
            if key == "data" and isinstance(value, dict):
                rows = value.get("values")
                if isinstance(rows, list) and rows:
                    value = {**value, "values": placeholder(rows)}
                out[key] = value
            elif key == "datasets" and isinstance(value, dict):
                out[key] = {name: placeholder(rows) if isinstance(rows, list) and rows else rows
                            for name, rows in value.items()}  # fmt: skip
            else:
                out[key] = visit(value)
        return out

    return visit(spec), values


def with_data(compiled: Spec, values: list[list[Any]]) -> Spec | None:
    """The compiled shape with each placeholder's values back in place; None when a
    placeholder is anywhere but as the ``values`` of an entry of the top-level ``data``."""
    data = compiled.get("data")
    entries = data if isinstance(data, list) else []
    out = []
    put = 0
    for entry in entries:
        rows = entry.get("values") if isinstance(entry, dict) else None
        k = _placeholder(rows)
        if k is not None:
            rows = _as_engine_gives(values[k]) if 0 <= k < len(values) else None
            if rows is None:
                return None
            entry = {**entry, "values": rows}
            put += 1
        out.append(entry)
    text = json.dumps(compiled, separators=(",", ":"))
    if text.count(json.dumps(MARK)) != put:  # a placeholder went somewhere else
        return None
    return {**compiled, "data": out} if isinstance(data, list) else dict(compiled)


#: the numbers the engine hands back as integers (V8's 32-bit integers, signed or not)
_INT_LO: Final[int] = -(2**31)
_INT_HI: Final[int] = 2**32 - 1


def _as_engine_gives(rows: list[Any]) -> list[Any] | None:
    """``rows`` as they come back from the renderer's JavaScript engine: a number is an integer
    where the engine keeps it as one (whole, not -0, within 32 bits signed or unsigned) and a
    float otherwise; None (compile them whole) when an object has a key the engine would
    reorder (an array index)."""

    def value(v: Any) -> Any:
        if type(v) is float:
            if v.is_integer() and _INT_LO <= v <= _INT_HI and (v or math.copysign(1, v) > 0):
                return int(v)
            return v
        if type(v) is int:
            return v if _INT_LO <= v <= _INT_HI else float(v)
        if isinstance(v, dict):
            if any(_index_like(k) for k in v):
                raise _Reordered
            return {k: value(x) for k, x in v.items()}
        if isinstance(v, list):
            return [value(x) for x in v]
        return v

    try:
        return [value(r) for r in rows]
    except _Reordered:
        return None


class _Reordered(Exception):
    """An object whose keys the engine would put in another order."""


def _index_like(key: str) -> bool:
    return key.isdigit() and (key == "0" or not key.startswith("0"))


def _placeholder(rows: Any) -> int | None:
    if isinstance(rows, list) and len(rows) == 1 and isinstance(rows[0], dict):
        k = rows[0].get(MARK)
        if len(rows[0]) == 1 and isinstance(k, int) and not isinstance(k, bool):
            return k
    return None


def shape_key(shape: Spec, *, version: str) -> str:
    """The hash a compiled shape is kept under: the shape and the compiler's version."""
    h = hashlib.sha256(f"{FORMAT}\n{version}\n".encode())
    h.update(json.dumps(shape, sort_keys=True, separators=(",", ":")).encode())
    return h.hexdigest()[:32]


def read_kept(kept: Path) -> Spec | None:
    """The compiled shape kept at ``kept``, if its first line holds the digest of the rest."""
    try:
        digest, _, text = kept.read_text(encoding="utf-8").partition("\n")
        if digest != _digest(text):
            return None
        out = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return out if isinstance(out, dict) else None


def write_kept(kept: Path, compiled: Spec) -> None:
    """``compiled`` kept at ``kept`` with its digest, whole or not at all."""
    text = json.dumps(compiled, sort_keys=True, separators=(",", ":"))
    kept.parent.mkdir(parents=True, exist_ok=True)
    temp = kept.with_name(f".{kept.name}.{os.getpid()}")
    temp.write_text(f"{_digest(text)}\n{text}", encoding="utf-8")
    os.replace(temp, kept)


def _digest(text: str) -> str:
    return "sha256 " + hashlib.sha256(text.encode()).hexdigest()
