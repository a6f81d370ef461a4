"""Synthetic sender traces for identify tests: metrics and transitions frames of an AIMD or
CUBIC window under periodic loss, computed round by round from the controllers' rules."""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from quicsm.core.frames import METRICS_SCHEMA, TRANSITIONS_SCHEMA

TRACE = "synthetic#0000"


def window_trace(
    *,
    beta: float = 0.5,
    cubic: bool = False,
    reduce: bool = True,
    rtt_ms: float = 40.0,
    segment: float = 1250.0,
    start_segments: float = 60.0,
    rounds_between_losses: int = 30,
    losses: int = 6,
    offset_ms: float = 0.0,
    cubic_c: float = 0.4,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Slow start to ``start_segments``, then ``losses`` congestion epochs of
    ``rounds_between_losses`` round trips each: Reno growth of one segment per RTT, or CUBIC's
    W(t) = C (t - K)^3 + W_max (segments, seconds); at each loss the window is multiplied by
    ``beta`` (not reduced at all when ``reduce`` is false, as BBR)."""
    metrics: list[dict[str, Any]] = []
    states: list[tuple[float, str]] = [(offset_ms, "Init"), (offset_ms, "SlowStart")]
    t = offset_ms
    cwnd = 10.0

    def log(event: str, window: float) -> None:
        size = window * segment
        metrics.append({"time_ms": t, "event": event, "cwnd_bytes": size,
                        "bytes_in_flight": size, "smoothed_rtt_ms": rtt_ms})  # fmt: skip

    while cwnd < start_segments:
        log("metrics", cwnd)
        t += rtt_ms
        cwnd = min(cwnd * 2, start_segments)
    log("metrics", cwnd)
    states.append((t, "CongestionAvoidance"))
    w_max = cwnd
    for _ in range(losses):
        epoch_start = t
        w0 = cwnd
        k = ((w_max - w0) / cubic_c) ** (1 / 3) if cubic and w_max > w0 else 0.0
        for _ in range(rounds_between_losses):
            t += rtt_ms
            if cubic:
                elapsed = (t - epoch_start) / 1000
                cwnd = max(cwnd, cubic_c * (elapsed - k) ** 3 + w_max)
            else:
                cwnd += 1
            log("metrics", cwnd)
        t += rtt_ms / 4
        metrics.append({"time_ms": t, "event": "packet_lost", "cwnd_bytes": cwnd * segment,
                        "bytes_in_flight": cwnd * segment, "smoothed_rtt_ms": rtt_ms})  # fmt: skip
        states.append((t, "Recovery"))
        w_max = cwnd
        if reduce:
            cwnd *= beta
        t += 1.0
        log("metrics", cwnd)
        t += rtt_ms
        states.append((t, "CongestionAvoidance"))
    return _frames(metrics, states, t + rtt_ms)


def relabel(frame: pl.DataFrame, scale: float) -> pl.DataFrame:
    """``frame`` with every byte count multiplied by ``scale`` (another segment size)."""
    return frame.with_columns(
        [pl.col(c) * scale for c in ("cwnd_bytes", "bytes_in_flight") if c in frame.columns]
    )


def isclose(a: float | None, b: float, tol: float) -> bool:
    return a is not None and math.isclose(a, b, abs_tol=tol)


def acked_trace(
    *,
    beta: float = 0.7,
    segment: float = 1441.0,
    start_segments: float = 40.0,
    rounds_between_losses: int = 20,
    losses: int = 5,
    round_ms: list[float] | None = None,
    rtt_ms: float = 0.3,
    whole_steps: bool = False,
    alpha_below_max: float = 1.0,
    idle_rounds: int = 0,
    clocked: bool = False,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A Reno sender logged as quic-go logs it: its flight on every packet sent and every ACK,
    its window growing by segment x acked / window on every ACK (RFC 9002 section 7.3.3), cut by
    ``beta`` at each loss. Each round (a window sent, then acknowledged) lasts the next value of
    ``round_ms`` (cycled; default ``rtt_ms``), whatever the smoothed RTT the trace logs: the
    wall clock and the logged RTT say nothing of the rounds.

    ``whole_steps`` accumulates the increments and adds a whole segment at a time (quic-go's
    Reno, quiche's and quinn's accumulators); ``alpha_below_max`` is the growth in segments per
    window while the window is below the one it was last cut from (CUBIC's Reno-friendly
    alpha of 0.53 in quiche, which grows by one segment per window past it); ``idle_rounds``
    rounds after each cut send only half the window and do not grow it (a sender not limited
    by its window, RFC 9002 section 7.8). ``clocked`` sends a packet whenever an acknowledgement
    leaves room in the window (an ACK-clocked sender keeps its window full) instead of a window
    at a time."""
    durations = round_ms or [rtt_ms]
    metrics: list[dict[str, Any]] = []
    states: list[tuple[float, str]] = [(0.0, "Init"), (0.0, "CongestionAvoidance")]
    t, cwnd, flight, k = 0.0, start_segments * segment, 0.0, 0
    w_max, pending = cwnd, 0.0

    def log(event: str) -> None:
        metrics.append({"time_ms": t, "event": event, "cwnd_bytes": cwnd,
                        "bytes_in_flight": flight, "smoothed_rtt_ms": rtt_ms})  # fmt: skip

    def send_up_to(limit: float) -> None:
        nonlocal flight
        while flight + segment <= limit + 1e-6:
            flight += segment
            log("metrics")

    if clocked:
        send_up_to(cwnd)
    for _ in range(losses):
        for n in range(rounds_between_losses):
            step = durations[k % len(durations)] / 2
            k += 1
            idle = n < idle_rounds
            packets = max(int(cwnd // segment) // (2 if idle else 1), 1)
            if not clocked:
                for _ in range(packets):
                    t += step / packets
                    flight += segment
                    log("metrics")
            for _ in range(packets):
                t += step / packets
                limited = not clocked or flight >= cwnd - 3 * segment  # RFC 9002 section 7.8
                flight = max(flight - segment, 0.0)
                if not idle and limited:
                    alpha = alpha_below_max if cwnd < w_max else 1.0
                    pending += alpha * segment * segment / cwnd
                    grow = segment * (pending // segment) if whole_steps else pending
                    cwnd += grow
                    pending -= grow
                log("metrics")
                if clocked:
                    send_up_to(cwnd / 2 if idle else cwnd)
        t += durations[k % len(durations)] / 4
        log("packet_lost")
        states.append((t, "Recovery"))
        w_max = cwnd
        cwnd *= beta
        log("metrics")
        t += durations[k % len(durations)] / 4
        states.append((t, "CongestionAvoidance"))
    return _frames(metrics, states, t + 1.0)


def _frames(
    metrics: list[dict[str, Any]], states: list[tuple[float, str]], end: float
) -> tuple[pl.DataFrame, pl.DataFrame]:
    frame = pl.DataFrame(metrics).with_columns(
        pl.lit("synthetic").alias("file"),
        pl.lit(TRACE).alias("trace"),
        pl.lit("server").alias("vantage"),
    )
    metrics_frame = frame.with_columns(
        [pl.lit(None, d).alias(c) for c, d in METRICS_SCHEMA.items() if c not in frame.columns]
    ).select([pl.col(c).cast(d) for c, d in METRICS_SCHEMA.items()])
    transitions = pl.DataFrame(
        {
            "file": ["synthetic"] * len(states),
            "trace": [TRACE] * len(states),
            "vantage": ["server"] * len(states),
            "time_ms": [s[0] for s in states],
            "state": [s[1] for s in states],
            "raw_state": [None] * len(states),
            "trigger": [None] * len(states),
            "source": ["derived"] * len(states),
            "end_ms": [end] * len(states),
        }
    ).select([pl.col(c).cast(d) for c, d in TRANSITIONS_SCHEMA.items()])
    return metrics_frame, transitions
