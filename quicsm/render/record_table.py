"""The event records a plot page carries (a click on a mark shows its record) as a compact
table that gives each record's text back exactly: each text split into a template (the text
with every value that is not an object key replaced by a placeholder) and its values; the
records of one template store their values as columns, a column of integers as differences
from the row before. Records of one kind differ only in their values, so the columns gzip to
about two thirds of the texts' bytes. :data:`UNPACK_RECORDS_JS` rebuilds the texts in the page
(at the first click), :func:`unpack_records` in Python.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from quicsm.render.packed_data import pack_values, unpack_values

#: a JSON string (its escapes unrolled: no alternation per character) and a number
_STRING: Final[str] = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_NUMBER: Final[str] = r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
#: outside any string, an object key (a string a colon follows: group 1) or a value (a string
#: or a number: group 2); ``split`` hands back the text between them and both groups
_TOKEN: Final = re.compile(rf"({_STRING}\s*:)|({_STRING}|{_NUMBER})")
#: stands for a value in a template (never in JSON text: a control character)
HOLE: Final[str] = "\x00"
_INTEGER: Final = re.compile(r"-?(?:0|[1-9]\d*)")
_LIMIT: Final[int] = 2**53


def _split(text: str) -> tuple[str, list[str]]:
    """``text`` as its template (each value a :data:`HOLE`, keys kept) and its values, in one
    pass of the regular expression (no call back into Python per value)."""
    pieces = _TOKEN.split(text)  # text, key or None, value or None, text, ...
    between = pieces[0::3]
    holes = [HOLE if key is None else key for key in pieces[1::3]]
    template: list[str] = [""] * (len(between) + len(holes))
    template[0::2] = between
    template[1::2] = holes
    return "".join(template), [v for v in pieces[2::3] if v is not None]


def _column(values: list[str]) -> dict[str, Any]:
    if all(_INTEGER.fullmatch(v) and v != "-0" for v in values):
        ints = [int(v) for v in values]
        deltas = [ints[0]] + [b - a for a, b in zip(ints, ints[1:], strict=False)]
        if all(abs(i) < _LIMIT for i in ints + deltas):  # exact in the browser's numbers
            return {"z": deltas}
    return {"s": values}


def pack_records(numbers: Sequence[int], texts: Sequence[str]) -> dict[str, Any]:
    """Records ``numbers`` with texts ``texts`` as the table (see the module)."""
    templates: dict[str, int] = {}
    which: list[int] = []
    rows: list[list[list[str]]] = []
    for text in texts:
        template, values = _split(text)
        k = templates.setdefault(template, len(templates))
        if k == len(rows):
            rows.append([])
        rows[k].append(values)
        which.append(k)
    columns = [[_column([r[j] for r in group]) for j in range(len(group[0]))] for group in rows]
    return {
        "numbers": pack_values([{"n": n} for n in numbers]),
        "which": pack_values([{"k": k} for k in which]),
        "templates": list(templates),
        "columns": columns,
    }


def unpack_records(table: dict[str, Any]) -> dict[int, str]:
    """Record number -> its text, from :func:`pack_records`' table."""
    columns: list[list[list[str]]] = []
    for group in table["columns"]:
        out = []
        for c in group:
            if "s" in c:
                out.append(list(c["s"]))
                continue
            total, values = 0, []
            for d in c["z"]:
                total += d
                values.append(str(total))
            out.append(values)
        columns.append(out)
    seen = [0] * len(table["templates"])
    texts: dict[int, str] = {}
    numbers = [r["n"] for r in unpack_values(table["numbers"])]
    for n, row in zip(numbers, unpack_values(table["which"]), strict=True):
        k = row["k"]
        i = seen[k]
        seen[k] += 1
        parts = table["templates"][k].split(HOLE)
        values = [col[i] for col in columns[k]]
        texts[n] = "".join(p + v for p, v in zip(parts, [*values, ""], strict=True))
    return texts


#: the page's :func:`unpack_records`: ``unpackRecords(table)`` gives {number: text}
UNPACK_RECORDS_JS: Final[str] = r"""function unpackRecords(table) {
  var columns = table.columns.map(function (group) {
    return group.map(function (c) {
      if (c.s) return c.s;
      var total = 0;
      return c.z.map(function (d) { total += d; return String(total); });
    });
  });
  var seen = table.templates.map(function () { return 0; }), texts = {};
  var numbers = unpackValues(table.numbers), which = unpackValues(table.which);
  for (var j = 0; j < numbers.length; j++) {
    var k = which[j].k, i = seen[k]++, parts = table.templates[k].split('\u0000'), text = '';
    for (var p = 0; p < parts.length; p++)
      text += parts[p] + (p < columns[k].length ? columns[k][p][i] : '');
    texts[numbers[j].n] = text;
  }
  return texts;
}"""
