"""The evidence of one explanation after another reads each group's indicators once
(:func:`quicsm.compare.evidence.group_indicators`): the values, the traces that log none and
the provenance are the ones each call made alone gives, whichever traces it asks for."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.compare.evidence import Provenance, group_indicators, indicators
from quicsm.compare.grouping import Comparison
from quicsm.compare.load import compare_paths

REAL = Path(__file__).parent.parent / "traces"


@pytest.fixture(scope="module")
def comp() -> Comparison:
    return compare_paths(
        [str(REAL / "quic-go-v0.48.2.qlog")],
        [str(REAL / "quic-go-v0.65.0.qlog")],
        where={"scenario": "jitter"},
    )


@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_indicators_from_shared_pieces_are_each_calls_own(
    comp: Comparison, data: st.DataObject
) -> None:
    for group in (comp.a, comp.b):
        every = [(str(f), str(t)) for f, t in group.traces.select("file", "trace").iter_rows()]
        keys = data.draw(st.lists(st.sampled_from(every), max_size=len(every)))
        alone: dict[str, Provenance] = {}
        shared: dict[str, Provenance] = {}
        want, want_none = indicators(group, keys, alone)
        got, got_none = indicators(group, keys, shared, pieces=group_indicators(group))
        assert list(got) == list(want) and got_none == want_none and shared == alone
        for name, (unit, values) in want.items():
            assert got[name][0] == unit
            assert np.array_equal(got[name][1], values, equal_nan=True), name
