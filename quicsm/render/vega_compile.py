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
    stripped = without_data(spec)
    if stripped is None:
        return compile_spec(spec)
    shape, values = stripped
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


def without_data(spec: Spec) -> tuple[Spec, list[list[Any]]] | None:
    """``spec`` with each non-empty list of inline values replaced by ``[{MARK: k}]``, and the
    lists by ``k``, as the engine hands them back (:func:`_as_engine_gives`); lists the engine
    holds equal (it compares them as JSON with sorted keys: ``1`` and ``1.0`` alike) share one
    ``k`` and the first one's rows, as the engine shares their source. None (compile the whole
    specification) where the rows hold what this comparison cannot tell as the engine does
    (a -0, not a number, an infinity) or keys the engine reorders."""

    class _Unlike(Exception):
        pass

    lengths: dict[int, int] = {}

    def count(node: Any) -> None:  # how many lists of each length (only those can be equal)
        if isinstance(node, list):
            for n in node:
                count(n)
        elif isinstance(node, dict):
            for key, value in node.items():
                if key == "data" and isinstance(value, dict):
                    rows = value.get("values")
                    if isinstance(rows, list) and rows:
                        lengths[len(rows)] = lengths.get(len(rows), 0) + 1
                elif key == "datasets" and isinstance(value, dict):
                    for rows in value.values():
                        if isinstance(rows, list) and rows:
                            lengths[len(rows)] = lengths.get(len(rows), 0) + 1
                else:
                    count(value)

    numbers: dict[str, int] = {}
    values: list[list[Any]] = []

    def placeholder(rows: list[Any]) -> list[Any]:
        given = _as_engine_gives(rows)
        if given is None:
            raise _Unlike
        if lengths[len(rows)] == 1:  # no other list as long: none equal to it
            values.append(given)
            return [{MARK: len(values) - 1}]
        try:
            text = json.dumps(given, sort_keys=True, separators=(",", ":"), allow_nan=False)
        except ValueError:
            raise _Unlike from None
        k = numbers.setdefault(text, len(values))
        if k == len(values):
            values.append(given)
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

    count(spec)
    try:
        return visit(spec), values
    except _Unlike:
        return None


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
            if not 0 <= k < len(values):
                return None
            entry = {**entry, "values": values[k]}
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
    where the engine keeps it as one (whole, within 32 bits signed or unsigned) and a float
    otherwise; None when an object has a key the engine would reorder (an array index) or a
    number is -0 (which the engine hands back as a float but compares equal to 0), not a
    number or infinite."""
    out: list[Any] = []
    checked: Any = None  # the keys of the last row checked (rows mostly share their keys)
    try:
        for row in rows:
            if type(row) is not dict:
                out.append(_value(row))
                continue
            keys = row.keys()
            if keys != checked:
                if any(_index_like(k) for k in keys):
                    return None
                checked = keys
            new = {}
            for k, v in row.items():  # _value, inlined for the plain numbers of most rows
                t = type(v)
                if t is float:
                    if v.is_integer() and _INT_LO <= v <= _INT_HI:
                        if not (v or _positive(v)):
                            raise _Reordered
                        v = int(v)
                    elif v - v != 0.0:  # not a number, or infinite
                        raise _Reordered
                elif t is int:
                    if not _INT_LO <= v <= _INT_HI:
                        v = float(v)
                elif t is dict or t is list:
                    v = _value(v)
                new[k] = v
            out.append(new)
    except _Reordered:
        return None
    return out


def _value(v: Any) -> Any:
    """One value as the engine gives it back (see :func:`_as_engine_gives`)."""
    if type(v) is float:
        if v.is_integer() and _INT_LO <= v <= _INT_HI:
            if not (v or _positive(v)):
                raise _Reordered
            return int(v)
        if v - v != 0.0:  # not a number, or infinite
            raise _Reordered
        return v
    if type(v) is int:
        return v if _INT_LO <= v <= _INT_HI else float(v)
    if isinstance(v, dict):
        if any(_index_like(k) for k in v):
            raise _Reordered
        return {k: _value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_value(x) for x in v]
    return v


def _positive(zero: float) -> bool:
    """Whether a zero is +0."""
    return math.copysign(1.0, zero) > 0


class _Reordered(Exception):
    """Rows the engine would not give back as :func:`_as_engine_gives` tells: an object whose
    keys it puts in another order, a -0, a NaN or an infinity."""


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
