"""The rows of an interactive page's datasets as compact columns: numbers scaled to integers
and stored as differences from the row before, strings as indices into their distinct values.
The same rows gzip to about half the bytes of the row objects; the page's script turns them
back into row objects before Vega parses the specification (:data:`UNPACK_JS`), and
:func:`unpack_values` does the same in Python (tests read pages with it).

A dataset is packed only when every row has the same fields and each field is all numbers
(exactly representable with at most three decimals, within 2**53 once scaled) or all strings;
any other dataset keeps its rows as they are, so unpacking always gives the rows back.
"""

from __future__ import annotations

from typing import Any, Final

#: marks a packed dataset (a ``values`` member that is an object, not a list)
PACKED: Final[str] = "quicsm-columns"
_LIMIT: Final[int] = 2**53


def _numbers(column: list[Any]) -> dict[str, Any] | None:
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in column):
        return None
    for digits in range(4):
        scale = 10**digits
        ints = []
        for v in column:
            k = round(v * scale)
            if abs(k) >= _LIMIT or (k / scale if digits else float(k)) != v:
                break
            ints.append(k)
        else:
            deltas = [ints[0]] + [b - a for a, b in zip(ints, ints[1:], strict=False)]
            out: dict[str, Any] = {"d": digits, "z": deltas}
            if all(isinstance(v, int) for v in column):
                out["int"] = 1
            return out
    return None


def pack_values(rows: list[Any]) -> Any:
    """``rows`` packed as columns, or ``rows`` unchanged when they cannot be (see module)."""
    if len(rows) < 8 or not all(isinstance(r, dict) for r in rows):
        return rows
    keys = list(rows[0])
    if any(list(r) != keys for r in rows):
        return rows
    columns: list[dict[str, Any]] = []
    for key in keys:
        column = [r[key] for r in rows]
        packed = _numbers(column)
        if packed is None and all(isinstance(v, str) for v in column):
            distinct = list(dict.fromkeys(column))
            where = {s: i for i, s in enumerate(distinct)}
            packed = {"s": distinct, "i": [where[v] for v in column]}
        if packed is None:
            return rows
        columns.append(packed)
    return {PACKED: 1, "n": len(rows), "keys": keys, "cols": columns}


def unpack_values(values: Any) -> Any:
    """The rows of a dataset packed by :func:`pack_values` (anything else unchanged)."""
    if not isinstance(values, dict) or PACKED not in values:
        return values
    cols: list[list[Any]] = []
    for c in values["cols"]:
        if "s" in c:
            cols.append([c["s"][i] for i in c["i"]])
            continue
        total, out = 0, []
        for d in c["z"]:
            total += d
            scale = 10 ** c["d"]
            out.append(total if c.get("int") else (total / scale if c["d"] else float(total)))
        cols.append(out)
    keys = values["keys"]
    return [dict(zip(keys, row, strict=True)) for row in zip(*cols, strict=True)]


def pack_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A Vega specification with each inline dataset's rows packed."""
    data = spec.get("data")
    if not isinstance(data, list):
        return spec
    out = []
    for d in data:
        if isinstance(d, dict) and isinstance(d.get("values"), list):
            d = {**d, "values": pack_values(d["values"])}
        out.append(d)
    return {**spec, "data": out}


def unpack_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """:func:`pack_spec` undone."""
    data = spec.get("data")
    if not isinstance(data, list):
        return spec
    return {**spec, "data": [{**d, "values": unpack_values(d["values"])} if isinstance(d, dict)
                             and "values" in d else d for d in data]}  # fmt: skip


#: the page's unpacking, as :func:`unpack_values` does it (``unpackSpec(spec)`` in place)
UNPACK_JS: Final[str] = r"""function unpackValues(v) {
  if (!v || Array.isArray(v) || !v['quicsm-columns']) return v;
  var cols = v.cols.map(function (c) {
    if (c.s) return c.i.map(function (i) { return c.s[i]; });
    var total = 0, scale = Math.pow(10, c.d);
    return c.z.map(function (d) { total += d; return c.d ? total / scale : total; });
  });
  var rows = new Array(v.n);
  for (var r = 0; r < v.n; r++) {
    var row = {};
    for (var k = 0; k < v.keys.length; k++) row[v.keys[k]] = cols[k][r];
    rows[r] = row;
  }
  return rows;
}
function unpackSpec(spec) {
  (spec.data || []).forEach(function (d) { if (d.values) d.values = unpackValues(d.values); });
  return spec;
}"""
