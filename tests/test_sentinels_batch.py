"""The batched normalisation of many short traces' metric rows gives, row for row, what the
per-trace one gives (quicsm.extract.sentinels: normalise_batch against normalise_part)."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.extract.sentinels import (
    INITIAL_RTT_MS,
    RTT_COLUMNS,
    SSTHRESH_UNSET_FROM,
    normalise_batch,
    normalise_part,
)

#: values that exercise every rule: zeros, the placeholder in ms and in seconds, real RTTs in
#: ms and in seconds, missing values, u64::MAX
_RTT = st.sampled_from([0.0, INITIAL_RTT_MS, INITIAL_RTT_MS / 1000, 12.5, 0.04, 40.0, np.nan])
_SSTHRESH = st.sampled_from([float(2**64 - 1), SSTHRESH_UNSET_FROM, 14720.0, np.nan])
_PACING = st.sampled_from([0.0, 1.5e6, np.nan])


def _trace(draw: st.DrawFn) -> dict[str, list[float]]:
    n = draw(st.integers(1, 8))
    row = {c: draw(st.lists(_RTT, min_size=n, max_size=n)) for c in RTT_COLUMNS}
    row["ssthresh_bytes"] = draw(st.lists(_SSTHRESH, min_size=n, max_size=n))
    row["pacing_rate_bps"] = draw(st.lists(_PACING, min_size=n, max_size=n))
    return row


traces_strategy = st.lists(st.composite(_trace)(), min_size=1, max_size=6)


def _series(values: list[float], name: str) -> pl.Series:
    return pl.Series(name, values, dtype=pl.Float64).fill_nan(None)


@settings(max_examples=300, deadline=None)
@given(traces_strategy)
def test_the_batch_equals_each_trace_on_its_own(traces: list[dict[str, list[float]]]) -> None:
    expected: dict[str, list[float | None]] = {}
    for trace in traces:
        columns = {name: _series(v, name) for name, v in trace.items()}
        normalise_part(columns, {})
        for name, series in columns.items():
            expected.setdefault(name, []).extend(series.to_list())
    owner = pl.Series([i for i, t in enumerate(traces) for _ in t["ssthresh_bytes"]])
    batch = {name: _series([v for t in traces for v in t[name]], name) for name in traces[0]}
    normalise_batch(batch, owner)
    for name, values in expected.items():
        assert batch[name].to_list() == values, name
