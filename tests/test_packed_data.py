"""The page's packed datasets (quicsm.render.packed_data) give back exactly the rows packed,
and they are smaller; the browser tests draw pages made of them."""

from __future__ import annotations

import gzip
import json
import re

from hypothesis import example, given
from hypothesis import strategies as st

from quicsm.render.packed_data import (
    ALPHABET,
    PACKED,
    bytes_to_text,
    js_ms,
    pack_values,
    text_to_bytes,
    unpack_values,
)
from quicsm.render.record_table import HOLE, _split, pack_records, unpack_records

_NUMBER = st.one_of(
    st.integers(-(2**60), 2**60),
    st.floats(-1e12, 1e12, allow_nan=False).map(lambda x: round(x, 3)),
    st.floats(allow_nan=False, allow_infinity=False),
)


@given(st.lists(st.tuples(_NUMBER, st.sampled_from(["a", "b", "SlowStart"]), st.integers(-1, 9)),
                max_size=40))  # fmt: skip
def test_unpacking_gives_back_the_rows(rows: list[tuple[float, str, int]]) -> None:
    values = [{"t": t, "state": s, "lv": lv} for t, s, lv in rows]
    packed = pack_values(values)
    back = unpack_values(packed)
    assert back == values
    assert [list(r) for r in back] == [list(r) for r in values]  # the same fields, in order
    # (a column of ints and floats may come back as floats: one number type in the browser)


@given(st.lists(st.dictionaries(st.sampled_from("abc"), st.integers(0, 3)), max_size=20))
def test_rows_of_different_fields_stay_as_they_are(rows: list[dict[str, int]]) -> None:
    packed = pack_values(rows)
    if len({tuple(r) for r in rows}) > 1:
        assert packed == rows
    assert unpack_values(packed) == rows


def test_a_series_packs_smaller() -> None:
    rows = [{"t": round(0.137 * i, 3), "v": 1200 + 3 * i, "lv": i % 2} for i in range(3000)]
    packed = pack_values(rows)
    assert isinstance(packed, dict) and packed[PACKED] == 1

    def size(x: object) -> int:
        return len(gzip.compress(json.dumps(x, separators=(",", ":")).encode(), 9))

    assert size(packed) < size(rows) / 2


@given(st.binary(max_size=300))
def test_bytes_as_text_come_back(data: bytes) -> None:
    text = bytes_to_text(data)
    assert text_to_bytes(text) == data
    body = text.partition(":")[2]
    assert set(body) <= set(ALPHABET) and len(body) == 5 * ((len(data) + 3) // 4)
    assert not set(body) & set("<>&\"'\\")  # never ends or escapes the element it is in


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                               max_size=3),
    max_leaves=8,
)  # fmt: skip


@given(st.lists(_JSON, max_size=12), st.booleans())
def test_records_come_back_as_their_texts(events: list[object], indent: bool) -> None:
    """Whatever JSON a record holds (compact or indented, numbers of any size): its exact
    text comes back."""
    import orjson

    option = orjson.OPT_INDENT_2 if indent else 0
    texts = [orjson.dumps({"time": i, "data": e}, option=option).decode()
             for i, e in enumerate(events)]  # fmt: skip
    numbers = [3 * i + 7 for i in range(len(texts))]
    table = json.loads(json.dumps(pack_records(numbers, texts)))
    assert unpack_records(table) == dict(zip(numbers, texts, strict=True))


def _split_by_hand(text: str) -> tuple[str, list[str]]:
    """The record table's split read match by match: a string followed by a colon is a key and
    stays in the template; any other string or number is a value, a hole in the template."""
    token = re.compile(r'("(?:[^"\\]|\\.)*")(\s*:)?|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?')
    values: list[str] = []

    def hole(m: re.Match[str]) -> str:
        if m.group(2) is not None:
            return m.group(0)
        values.append(m.group(0))
        return HOLE

    return token.sub(hole, text), values


_JSON_TEXT = st.one_of(
    _JSON.map(lambda e: json.dumps({"data": e}, indent=None)),
    _JSON.map(lambda e: json.dumps({"data": e}, indent=1, ensure_ascii=False)),
    st.text(alphabet='"\\:{}[], -.e0123456789abn\n\t', max_size=40),  # not JSON at all
)


@given(_JSON_TEXT, st.integers(0, 60))
@example('{"a" : 1, "b"\n:"c", "d": [2, "e"]}', 60)  # space before a key's colon
@example('{"a\\"b": "c\\\\", "d": -1.5e3, "f": "12 34 \\u0041"}', 30)  # escapes; cut inside
@example('"1"2":"3\\', 4)  # not JSON: strings and numbers run together, a lone backslash
def test_the_split_is_the_match_by_match_reading(text: str, cut: int) -> None:
    """Each record's template and values, as one pass of the expression gives them, are those
    of reading it match by match; also cut short (a long record is shown cut, maybe inside a
    string) and on text that is not JSON."""
    for part in (text, text[:cut] + " …"):
        assert _split(part) == _split_by_hand(part)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10**6)), min_size=8, max_size=40))
def test_columns_the_page_computes_come_back(rows: list[tuple[int, int]]) -> None:
    """A step line's ``u`` (the next row's time in its level) and a band's ``ms`` are not
    stored but computed, and come back the same."""
    rows = sorted(rows)
    times = [t / 1000 for _, t in rows]
    levels = [lv for lv, _ in rows]
    end = (max(t for _, t in rows) + 1000) / 1000  # three decimals, as every other time
    u = [next((times[j] for j in range(i + 1, len(rows)) if levels[j] == levels[i]), end)
         for i in range(len(rows))]  # fmt: skip
    step = [{"t": t, "v": 1, "u": x, "lv": lv} for t, x, lv in zip(times, u, levels, strict=True)]
    packed = pack_values(step)
    assert "next" in packed["cols"][2] and unpack_values(packed) == step
    bands = [{"start": t, "end": x, "ms": js_ms(t, x), "lv": lv}
             for t, x, lv in zip(times, u, levels, strict=True)]  # fmt: skip
    packed = pack_values(bands)
    assert "diff" in packed["cols"][2] and unpack_values(packed) == bands


def _numbers_one_by_one(column: list[float]) -> dict[str, object] | None:
    """The number-by-number reading the packing's numpy pass must agree with."""
    import math

    if not column or not all(isinstance(v, int | float) and not isinstance(v, bool)
                             for v in column):  # fmt: skip
        return None
    for digits in range(4):
        scale = 10**digits
        ints = []
        for v in column:
            if not math.isfinite(v * scale):
                return None
            k = round(v * scale)
            if abs(k) >= 2**53 or (k / scale if digits else float(k)) != v:
                break
            ints.append(k)
        else:
            out: dict[str, object] = {
                "d": digits,
                "z": [ints[0]] + [b - a for a, b in zip(ints, ints[1:], strict=False)],
            }
            if all(isinstance(v, int) for v in column):
                out["int"] = 1
            return out
    return None


_EDGE = st.sampled_from([0.0, -0.0, 0.5, 1.5, 2.5, 0.0005, 0.0015, 1e-3, 9007199254740.991,
                         2.0**53, 2**53 - 1, -(2**53) + 1, 1e308, 1e300, 5e-324])  # fmt: skip


@given(st.lists(st.one_of(_NUMBER, _EDGE), min_size=1, max_size=30))
def test_numbers_are_packed_as_one_by_one(column: list[float]) -> None:
    from quicsm.render.packed_data import _numbers

    ours = _numbers(column)
    assert ours == _numbers_one_by_one(column)
    if ours is not None:
        assert all(type(x) is int for x in ours["z"])  # plain ints in the page's JSON
