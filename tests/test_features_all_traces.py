"""identify's features of every trace at once
(:func:`quicsm.controllers.batch_features.compute_features`) are the per-trace path's
(:func:`quicsm.controllers.features.compute_features_per_trace`) to the last bit: on the shipped
traces, on every identification corpus, and on generated traces built to reach the edges (no
reduction, one sample, cuts undone, ties in time, windows and RTTs not logged, RTTs in
seconds, losses only as entries into Recovery, BBR phases, times out of order)."""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quicsm.controllers.batch_features import compute_features
from quicsm.controllers.features import FEATURES_SCHEMA, compute_features_per_trace
from quicsm.controllers.segments import medians, run_medians, segment_sums
from quicsm.extract.read import read_metrics, read_transitions

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted((ROOT / "traces").glob("*.qlog")) + sorted(
    (ROOT / "traces" / "stacks").glob("*.qlog")
)
CORPORA = sorted((ROOT / "benchmarks" / "corpora").glob("*.qlog"))


def _bits(value: Any) -> Any:
    """A value as compared: a float by its 64 bits (so -0.0 is not 0.0 and NaN is NaN)."""
    return struct.pack("<d", value) if isinstance(value, float) else value


def assert_same_features(got: pl.DataFrame, want: pl.DataFrame) -> None:
    assert got.columns == want.columns == list(FEATURES_SCHEMA)
    assert got.height == want.height
    for g, w in zip(got.iter_rows(named=True), want.iter_rows(named=True), strict=True):
        for name in FEATURES_SCHEMA:
            assert type(g[name]) is type(w[name]), (g["trace"], name, g[name], w[name])
            assert _bits(g[name]) == _bits(w[name]), (g["trace"], name, g[name], w[name])


def _check_file(path: Path) -> int:
    metrics, transitions = read_metrics(path), read_transitions(path)
    got = compute_features(metrics, transitions)
    assert_same_features(got, compute_features_per_trace(metrics, transitions))
    return got.height


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_traces_have_the_per_trace_features(path: Path) -> None:
    assert _check_file(path) > 0


@pytest.mark.slow
@pytest.mark.parametrize("path", CORPORA, ids=lambda p: p.name)
def test_identify_corpora_have_the_per_trace_features(path: Path) -> None:
    assert _check_file(path) > 0


def test_the_corpora_reach_what_the_fits_read() -> None:
    """The shipped traces exercise the paths that fit and score: epochs, cut fits, cuts undone
    and growth below the maximum (else the comparisons above would not test them; rounds of
    wall-clock time are reached by the corpora and the generated traces)."""
    files = [str(p) for p in SHIPPED]
    features = compute_features(read_metrics(files), read_transitions(files))
    assert features["n_epochs"].sum() > 0 and features["n_cut_fits"].sum() > 0
    assert features["n_undone"].sum() > 0 and features["growth_below_max"].is_not_null().any()
    assert (features["round_basis"] == "acked").any()  # rounds of time: generated traces


# ---- generated traces --------------------------------------------------------------------------

METRICS_SCHEMA = {
    "trace": pl.Categorical(),
    "vantage": pl.String(),
    "time_ms": pl.Float64(),
    "event": pl.Enum(["metrics", "packet_lost", "pto", "spurious_loss"]),
    "cwnd_bytes": pl.Float64(),
    "bytes_in_flight": pl.Float64(),
    "smoothed_rtt_ms": pl.Float64(),
}
STATES = ["SlowStart", "CongestionAvoidance", "Recovery", "ApplicationLimited", "ProbeRTT",
          "Startup", "ProbeBW"]  # fmt: skip
TRANSITIONS_SCHEMA = {
    "trace": pl.Categorical(),
    "vantage": pl.String(),
    "time_ms": pl.Float64(),
    "state": pl.String(),
    "raw_state": pl.String(),
    "source": pl.String(),
    "end_ms": pl.Float64(),
}


@st.composite
def traces(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Some traces' metrics and transitions: windows that grow by whole segments or by bits,
    are cut by 0.5, 0.7 or to a collapse after losses and are sometimes restored (an undo);
    flights that rise on sends and fall on acknowledgements; times with ties; any column
    sometimes not logged; a trace now and then with its rows out of time order."""
    metric_rows: list[dict[str, Any]] = []
    transition_rows: list[dict[str, Any]] = []
    for k in range(draw(st.integers(1, 4))):
        trace = f"t{k}"
        n = draw(st.sampled_from([0, 1, 2, 5, 30, 80]))
        rtt_ms = draw(st.sampled_from([None, 0.0, 1.0, 20.0, 60.0]))
        in_seconds = draw(st.booleans())
        time, window, flight, before_cut = 0.0, 12_000.0, 0.0, None
        for i in range(n):
            time += draw(st.sampled_from([0.0, 0.0, 0.5, 3.0, 11.0, 40.0]))
            event = draw(st.sampled_from(["metrics"] * 6 + ["packet_lost", "pto", "spurious_loss"]))
            action = draw(
                st.sampled_from(["grow", "grow", "bit", "cut", "cut7", "collapse", "undo", "same"])
            )
            if action == "grow":
                window += 1250.0
            elif action == "bit":
                window += draw(st.floats(1.0, 900.0))
            elif action in ("cut", "cut7", "collapse"):
                before_cut = window
                window = window * {"cut": 0.5, "cut7": 0.7, "collapse": 0.2}[action]
            elif action == "undo" and before_cut is not None:
                window, before_cut = before_cut, None
            flight = max(0.0, flight + draw(st.sampled_from([-3000.0, -1250.0, 1250.0, 2500.0])))
            rtt: float | None = rtt_ms
            if in_seconds and rtt is not None:
                rtt = 0.333 if i == 0 else rtt / 1000.0
            metric_rows.append(
                {
                    "trace": trace,
                    "vantage": "server",
                    "time_ms": time,
                    "event": event,
                    "cwnd_bytes": None if draw(st.integers(0, 9)) == 0 else window,
                    "bytes_in_flight": None if draw(st.integers(0, 9)) == 0 else flight,
                    "smoothed_rtt_ms": None if draw(st.integers(0, 4)) == 0 else rtt,
                }
            )
        if n > 2 and draw(st.integers(0, 9)) == 0:  # a trace out of time order
            own = metric_rows[-n:]
            own[0], own[-1] = own[-1], own[0]
        m = draw(st.integers(1, 8))
        times = sorted(draw(st.lists(st.floats(0.0, max(time, 1.0)), min_size=m, max_size=m)))
        for t in times:
            transition_rows.append(
                {
                    "trace": trace,
                    "vantage": "server",
                    "time_ms": t,
                    "state": draw(st.sampled_from(STATES)),
                    "raw_state": draw(
                        st.sampled_from([None, "congestion_avoidance", "ProbeBW_UP"])
                    ),
                    "source": draw(st.sampled_from(["explicit", "derived"])),
                    "end_ms": time + 1.0,
                }
            )
    metrics = pl.DataFrame(metric_rows, schema=METRICS_SCHEMA, orient="row")
    transitions = pl.DataFrame(transition_rows, schema=TRANSITIONS_SCHEMA, orient="row")
    if draw(st.booleans()):  # the traces' rows interleaved (each trace's own kept in order)
        seed = draw(st.integers(0, 2**16))
        metrics = (
            metrics.with_columns(pl.int_range(pl.len()).shuffle(seed).alias("_key"))
            .with_columns(pl.col("_key").sort().over("trace"))
            .sort("_key")
            .drop("_key")
        )
    return metrics, transitions


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames=traces())
def test_generated_traces_have_the_per_trace_features(
    frames: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    metrics, transitions = frames
    try:
        want = compute_features_per_trace(metrics, transitions)
    except np.linalg.LinAlgError:  # numpy's fit of degenerate windows: the same error both ways
        with pytest.raises(np.linalg.LinAlgError):
            compute_features(metrics, transitions)
        return
    assert_same_features(compute_features(metrics, transitions), want)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.floats(-1e9, 1e9), min_size=1, max_size=300),
    ranges=st.lists(st.tuples(st.integers(0, 299), st.integers(0, 40)), max_size=30),
)
def test_segment_sums_are_numpys(values: list[float], ranges: list[tuple[int, int]]) -> None:
    v = np.array(values)
    lo = np.array([min(a, len(v)) for a, _ in ranges], dtype=np.int64)
    hi = np.array([min(a + n, len(v)) for a, n in ranges], dtype=np.int64)
    got = segment_sums(v, lo, hi)
    assert [_bits(float(x)) for x in got] == [
        _bits(float(v[a:b].sum())) for a, b in zip(lo, hi, strict=True)
    ]


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, allow_subnormal=True),
        max_size=40,
    ),
    groups=st.lists(st.integers(0, 4), min_size=40, max_size=40),
)
def test_medians_are_numpys(values: list[float], groups: list[int]) -> None:
    v = np.array(values, dtype=float)
    g = np.sort(np.array(groups[: len(v)], dtype=np.int64))
    for found in (medians(v, g, 5), run_medians(v, g, 5)):
        for k in range(5):
            own = v[g == k]
            want = float(np.median(own)) if len(own) else math.nan
            assert _bits(float(found[k])) == _bits(want) or (
                math.isnan(want) and math.isnan(found[k])
            )
