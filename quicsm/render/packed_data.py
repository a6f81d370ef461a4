"""The rows of an interactive page's datasets as compact columns: numbers scaled to integers
and stored as differences from the row before, strings as indices into their distinct values.
The same rows gzip to about half the bytes of the row objects; the page's script turns them
back into row objects before Vega parses the specification (:data:`UNPACK_JS`), and
:func:`unpack_values` does the same in Python (tests read pages with it).

Two columns the page can compute are not stored: a step line's ``u`` (the time its row holds
until: the next row's ``t`` in the same zoom level ``lv``, the last row's a constant) and a
band's ``ms`` (``end - start`` to the µs, as :func:`js_ms` computes it), each only where every
row agrees.

A dataset is packed only when every row has the same fields and each field is all numbers
(exactly representable with at most three decimals, within 2**53 once scaled) or all strings;
any other dataset keeps its rows as they are, so unpacking always gives the rows back.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np

#: marks a packed dataset (a ``values`` member that is an object, not a list)
PACKED: Final[str] = "quicsm-columns"
_LIMIT: Final[int] = 2**53


def _numbers(column: list[Any]) -> dict[str, Any] | None:
    """A column of numbers as scaled integer differences (``d`` decimals, ``z`` deltas), or
    None when it is not all numbers or needs more than three decimals or 2**53 once scaled.
    Computed with numpy in one pass per scale: the same comparisons as rounding each number
    with Python's ``round`` (both round half to even on the same float products), the same
    integers out (tests/test_packed_data.py checks it against the number-by-number reading)."""
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in column):
        return None
    if not column:
        return None
    if any(isinstance(v, int) and abs(v) >= _LIMIT for v in column):
        return None  # not exactly a float: no scale keeps it under the limit
    values = np.asarray(column, dtype=np.float64)
    for digits in range(4):
        scale = 10**digits
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = values * scale
            if not np.isfinite(scaled).all():
                return None
            ints = np.rint(scaled)
            if (np.abs(ints) >= _LIMIT).any():
                continue
            back = ints / scale if digits else ints
        if not (back == values).all():
            continue
        whole = ints.astype(np.int64)
        deltas = np.diff(whole, prepend=np.int64(0)).tolist()
        out: dict[str, Any] = {"d": digits, "z": deltas}
        if all(isinstance(v, int) for v in column):
            out["int"] = 1
        return out
    return None


def js_ms(start: float, end: float) -> float:
    """``end - start`` rounded to the µs as the page's script rounds it
    (``Math.round(x * 1000) / 1000``)."""
    return math.floor((end - start) * 1000 + 0.5) / 1000


def _derived(key: str, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """How the page computes column ``key`` of ``rows`` (see the module), or None."""
    keys = rows[0].keys()
    if key == "u" and {"t", "lv"} <= keys:
        last: dict[Any, int] = {}
        for i, r in enumerate(rows):
            j = last.get(r["lv"])
            if j is not None and rows[j]["u"] != r["t"]:
                return None
            last[r["lv"]] = i
        ends = {rows[j]["u"] for j in last.values()}
        if len(ends) == 1:
            return {"next": "t", "by": "lv", "last": ends.pop()}
    if (
        key == "ms"
        and {"start", "end"} <= keys
        and all(r["ms"] == js_ms(r["start"], r["end"]) for r in rows)
    ):
        return {"diff": ["end", "start"]}
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
        packed = _derived(key, rows) or _numbers(column)
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
    keys = values["keys"]
    for c in values["cols"]:
        if "next" in c or "diff" in c:
            cols.append([])  # computed below, from the other columns
            continue
        if "s" in c:
            cols.append([c["s"][i] for i in c["i"]])
            continue
        total, out = 0, []
        scale = 10 ** c["d"]
        for d in c["z"]:
            total += d
            out.append(total if c.get("int") else (total / scale if c["d"] else float(total)))
        cols.append(out)
    for k, c in enumerate(values["cols"]):
        if "diff" in c:
            a, b = (cols[keys.index(name)] for name in c["diff"])
            cols[k] = [js_ms(y, x) for x, y in zip(a, b, strict=True)]
        elif "next" in c:
            times, levels = cols[keys.index(c["next"])], cols[keys.index(c["by"])]
            until: list[Any] = [c["last"]] * len(times)
            after: dict[Any, int] = {}
            for i in range(len(times) - 1, -1, -1):
                if levels[i] in after:
                    until[i] = times[after[levels[i]]]
                after[levels[i]] = i
            cols[k] = until
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
    if (c.next || c.diff) return null;  // computed below, from the other columns
    if (c.s) return c.i.map(function (i) { return c.s[i]; });
    var total = 0, scale = Math.pow(10, c.d);
    return c.z.map(function (d) { total += d; return c.d ? total / scale : total; });
  });
  v.cols.forEach(function (c, k) {
    if (c.diff) {
      var a = cols[v.keys.indexOf(c.diff[0])], b = cols[v.keys.indexOf(c.diff[1])];
      cols[k] = a.map(function (x, i) { return Math.round((x - b[i]) * 1000) / 1000; });
    } else if (c.next) {
      var t = cols[v.keys.indexOf(c.next)], lv = cols[v.keys.indexOf(c.by)], after = {};
      var out = new Array(v.n);
      for (var i = v.n - 1; i >= 0; i--) {
        out[i] = after[lv[i]] === undefined ? c.last : t[after[lv[i]]];
        after[lv[i]] = i;
      }
      cols[k] = out;
    }
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


# -- bytes as page text -----------------------------------------------------------------------

#: the 85 characters packed bytes are written with: printable ASCII less the quotes, ``&``,
#: ``<``, ``>`` and the backslash, so the text never ends or escapes the element it is in
ALPHABET: Final[str] = "".join(c for c in map(chr, range(33, 127)) if c not in "\"&'<>\\")[:85]


def bytes_to_text(data: bytes) -> str:
    """``data`` as text: its length, ``:``, then five characters of :data:`ALPHABET` per four
    bytes (big-endian, the last group padded with zeros): 1.25 characters a byte, where
    base64 takes 1.33."""
    import numpy as np

    padded = data + b"\0" * (-len(data) % 4)
    words = np.frombuffer(padded, dtype=">u4").astype(np.uint64)
    digits = np.empty((len(words), 5), dtype=np.uint8)
    for k in range(4, -1, -1):
        digits[:, k] = words % 85
        words //= 85
    table = np.frombuffer(ALPHABET.encode(), dtype=np.uint8)
    return f"{len(data)}:" + table[digits.ravel()].tobytes().decode()


def text_to_bytes(text: str) -> bytes:
    """:func:`bytes_to_text` undone."""
    import numpy as np

    size, _, body = text.strip().partition(":")
    lookup = np.zeros(128, dtype=np.uint64)
    lookup[np.frombuffer(ALPHABET.encode(), dtype=np.uint8)] = np.arange(85, dtype=np.uint64)
    digits = lookup[np.frombuffer(body.encode(), dtype=np.uint8)].reshape(-1, 5)
    words = np.zeros(len(digits), dtype=np.uint64)
    for k in range(5):
        words = words * 85 + digits[:, k]
    return words.astype(">u4").tobytes()[: int(size)]


#: the page's :func:`text_to_bytes`: ``textToBytes(text)`` gives a Uint8Array
TEXT_TO_BYTES_JS: Final[str] = (
    "function textToBytes(text) {\n  var ALPHABET = '"
    + ALPHABET
    + "';\n"
    + r"""  text = text.trim();
  var colon = text.indexOf(':'), size = Number(text.slice(0, colon)), value = new Uint8Array(128);
  for (var a = 0; a < 85; a++) value[ALPHABET.charCodeAt(a)] = a;
  var n = (text.length - colon - 1) / 5, out = new Uint8Array(n * 4), at = colon + 1;
  for (var i = 0; i < n; i++, at += 5) {
    var w = value[text.charCodeAt(at)];
    for (var k = 1; k < 5; k++) w = w * 85 + value[text.charCodeAt(at + k)];
    out[4 * i] = w >>> 24; out[4 * i + 1] = (w >>> 16) & 255;
    out[4 * i + 2] = (w >>> 8) & 255; out[4 * i + 3] = w & 255;
  }
  return out.subarray(0, size);
}"""
)
