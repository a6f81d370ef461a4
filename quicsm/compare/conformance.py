"""Conformance: how far a stack's controller is from a reference's on the same scenarios.

"Does this stack's CUBIC behave like Linux's on this path?" For every scenario (``per``, the
``scenario`` label by default) and every candidate group (``by``, e.g. ``stack``) against the
reference group (``reference``, e.g. ``linux-tcp``), four measures, each with a 95% interval
from a bootstrap over traces (traces resampled with replacement within each group, seeded):

* ``time_in_state``: the mean share of a connection's time in each state, candidate minus
  reference, in points of share;
* ``transition``: the probability of each observed transition ``A→B`` given ``A`` (counts
  pooled over a group's traces), candidate minus reference;
* ``cwnd_distance``: the distance between the two groups' congestion-window trajectories: the
  median window across a group's traces at 60 instants from each connection's first metric to
  the shortest connection's end, then the mean absolute difference of the two medians over
  those instants, as a share of the reference's mean median window (0 = the same trajectory);
* ``throughput_ratio``: the candidate's mean throughput over the reference's (the ``throughput``
  label of the lab's runs, Mbit/s; 1 = as fast).

:func:`conformance` returns one table (:data:`CONFORMANCE_SCHEMA`), which every view (the
report's section, notebooks) reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np
import orjson
import polars as pl

from quicsm.core.errors import InputError
from quicsm.stats.descriptive import time_in_state, transition_counts

CONFORMANCE_SCHEMA: Final[dict[str, pl.DataType]] = {
    "scenario": pl.String(),
    "candidate": pl.String(),
    "measure": pl.String(),  # time_in_state | transition | cwnd_distance | throughput_ratio
    "item": pl.String(),  # the state, "A→B", or "" for the whole-connection measures
    "reference_value": pl.Float64(),
    "candidate_value": pl.Float64(),
    "estimate": pl.Float64(),  # difference (time, transition), distance, or ratio
    "low": pl.Float64(),
    "high": pl.Float64(),
    "n_reference": pl.Int64(),
    "n_candidate": pl.Int64(),
}
MEASURES: Final = ("time_in_state", "transition", "cwnd_distance", "throughput_ratio")
GRID_POINTS: Final = 60


def _labels_of(traces: pl.DataFrame) -> dict[str, dict[str, object]]:
    return {t: orjson.loads(lab) for t, lab in traces.select("trace", "labels").iter_rows()}


def _cwnd_grid(metrics: pl.DataFrame, traces: list[str]) -> np.ndarray | None:
    """Each trace's window (last value carried forward) at GRID_POINTS instants, one row each."""
    curves = []
    for t in traces:
        m = metrics.filter(pl.col("trace") == t, pl.col("cwnd_bytes").is_not_null())
        if m.height < 2:
            return None
        times = m["time_ms"].to_numpy()
        curves.append((times - times[0], m["cwnd_bytes"].to_numpy()))
    horizon = min(float(times[-1]) for times, _ in curves)
    if horizon <= 0:
        return None
    grid = np.linspace(0.0, horizon, GRID_POINTS)
    out = np.empty((len(curves), GRID_POINTS))
    for i, (times, cwnd) in enumerate(curves):
        idx = np.searchsorted(times, grid, side="right") - 1
        out[i] = cwnd[np.clip(idx, 0, len(cwnd) - 1)]
    return out


def _distance(ref: np.ndarray, cand: np.ndarray) -> float:
    r, c = np.median(ref, axis=0), np.median(cand, axis=0)
    scale = float(np.mean(r))
    return float(np.mean(np.abs(c - r)) / scale) if scale > 0 else float("nan")


def _interval(samples: np.ndarray) -> tuple[float, float]:
    ok = samples[np.isfinite(samples)]
    if ok.size == 0:
        return float("nan"), float("nan")
    low, high = np.percentile(ok, [2.5, 97.5], axis=0)
    return float(low), float(high)


def _scenario_rows(
    scenario: str,
    candidate: str,
    ref: list[str],
    cand: list[str],
    *,
    shares: pl.DataFrame,
    counts: pl.DataFrame,
    metrics: pl.DataFrame | None,
    throughput: Mapping[str, float],
    resamples: int,
    rng: np.random.Generator,
) -> list[dict[str, object]]:
    nr, nc = len(ref), len(cand)
    boot_r = rng.integers(0, nr, size=(resamples, nr))
    boot_c = rng.integers(0, nc, size=(resamples, nc))
    rows: list[dict[str, object]] = []

    def add(measure: str, item: str, rv: float, cv: float, est: float, boot: np.ndarray) -> None:
        low, high = _interval(boot)
        rows.append(
            {
                "scenario": scenario,
                "candidate": candidate,
                "measure": measure,
                "item": item,
                "reference_value": rv,
                "candidate_value": cv,
                "estimate": est,
                "low": low,
                "high": high,
                "n_reference": nr,
                "n_candidate": nc,
            }
        )

    # time in state: a traces x states matrix of shares per group
    states = sorted(shares.filter(pl.col("trace").is_in(ref + cand))["state"].unique().to_list())
    for state in states:
        s = shares.filter(pl.col("state") == state)
        by_trace = dict(
            zip(s["trace"].to_list(), s["fraction"].fill_null(0.0).to_list(), strict=True)
        )
        r = np.array([by_trace.get(t, 0.0) for t in ref])
        c = np.array([by_trace.get(t, 0.0) for t in cand])
        boot = c[boot_c].mean(axis=1) - r[boot_r].mean(axis=1)
        add("time_in_state", state, r.mean(), c.mean(), c.mean() - r.mean(), boot)

    # transitions: per-trace counts of each observed edge, pooled per group
    sub = counts.filter(
        pl.col("trace").is_in(ref + cand),
        ~pl.col("source").is_in(["INITIAL"]),
        ~pl.col("target").is_in(["TERMINAL"]),
    )
    edges = sorted({(a, b) for a, b in sub.select("source", "target").iter_rows()})
    sources = sorted({a for a, _ in edges})
    per = {
        (t, a, b): n for t, a, b, n in sub.select("trace", "source", "target", "count").iter_rows()
    }
    for a in sources:
        outs = [b for x, b in edges if x == a]
        mat_r = np.array([[per.get((t, a, b), 0) for b in outs] for t in ref], dtype=float)
        mat_c = np.array([[per.get((t, a, b), 0) for b in outs] for t in cand], dtype=float)
        for j, b in enumerate(outs):

            def prob(mat: np.ndarray, j: int = j) -> np.ndarray:
                tot = mat.sum(axis=-1).sum(axis=-1)
                with np.errstate(invalid="ignore", divide="ignore"):
                    return mat[..., j].sum(axis=-1) / tot

            pr, pc = float(prob(mat_r)), float(prob(mat_c))
            boot = prob(mat_c[boot_c]) - prob(mat_r[boot_r])
            add("transition", f"{a}→{b}", pr, pc, pc - pr, boot)

    # congestion window trajectories
    if metrics is not None:
        grid = _cwnd_grid(metrics, ref + cand)
        if grid is not None:
            gr, gc = grid[:nr], grid[nr:]
            boot = np.array([_distance(gr[i], gc[k]) for i, k in zip(boot_r, boot_c, strict=True)])
            rv, cv = float(np.mean(np.median(gr, 0))), float(np.mean(np.median(gc, 0)))
            add("cwnd_distance", "", rv, cv, _distance(gr, gc), boot)

    # throughput
    tr = np.array([throughput.get(t, np.nan) for t in ref])
    tc = np.array([throughput.get(t, np.nan) for t in cand])
    if np.isfinite(tr).all() and np.isfinite(tc).all():
        boot = tc[boot_c].mean(axis=1) / tr[boot_r].mean(axis=1)
        add("throughput_ratio", "", tr.mean(), tc.mean(), tc.mean() / tr.mean(), boot)
    return rows


def conformance_table(
    transitions: pl.DataFrame,
    traces: pl.DataFrame,
    metrics: pl.DataFrame | None,
    *,
    by: str,
    reference: str,
    per: str = "scenario",
    resamples: int = 2000,
    seed: int = 0,
) -> pl.DataFrame:
    """The conformance table of already-read frames (``traces``: ``file, trace, labels``)."""
    labels = _labels_of(traces)
    values = {str(lab.get(by)) for lab in labels.values() if by in lab}
    if reference not in values:
        known = ", ".join(sorted(values)) or "none"
        raise InputError(f"--by {by}: no trace has {by}={reference} (values: {known})")
    groups: dict[tuple[str, str], list[str]] = {}
    for trace, lab in sorted(labels.items()):
        if by in lab and per in lab:
            groups.setdefault((str(lab[per]), str(lab[by])), []).append(trace)
    throughput = {
        t: float(v)
        for t, lab in labels.items()
        if isinstance(v := lab.get("throughput_mbit"), int | float)
    }
    shares = time_in_state(transitions)
    counts = transition_counts(transitions)
    rng = np.random.default_rng(seed)
    rows: list[dict[str, object]] = []
    for scenario in sorted({s for s, _ in groups}):
        ref = groups.get((scenario, reference))
        if not ref:
            continue
        for (s, candidate), cand in sorted(groups.items()):
            if s != scenario or candidate == reference:
                continue
            rows.extend(
                _scenario_rows(
                    scenario,
                    candidate,
                    ref,
                    cand,
                    shares=shares,
                    counts=counts,
                    metrics=metrics,
                    throughput=throughput,
                    resamples=resamples,
                    rng=rng,
                )
            )
    if not rows:
        raise InputError(
            f"no {per} has both {by}={reference} and another {by} (nothing to compare)"
        )
    return pl.DataFrame(rows, schema=CONFORMANCE_SCHEMA)


def conformance(
    paths: Sequence[str],
    *,
    by: str = "stack",
    reference: str = "linux-tcp",
    where: Mapping[str, str] | None = None,
    per: str = "scenario",
    resamples: int = 2000,
    seed: int = 0,
) -> pl.DataFrame:
    """Read the traces under ``paths`` (those matching ``where``) and compare every ``by``
    group with the ``reference`` group per ``per`` (see the module docstring)."""
    from quicsm.compare.grouping import filter_traces
    from quicsm.compare.load import read_labelled

    transitions, traces, metrics = read_labelled(list(paths), on_error="raise", metrics=True)
    traces = filter_traces(traces, dict(where or {}))
    keep = traces["trace"].cast(pl.Utf8).to_list()
    transitions = transitions.filter(pl.col("trace").cast(pl.Utf8).is_in(keep))
    if metrics is not None:
        metrics = metrics.filter(
            pl.col("trace").cast(pl.Utf8).is_in(keep), pl.col("event") == "metrics"
        )
    return conformance_table(
        transitions,
        traces,
        metrics,
        by=by,
        reference=reference,
        per=per,
        resamples=resamples,
        seed=seed,
    )
