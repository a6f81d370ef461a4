"""Deterministic groups of traces for the diff and report tests (no random numbers, so golden
files stay byte-stable), and qlog files written from them."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from quicsm.core.frames import normalize_transitions

#: qlog names of the states used below (the quicsm instrumentation's spelling)
QLOG_NAMES = {
    "SlowStart": "slow_start",
    "CongestionAvoidance": "congestion_avoidance",
    "Recovery": "recovery",
    "ApplicationLimited": "application_limited",
    "TailLossProbe": "tail_loss_probe",
}


def patterned_traces(
    n: int, *, prefix: str, app_ms: float, recovery_ms: float = 20.0, tlp: bool = True
) -> list[tuple[str, list[tuple[float, str]], float]]:
    """``n`` traces (id, [(time_ms, state)], end_ms): SlowStart, Recovery, CongestionAvoidance,
    optionally TailLossProbe → Recovery, then ApplicationLimited for about ``app_ms``; small
    per-trace variations keep the groups from having zero variance."""
    out = []
    for i in range(n):
        wobble = (i * 7) % 5  # 0..4
        t = 0.0
        steps: list[tuple[float, str]] = []
        plan = [
            ("SlowStart", 40.0 + 3 * wobble),
            ("Recovery", recovery_ms + wobble),
            ("CongestionAvoidance", 60.0 + 5 * ((i * 3) % 4)),
        ]
        if tlp and i % 2 == 0:
            plan += [("TailLossProbe", 5.0 + wobble), ("Recovery", recovery_ms + 2 * wobble)]
        plan += [("ApplicationLimited", app_ms + 4 * ((i * 5) % 3))]
        for state, dwell in plan:
            steps.append((t, state))
            t += dwell
        out.append((f"{prefix}-{i:02d}", steps, t))
    return out


def frame(traces: list[tuple[str, list[tuple[float, str]], float]], *, file: str) -> pl.DataFrame:
    rows = [
        {"file": file, "trace": name, "time_ms": tm, "state": s, "end_ms": end}
        for name, steps, end in traces
        for tm, s in steps
    ]
    return normalize_transitions(pl.DataFrame(rows))


def write_qlog(
    path: Path,
    steps: list[tuple[float, str]],
    end_ms: float,
    *,
    title: str = "quicsm test trace",
    vantage: str = "server",
) -> None:
    """One JSON-SEQ qlog trace with the states as congestion_state_updated events, and a
    congestion window that grows and halves at Recovery."""
    header = {
        "qlog_version": "0.3",
        "qlog_format": "JSON-SEQ",
        "title": title,
        "trace": {"vantage_point": {"type": vantage}, "common_fields": {"time_format": "relative"}},
    }
    events = []
    cwnd = 14720.0
    for tm, state in steps:
        events.append(
            {
                "time": tm,
                "name": "recovery:congestion_state_updated",
                "data": {"new": QLOG_NAMES[state]},
            }
        )
        if state == "Recovery":
            events.append(
                {
                    "time": tm,
                    "name": "recovery:packet_lost",
                    "data": {"header": {"packet_type": "1RTT", "packet_number": int(tm)}},
                }
            )
            cwnd = cwnd / 2
        else:
            cwnd = cwnd * 1.5
        events.append(
            {
                "time": tm + 0.5,
                "name": "recovery:metrics_updated",
                "data": {"congestion_window": cwnd, "bytes_in_flight": cwnd * 0.8},
            }
        )
    events.append(
        {
            "time": end_ms,
            "name": "recovery:metrics_updated",
            "data": {"congestion_window": cwnd, "bytes_in_flight": 0},
        }
    )
    with path.open("w") as f:
        for record in [header, *events]:
            f.write("\x1e" + json.dumps(record) + "\n")


def write_group(
    root: Path,
    traces: list[tuple[str, list[tuple[float, str]], float]],
    *,
    labels: dict[str, object],
    title: str = "quicsm test trace",
) -> Path:
    """One lab-like run directory per trace: run-<i>/server.sqlog + run.json with ``labels``
    (plus ``object_size`` alternating between two values, for a scenario matrix)."""
    root.mkdir(parents=True, exist_ok=True)
    for i, (_, steps, end) in enumerate(traces):
        run = root / f"run-{i:02d}"
        run.mkdir()
        write_qlog(run / "server.sqlog", steps, end, title=title)
        run_labels = {**labels, "object_size": [10_000, 1_000_000][i % 2]}
        (run / "run.json").write_text(json.dumps(run_labels))
    return root
