"""The library warns of a skipped record once per call, however many of the call's reads skip
it: :func:`~quicsm.compare.load.compare_paths`, :func:`~quicsm.compare.load.compare_by_label`
and :func:`~quicsm.compare.load.read_labelled` give one :class:`QuicsmWarning` holding the
union of their reads (what their ``diagnostics`` count), not one per read. On a real quic-go
trace (:mod:`test_skipped_once`); :meth:`Diagnostics.covers` as a property."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_skipped_once import _READ, BAD_LOSS, BAD_PACKET, _broken, _diagnostics

from quicsm.compare.load import compare_by_label, compare_paths, read_labelled
from quicsm.core.diagnostics import Diagnostics, QuicsmWarning, warned_once
from quicsm.engine.task import merge_diagnostics


def _caught(call, *args, **kwargs):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(*args, **kwargs)
    return [w.message for w in caught]


def _skip_warnings(caught: list[Warning | str]) -> list[QuicsmWarning]:
    return [w for w in caught if isinstance(w, QuicsmWarning) and "skipped" in str(w)]


def _times(caught: list[Warning | str], path: Path, record: int) -> int:
    return sum(f"{path}: record {record} (line {record})" in str(w) for w in caught)


def test_compare_paths_warns_of_each_record_once(tmp_path: Path) -> None:
    """Derived states: the states' read and the account's packet read both skip the loss
    record (100); the account's alone the packet record (101). One warning for the call names
    each record of each file once (before: the loss record in two warnings)."""
    a = _broken(tmp_path, BAD_LOSS, BAD_PACKET)
    b = tmp_path / "b.sqlog"
    b.write_bytes(a.read_bytes())
    diag = Diagnostics()
    caught = _caught(
        compare_paths, [str(a)], [str(b)], on_error="skip", states="derived", diagnostics=diag
    )
    (warning,) = _skip_warnings(caught)
    assert diag.skipped_records == 4
    assert warning.diagnostics is not None
    assert warning.diagnostics.skipped_records == 4
    for path in (a, b):
        for record in (100, 101):
            assert _times(caught, path, record) == 1, (path, record, caught)


def test_compare_by_label_warns_of_each_record_once(tmp_path: Path) -> None:
    a = _broken(tmp_path, BAD_LOSS, BAD_PACKET)
    caught = _caught(compare_by_label, [str(a)], "vantage", on_error="skip", states="derived")
    assert len(_skip_warnings(caught)) == 1
    assert _times(caught, a, 100) == _times(caught, a, 101) == 1, caught


def test_read_labelled_warns_of_each_record_once(tmp_path: Path) -> None:
    """The states' and the metrics' reads both skip the loss record."""
    a = _broken(tmp_path, BAD_LOSS)
    diag = Diagnostics()
    caught = _caught(
        read_labelled, [str(a)], on_error="skip", metrics=True, states="derived", diagnostics=diag
    )
    assert diag.skipped_records == 1
    (warning,) = _skip_warnings(caught)
    assert _times(caught, a, 100) == 1, caught


def test_two_calls_warn_each_of_its_own(tmp_path: Path) -> None:
    """A caller's diagnostics gather both calls; each call warns of what it skipped, not of
    what an earlier call did."""
    a = _broken(tmp_path, BAD_LOSS)
    diag = Diagnostics()
    first = _caught(read_labelled, [str(a)], on_error="skip", states="derived", diagnostics=diag)
    (tmp_path / "clean").mkdir()
    clean = _broken(tmp_path / "clean")
    second = _caught(
        read_labelled, [str(clean)], on_error="skip", states="derived", diagnostics=diag
    )
    assert len(_skip_warnings(first)) == 1 and _skip_warnings(second) == []
    assert diag.skipped_records == 1


def test_other_warnings_pass_through_and_survive_an_error() -> None:
    union = Diagnostics()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with warned_once(union):
            warnings.warn("something else", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["something else"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError), warned_once(union):
            part = _diagnostics("a.sqlog", {1}, 0)
            union.absorb(part)
            part.warn()
            raise ValueError("stop")
    # raised: nothing is summarised, the read's own warning is given as it was
    assert [w.message.diagnostics for w in caught] == [part]  # type: ignore[union-attr]


@given(st.lists(_READ, min_size=1, max_size=6), st.data())
def test_the_union_covers_each_read_and_nothing_more(
    reads: list[tuple[str, set[int | str], int]], data: st.DataObject
) -> None:
    parts = [_diagnostics(*r) for r in reads]
    union = merge_diagnostics(parts)
    assert all(union.covers(p) for p in parts)
    # a read with a record the union does not hold is not covered
    file = data.draw(st.sampled_from(["a.sqlog", "b.sqlog", "c.sqlog"]))
    known = union.skipped_at.get(file, set())
    fresh = data.draw(st.integers(0, 10**6).filter(lambda k: k not in known))
    assert not union.covers(_diagnostics(file, {fresh}, 0))
    # nor one with more unnamed records than the union counts
    assert not union.covers(_diagnostics(file, set(), union.unnamed_records() + 1))
