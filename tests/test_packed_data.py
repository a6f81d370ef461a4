"""The page's packed datasets (quicsm.render.packed_data) give back exactly the rows packed,
and they are smaller; the browser tests draw pages made of them."""

from __future__ import annotations

import gzip
import json

from hypothesis import given
from hypothesis import strategies as st

from quicsm.render.packed_data import PACKED, pack_values, unpack_values

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
