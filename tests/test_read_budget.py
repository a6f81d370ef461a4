"""The per-record work budget (:mod:`quicsm.qlog.budget`): a record of more than
``MAX_RECORD_VALUES`` values is a record problem, natively and in Python, in bounded memory."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.core import native
from quicsm.core.diagnostics import Diagnostics
from quicsm.core.errors import QlogError
from quicsm.extract.read import read_metrics, read_transitions
from quicsm.qlog import budget
from quicsm.testing import hostile


def _reference(data: bytes) -> int:
    """``{``, ``[`` and ``,`` outside strings, one byte at a time."""
    count, in_string, escaped = 0, False, False
    for c in data:
        if in_string:
            if escaped:
                escaped = False
            elif c == 0x5C:
                escaped = True
            elif c == 0x22:
                in_string = False
        elif c == 0x22:
            in_string = True
        elif c in b"{[,":
            count += 1
    return count


_json = st.recursive(
    st.none() | st.integers(-(2**63), 2**63 - 1) | st.text(alphabet='{[,"\\]}a\n'),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet='{[,"\\a', max_size=3), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json, st.integers(1, 8))
def test_the_count_outside_strings_is_exact_whatever_the_slices(
    value: object, slice_bytes: int
) -> None:
    """On JSON texts (strings with quotes, backslashes and brackets), cut into slices of any
    size: the count is the one of a byte-at-a-time tokenizer."""
    data = orjson.dumps(value)
    original = budget._SLICE
    budget._SLICE = slice_bytes
    try:
        assert budget._count_outside_strings(data) == _reference(data)
    finally:
        budget._SLICE = original


def test_separators_inside_strings_do_not_count() -> None:
    text = orjson.dumps({"s": "," * (budget.MAX_RECORD_VALUES + 10)})
    assert budget.over_budget(text) is None
    wide = b"[" + b"{}," * budget.MAX_RECORD_VALUES + b"{}]"
    assert budget.over_budget(wide) == 2 * budget.MAX_RECORD_VALUES + 2


@pytest.mark.parametrize("flag", ["1", "0"], ids=["native", "python"])
def test_a_record_of_millions_of_values_is_a_record_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: str
) -> None:
    assert native.installed(), "the native core is built with the package"
    monkeypatch.setenv(native.NATIVE_ENV, flag)
    path = hostile.wide_record(tmp_path / "w.sqlog", budget.MAX_RECORD_VALUES + 1)
    message = r"w\.sqlog.*expected a record of at most 1,048,576 JSON values, got 2,097,159"
    for reader in (read_transitions, read_metrics):
        with pytest.raises(QlogError, match=message):
            reader(path)
    diag = Diagnostics()
    with pytest.warns(UserWarning):
        assert read_metrics(path, on_error="skip", diagnostics=diag).is_empty()
    assert diag.skipped_records == 1


def test_a_wide_member_of_contained_json_is_our_error(tmp_path: Path) -> None:
    path = hostile.contained_member(tmp_path / "c.qlog", 8 * (budget.MAX_RECORD_VALUES + 8))
    with pytest.raises(QlogError, match=r"c\.qlog.*at most 1,048,576 JSON values"):
        read_transitions(path)
