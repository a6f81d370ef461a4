"""The evidence a congestion controller leaves in a sender's trace, one row per trace.

Computed from the metrics frame (:func:`quicsm.extract.read.read_metrics`) and the transitions
frame (:func:`quicsm.extract.read.read_transitions`), so it needs no instrumentation: stock qlog
with ``congestion_window`` and ``packet_lost`` events is enough.

* **Loss response.** A *reduction* is a drop of the congestion window by more than 10 % within
  two smoothed RTTs after a ``packet_lost``/``pto`` event, in one step between two logged
  windows. Its factor is the window after the step over the window just before it (``beta``;
  two cuts in a row are two reductions, not one deeper one), and over the most bytes in flight
  in the RTT before the loss (``beta_flight``): RFC 9002 NewReno halves the window
  (0.5), CUBIC (RFC 9438) multiplies it or the flight size by 0.7, BBR does not reduce it
  multiplicatively. Collapses to the minimum window after persistent congestion (factor < 0.3)
  are counted apart (``n_collapses``), not as a factor.
  A trace that logs no ``packet_lost`` event (quiche counts lost packets in its metrics) uses
  its entries into ``Recovery`` (explicit or derived) as the loss events.
* **Growth between losses.** Over every congestion-avoidance interval (the
  ``CongestionAvoidance`` state, explicit or derived; when no such interval is usable -- states
  that never leave slow start, or that flip to ``ApplicationLimited`` every few RTTs -- from two
  RTTs after each loss to the next loss) that lasts at least four smoothed RTTs and
  shows at least five distinct windows, a straight line and a parabola are fitted to the window
  over rounds. A round is a window of data acknowledged (``round_basis`` ``acked``: the falls of
  the bytes in flight between logged values, over the window, when the trace logs its flight on
  sends as well as on acknowledgements), else a smoothed RTT of wall-clock time (``rtt``), which
  below :data:`RTT_RESOLUTION_MS` is no unit of rounds. ``growth`` is the slope in 1250-byte
  segments per round (Reno: one of its own segments per window acknowledged, RFC 9002 section
  7.3.3, whatever the clock); ``curvature`` is the parabola's quadratic coefficient over the
  linear slope, both over the interval scaled to [0, 1]: about 0 for linear growth, negative
  for concave growth towards a previous maximum (CUBIC's concave region), positive for convex
  growth.
  ``cubic_fit`` tells CUBIC from Reno when both grow at the same mean rate: over the same
  intervals, CUBIC's own window function W(t) = C (t - K)^3 + W_max (RFC 9438 section 4.2;
  segments, seconds, C = 0.4, with K and W_max fitted) is set against a straight line, and
  ``cubic_fit`` is the median over intervals of ln((1 + RSS_line) / (1 + RSS_cubic)), the
  residual sums of squares in segments^2: positive when CUBIC's curve explains the window
  better than a line (the window rises fast after a cut and flattens towards the last
  maximum, or turns convex past it), negative when the growth is a line (Reno; or CUBIC in its
  Reno-friendly region, RFC 9438 section 4.3, which grows more slowly than Reno).
* **Growth below the last maximum.** ``growth_below_max`` is the window's growth in 1250-byte
  segments per window of data acknowledged while the sender was window-limited, counted only
  while the window is below the one it was last cut from (the window at the start of an
  interval over the factor), over ``rounds_below_max`` such rounds: Reno adds one of its
  segments per window there as anywhere; CUBIC climbs back to its last maximum W_max along its
  concave curve, or in its Reno-friendly region by 3 (1 - 0.7) / (1 + 0.7) = 0.53 segments per
  window until its Reno estimate reaches W_max (RFC 9438 section 4.3). This tells quiche's and
  quinn's CUBIC from quic-go's Reno, which cut by the same exact 0.7 and add whole segments.
* **Growth since the cut.** ``cut_fit`` sets the two controllers' own predictions of the window
  after each cut against what the window did, as a function of the time and of the data
  acknowledged since the cut, with nothing fitted: CUBIC (RFC 9438 sections 4.2-4.3) climbs
  back along W(t) = C (t - K)^3 + W_max, K = (W_max (1 - beta) / C)^(1/3), W_max the window
  before the cut and beta the factor of the cut, or in its Reno-friendly region by
  alpha = 3 (1 - beta) / (1 + beta) segments per window acknowledged, whichever is larger; Reno
  adds one segment per window acknowledged from the window after the cut (RFC 9002 section
  7.3.3). Windows acknowledged count only while the sender was window-limited. Per cut that is
  followed by :data:`MIN_EPOCH_POINTS` distinct windows over :data:`MIN_EPOCH_RTTS` smoothed RTTs
  or more before the next loss: ln((1 + mean squared error of Reno's prediction) / (1 + that of
  CUBIC's)), in 1250-byte segments; ``cut_fit`` is the median over ``n_cut_fits`` such cuts:
  positive when CUBIC's prediction explains the growth since the cut better, negative when
  Reno's does. CUBIC's W_max follows fast convergence from cut to cut (RFC 9438 section 4.7: a
  window cut before it regained the last W_max sets W_max to (1 + 0.7) / 2 of itself, as
  aioquic 1.7.2 and quiche 0.30 do), and K is measured from the window after the cut. Cuts
  that were undone are left out. One prior names CUBIC by it
  (:data:`quicsm.controllers.signatures.CUT_FIT_CUBIC`).
* **Undone cuts.** ``n_undone`` counts cuts after which, within :data:`UNDO_RTTS` smoothed RTTs
  and in one step, the window came back to the window before the cut: the sender found its
  losses spurious (reordering) and restored its state. quic-go v0.65.0 undoes only in Reno
  mode, quiche 0.30's CUBIC rolls back too, so an undo names no controller by itself;
  it tells why a trace shows no growth after its cuts. ``n_undone_slow_start`` counts the
  undone cuts after which the window went on doubling (:func:`_undone_into_slow_start`): the
  sender restored its slow-start threshold with its window. quic-go v0.65.0's Reno restores
  window, threshold and state (into slow start when the cut was made there); quiche 0.30's CUBIC
  never rolls back into slow start (its rollback returns early when the window before the cut
  was below the threshold). One rule names Reno by it
  (:data:`quicsm.controllers.signatures.BASES`, ``undo-slow-start``).
* **Steps.** ``step_bytes`` is the most common increase of the window inside
  congestion-avoidance intervals and ``step_share`` the share of increases of that size: whole
  segments for controllers that add a segment per window acknowledged (quic-go's and aioquic's
  Reno; quiche and quinn accumulate for Reno and CUBIC), small steps of every size for those
  that recompute the window on every ACK (quic-go's and aioquic's CUBIC).
* **Path.** ``rtt_ms`` is the median smoothed RTT: CUBIC's window is a function of time, not
  of round trips (RFC 9438 section 5), so its growth per RTT and its shape depend on the RTT
  (at 50 ms it grows like Reno in its Reno-friendly region, at 100 ms concavely).
* **Sending.** ``cwnd_gain`` is the largest window over the first: a receiver, which sends
  little but acknowledgements, barely moves its window.
* **Phases.** Explicit BBR phase names: ``Startup``/``Drain``/``ProbeBW``/``ProbeRTT`` and, for
  BBRv2/v3, the ProbeBW sub-phases (``up``, ``down``, ``cruise``, ``refill``) in the raw name;
  ``probe_rtt_depth``, the smallest window in ``ProbeRTT`` over the window before it (BBRv1
  drains to 4 packets, BBRv2/v3 to half the bandwidth-delay product).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import polars as pl

from quicsm.core.frames import KEY_DTYPE
from quicsm.core.states import BBR_STATES

#: the nominal segment size that growth is measured in (QUIC datagrams are 1200-1500 bytes)
SEGMENT_BYTES: Final[float] = 1250.0
#: a window drop counts as a reduction when it removes more than this share of the window
DROP_SHARE: Final[float] = 0.10
#: factors below this are collapses to the minimum window (persistent congestion, RTO)
COLLAPSE_BELOW: Final[float] = 0.3
#: a congestion-avoidance interval is used when it lasts this many smoothed RTTs ...
MIN_EPOCH_RTTS: Final[float] = 4.0
#: ... and shows at least this many distinct windows
MIN_EPOCH_POINTS: Final[int] = 5
#: the RTT assumed before the trace reports one
DEFAULT_RTT_MS: Final[float] = 100.0
#: below this median smoothed RTT (twice RFC 9002's 1 ms timer granularity, kGranularity) a
#: wall-clock RTT is no unit of time for a window: loss timers, pacing and ACK delays run at the
#: timer's resolution, not the path's, so growth "per RTT" and CUBIC's curve in seconds are not
#: measured there (loopback)
RTT_RESOLUTION_MS: Final[float] = 2.0
#: a trace counts rounds by acknowledged data when its bytes in flight go up (sends) in at
#: least this share of consecutive flight logs, and down (acknowledgements) in at least
#: ACKED_DOWN_SHARE of them: the stack logs its flight on sends as well as on
#: acknowledgements, so the fall of the flight between two logs is the data acknowledged
ACKED_UP_SHARE: Final[float] = 0.1
ACKED_DOWN_SHARE: Final[float] = 0.01
#: RFC 9438's CUBIC constant C, in segments per second cubed
CUBIC_C: Final[float] = 0.4
#: the times K (seconds after the start of an interval) at which CUBIC's curve may reach its
#: previous maximum, tried when fitting it: from before the interval (convex all along) to far
#: after it (K = 12 s is a maximum of some 2 300 segments, 2.9 MB)
CUBIC_K_GRID: Final[np.ndarray] = np.linspace(-2.0, 12.0, 141)
#: growth below the previous maximum counts a window's worth of acknowledged data only while the
#: sender was limited by its window: its bytes in flight before the acknowledgement within this
#: many bytes of the window (three full datagrams: quic-go's isCwndLimited allows a burst of
#: three) or this share of it, whichever is less. A sender that is not window-limited does not
#: grow its window (RFC 9002 section 7.8; quic-go, quiche and quinn all check), so its rounds
#: would read as slow growth
LIMITED_SLACK_BYTES: Final[float] = 4500.0
LIMITED_SHARE: Final[float] = 0.9
#: the window counts as below the previous maximum up to this share of it
BELOW_MAX_SHARE: Final[float] = 0.97

#: raw-name fragments of BBRv2/v3's ProbeBW sub-phases
BBR2_MARKERS: Final[tuple[str, ...]] = ("probe_bw_up", "probe_bw_down", "cruise", "refill",
                                         "probebwup", "probebwdown")  # fmt: skip

FEATURES_SCHEMA: Final[dict[str, pl.DataType]] = {
    "trace": KEY_DTYPE,
    "vantage": pl.String(),
    "n_metrics": pl.Int64(),
    "cwnd_gain": pl.Float64(),
    "n_losses": pl.Int64(),
    "n_reductions": pl.Int64(),
    "n_collapses": pl.Int64(),
    "beta": pl.Float64(),
    "beta_spread": pl.Float64(),
    "beta_flight": pl.Float64(),
    "n_epochs": pl.Int64(),
    "epoch_rtts": pl.Float64(),
    "round_basis": pl.String(),
    "step_bytes": pl.Float64(),
    "step_share": pl.Float64(),
    "growth": pl.Float64(),
    "curvature": pl.Float64(),
    "cubic_fit": pl.Float64(),
    "growth_below_max": pl.Float64(),
    "rounds_below_max": pl.Float64(),
    "cut_fit": pl.Float64(),
    "n_cut_fits": pl.Int64(),
    "n_undone": pl.Int64(),
    "n_undone_slow_start": pl.Int64(),
    "rtt_ms": pl.Float64(),
    "bbr_phases": pl.Int64(),
    "bbr2_phases": pl.Int64(),
    "probe_rtt_depth": pl.Float64(),
    "explicit_states": pl.Boolean(),
}


def _median(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


def _reductions(
    events: list[str], times: np.ndarray, cwnd: np.ndarray, flight: np.ndarray, rtt: np.ndarray
) -> tuple[list[float], list[float], int]:
    """Factors of the window reductions that follow loss events, against cwnd and flight."""
    betas: list[float] = []
    flights: list[float] = []
    collapses = 0
    n = len(events)
    # the rows read one at a time as Python floats (the same values and arithmetic, without a
    # numpy scalar per read); the RTT before each loss found by bisection when times are sorted
    ordered = bool(np.all(times[1:] >= times[:-1]))
    times_array, times, cwnd, rtt = times, times.tolist(), cwnd.tolist(), rtt.tolist()
    i = 0
    while i < n:
        if events[i] not in ("packet_lost", "pto") or math.isnan(cwnd[i]):
            i += 1
            continue
        start = i
        srtt = rtt[i] if not math.isnan(rtt[i]) else DEFAULT_RTT_MS
        before = cwnd[i]
        if ordered:
            first = bisect.bisect_left(times, times[i] - srtt)
            recent_flight = flight[first : bisect.bisect_right(times, times[i])]
        else:
            recent_flight = flight[(times_array >= times[i] - srtt) & (times_array <= times[i])]
        flight_before = float(np.nanmax(recent_flight)) if np.any(~np.isnan(recent_flight)) else 0
        # the loss event: every loss/pto within two RTTs (more while losses keep coming, up to
        # four RTTs); each single-step drop of the window in it is one reduction, its factor
        # the window after the step over the window just before it (a controller cuts in one
        # step; two congestion events in a row are two steps, not one deeper cut)
        horizon = times[i] + 2 * srtt
        previous = before
        j = i + 1
        while j < n and times[j] <= horizon:
            if events[j] == "metrics" and not math.isnan(cwnd[j]):
                if previous > 0 and cwnd[j] < (1 - DROP_SHARE) * previous:
                    factor = cwnd[j] / previous
                    if factor < COLLAPSE_BELOW:
                        collapses += 1
                    else:
                        betas.append(factor)
                        if flight_before > 0:
                            flights.append(cwnd[j] / flight_before)
                previous = cwnd[j]
            if events[j] in ("packet_lost", "pto"):
                horizon = max(horizon, times[j] + 2 * srtt) if times[j] - times[start] < 4 * srtt \
                    else horizon  # fmt: skip
            j += 1
        i = j
    return betas, flights, collapses


def _between_losses(
    events: list[str], times: np.ndarray, rtt: np.ndarray
) -> list[tuple[float, float]]:
    """Congestion-avoidance intervals for traces whose states do not say (derived states stay in
    slow start when no ssthresh is logged): from two smoothed RTTs after each loss (the cut and
    the recovery period, RFC 9002 section 7.3.2) to the next loss."""
    losses = [k for k, e in enumerate(events) if e in ("packet_lost", "pto")]
    out = []
    for k, nxt in zip(losses, losses[1:], strict=False):
        srtt = rtt[k] if not math.isnan(rtt[k]) else DEFAULT_RTT_MS
        start = float(times[k]) + 2 * srtt
        if start < float(times[nxt]):
            out.append((start, float(times[nxt])))
    return out


def _recovery_markers(events: list[str], times: np.ndarray, transitions: pl.DataFrame) -> list[str]:
    """``events`` with the metrics row just before each entry into ``Recovery`` marked as a loss
    (``packet_lost``), for traces that log no loss events (quiche logs its lost-packet counters
    in metrics, not as events)."""
    marked = list(events)
    entries = [
        float(t)
        for t, s in zip(
            transitions["time_ms"].to_list(), transitions["state"].to_list(), strict=True
        )
        if str(s) == "Recovery"
    ]
    for t in entries:
        k = int(np.searchsorted(times, t, side="left")) - 1
        if k >= 0 and marked[k] == "metrics":
            marked[k] = "packet_lost"
    return marked


def _intervals(transitions: pl.DataFrame, state: str) -> list[tuple[float, float]]:
    """(start, end) of every interval of one trace spent in ``state``."""
    times = transitions["time_ms"].to_list()
    states = [str(s) for s in transitions["state"].to_list()]
    ends = [*times[1:], float(transitions["end_ms"][0]) if transitions.height else 0.0]
    return [(t, e) for t, s, e in zip(times, states, ends, strict=True) if s == state]


def _ca_intervals(transitions: pl.DataFrame) -> list[tuple[float, float]]:
    """(start, end) of every CongestionAvoidance interval of one trace."""
    return _intervals(transitions, "CongestionAvoidance")


def _cubic_fit(seconds: np.ndarray, segments: np.ndarray) -> float:
    """ln((1 + RSS of a fitted line) / (1 + RSS of CUBIC's fitted curve)) for one interval's
    window (``segments``) over time (``seconds`` from its start): CUBIC's curve with C fixed
    (:data:`CUBIC_C`), K from :data:`CUBIC_K_GRID` and W_max by least squares for each K."""
    line = np.polyfit(seconds, segments, 1)
    rss_line = float(np.sum((np.polyval(line, seconds) - segments) ** 2))
    curves = CUBIC_C * (seconds[None, :] - CUBIC_K_GRID[:, None]) ** 3  # one row per K
    w_max = np.mean(segments[None, :] - curves, axis=1)  # the least-squares W_max of each K
    rss_cubic = float(np.min(np.sum((segments[None, :] - curves - w_max[:, None]) ** 2, axis=1)))
    return math.log((1.0 + rss_line) / (1.0 + rss_cubic))


def _acked_rounds(events: list[str], cwnd: np.ndarray, flight: np.ndarray) -> np.ndarray | None:
    """Cumulative ack-clocked rounds at every row: the data acknowledged since the start of the
    trace in congestion windows (each fall of the bytes in flight between two logged values,
    over the window then), or None when the trace does not log its flight on sends as well as
    on acknowledgements (:data:`ACKED_UP_SHARE`: then a fall is acknowledgements net of
    sends, not the data acknowledged). A fall across a loss event is the lost packets leaving
    the flight, not data acknowledged, and is not counted."""
    kinds = np.array(events, dtype=object)  # compared elementwise in one call each
    logged = (kinds == "metrics") & ~np.isnan(flight)
    index = np.flatnonzero(logged)
    if len(index) < 2:
        return None
    values = flight[index]
    steps = np.diff(values)
    lossy = np.cumsum((kinds == "packet_lost") | (kinds == "pto"))
    crossed = lossy[index[1:]] != lossy[index[:-1]]
    clean = steps[~crossed]
    if (
        not len(clean)
        or (clean > 0).mean() < ACKED_UP_SHARE
        or ((clean < 0).mean() < ACKED_DOWN_SHARE)
    ):
        return None
    window = np.where(np.isnan(cwnd), np.nan, cwnd)
    known = ~np.isnan(window)
    # the window in force at each row: the last logged one
    last = np.maximum.accumulate(np.where(known, np.arange(len(window)), 0))
    window = np.where(known[last], window[last], np.nan)
    acked = np.where(crossed | (steps > 0), 0.0, -steps)
    per_row = np.zeros(len(events))
    per_row[index[1:]] = acked / np.maximum(np.nan_to_num(window[index[1:]], nan=np.inf), 1.0)
    return np.cumsum(per_row)


def _steps(
    intervals: list[tuple[float, float]], times: np.ndarray, cwnd: np.ndarray
) -> tuple[float | None, float | None]:
    """The most common increase of the window between two logged values inside
    congestion-avoidance intervals (bytes, rounded) and the share of increases of that size.
    A controller that adds one whole segment once per window of acknowledged data (quic-go's and
    aioquic's Reno, quiche's and quinn's accumulators) logs whole-segment steps; one that
    recomputes its window on every ACK (quic-go's and aioquic's CUBIC) logs small ones of
    every size."""
    increases: list[float] = []
    ordered = bool(np.all(times[1:] >= times[:-1]))
    for start, end in intervals:
        w = cwnd[_rows_between(times, cwnd, start, end, ordered=ordered)]
        d = np.diff(w)
        increases += [float(x) for x in np.round(d[d > 0])]
    if len(increases) < MIN_EPOCH_POINTS:
        return None, None
    values, counts = np.unique(increases, return_counts=True)
    mode = int(np.argmax(counts))
    return float(values[mode]), float(counts[mode] / len(increases))


def _rows_between(
    times: np.ndarray, cwnd: np.ndarray, start: float, end: float, *, ordered: bool
) -> np.ndarray:
    """The rows (in order) with ``start`` <= time < ``end`` and a window logged: by bisection
    when the times are ``ordered`` (the same rows as comparing every time)."""
    if ordered:
        lo, hi = np.searchsorted(times, [start, end], side="left").tolist()
        return lo + np.flatnonzero(~np.isnan(cwnd[lo:hi]))
    return np.flatnonzero((times >= start) & (times < end) & ~np.isnan(cwnd))


def _epochs(
    intervals: list[tuple[float, float]],
    times: np.ndarray,
    cwnd: np.ndarray,
    rtt: np.ndarray,
    acked: np.ndarray | None = None,
) -> list[tuple[float, float, float, float]]:
    """(growth in segments per round, curvature, length in rounds, cubic fit) of each usable CA
    interval (:func:`_epoch`). A round is a window of acknowledged data when ``acked``
    (cumulative rounds per row, :func:`_acked_rounds`) is given, else a smoothed RTT of
    wall-clock time."""
    out = []
    ordered = bool(np.all(times[1:] >= times[:-1]))
    for start, end in intervals:
        inside = _rows_between(times, cwnd, start, end, ordered=ordered)
        epoch = _epoch(
            times[inside], cwnd[inside], rtt[inside], None if acked is None else acked[inside]
        )
        if epoch is not None:
            out.append(epoch)
    return out


def _epoch(
    t: np.ndarray, w: np.ndarray, r: np.ndarray, a: np.ndarray | None
) -> tuple[float, float, float, float] | None:
    """(growth in segments per round, curvature, length in rounds, cubic fit) of one CA
    interval from its rows with a window logged (times ``t``, windows ``w``, smoothed RTTs
    ``r``, cumulative ack-clocked rounds ``a`` or None), or None when it is not usable: fewer
    than :data:`MIN_EPOCH_POINTS` distinct windows or shorter than :data:`MIN_EPOCH_RTTS`
    rounds."""
    if len(w) < 2:
        return None
    keep = np.concatenate(([True], np.diff(w) != 0))  # one point per window value
    t, w = t[keep], w[keep]
    if len(w) < MIN_EPOCH_POINTS or len(np.unique(w)) < MIN_EPOCH_POINTS:
        return None
    r = r[keep]
    known = r[~np.isnan(r)]  # the median of the known RTTs (nanmedian's, without its checks)
    srtt = float(np.median(known)) if len(known) else DEFAULT_RTT_MS
    if srtt <= 0:
        return None
    if a is not None:
        # ack-clocked rounds: windows of data acknowledged, whatever the wall clock did
        # (a Reno sender adds one segment per window acknowledged, RFC 9002 section 7.3.3)
        a = a[keep]
        rounds = a - a[0]
    else:
        # the x axis counts round trips, each as long as the smoothed RTT of its time, so
        # that a queue that lengthens the RTT does not bend a per-RTT (Reno) growth line
        r = np.where(np.isnan(r), srtt, r)
        rounds = np.concatenate(([0.0], np.cumsum(np.diff(t) / np.maximum(r[1:], 1e-3))))
    total = float(rounds[-1])
    if total < MIN_EPOCH_RTTS:
        return None
    s = rounds / total
    slope = float(np.polyfit(s, w, 1)[0])
    quad = float(np.polyfit(s, w, 2)[0])
    growth = slope / total / SEGMENT_BYTES
    curvature = quad / max(abs(slope), SEGMENT_BYTES)
    cubic = _cubic_fit((t - t[0]) / 1000.0, w / SEGMENT_BYTES)
    return growth, curvature, total, cubic


def _carried(values: np.ndarray) -> np.ndarray:
    """The last value logged strictly before each row (NaN before the first)."""
    known = ~np.isnan(values)
    last = np.maximum.accumulate(np.where(known, np.arange(len(values)), -1))
    before = np.concatenate(([-1], last[:-1]))
    return np.where(before >= 0, values[np.maximum(before, 0)], np.nan)


def _growth_below_max(
    intervals: list[tuple[float, float]],
    times: np.ndarray,
    cwnd: np.ndarray,
    flight: np.ndarray,
    acked: np.ndarray | None,
    beta: float | None,
) -> tuple[float | None, float]:
    """Growth of the window (1250-byte segments per window of data acknowledged while the sender
    was window-limited, :data:`LIMITED_SLACK_BYTES`) while it is below the window before the
    last cut, and the rounds that measure it. The window before the cut is the window at the
    start of the congestion-avoidance interval over the trace's factor ``beta``.

    Reno adds one segment per window acknowledged wherever its window is (RFC 9002 section
    7.3.3). CUBIC below its last maximum W_max grows either along its curve, concave and
    flattening towards W_max, or, in its Reno-friendly region, by alpha_cubic = 3 (1 - beta) /
    (1 + beta) = 0.53 segments per window until its Reno estimate reaches W_max (RFC 9438
    section 4.3; quiche raises alpha to 1 there, quinn keeps 0.53 per RTT of time): well under
    one segment per window where a Reno would add one. None (and the rounds seen) when fewer
    than two windows of acknowledged data were seen below the previous maximum, or the trace
    does not count rounds by acknowledged data."""
    if acked is None or beta is None or not COLLAPSE_BELOW <= beta < 1.0:
        return None, 0.0
    window = _carried(cwnd)
    floor = np.minimum(window - LIMITED_SLACK_BYTES, LIMITED_SHARE * window)
    limited = np.nan_to_num(_carried(flight), nan=-1.0) >= np.nan_to_num(floor, nan=np.inf)
    counted = np.cumsum(np.where(limited, np.diff(acked, prepend=0.0), 0.0))
    grown = rounds = 0.0
    ordered = bool(np.all(times[1:] >= times[:-1]))
    for start, end in intervals:
        rows = _rows_between(times, cwnd, start, end, ordered=ordered)
        if len(rows) < 2:
            continue
        w = cwnd[rows]
        below = w[:-1] < BELOW_MAX_SHARE * w[0] / beta
        rounds += float((counted[rows[1:]] - counted[rows[:-1]])[below].sum())
        grown += float(np.maximum(np.diff(w), 0.0)[below].sum())
    if rounds < 2.0:
        return None, rounds
    return grown / SEGMENT_BYTES / rounds, rounds


def _window_limited_rounds(
    cwnd: np.ndarray, flight: np.ndarray, acked: np.ndarray | None
) -> np.ndarray | None:
    """Cumulative windows of data acknowledged while the sender was window-limited (its flight
    before the acknowledgement within :data:`LIMITED_SLACK_BYTES` or :data:`LIMITED_SHARE` of
    the window), at every row; None without ack-clocked rounds."""
    if acked is None:
        return None
    window = _carried(cwnd)
    floor = np.minimum(window - LIMITED_SLACK_BYTES, LIMITED_SHARE * window)
    limited = np.nan_to_num(_carried(flight), nan=-1.0) >= np.nan_to_num(floor, nan=np.inf)
    return np.cumsum(np.where(limited, np.diff(acked, prepend=0.0), 0.0))


def cut_predictions(
    w_max: float,
    beta: float,
    seconds: np.ndarray,
    rounds: np.ndarray,
    *,
    cubic_w_max: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(Reno's, CUBIC's) window after a cut from ``w_max`` to ``beta * w_max`` segments, at
    ``seconds`` and ``rounds`` (windows acknowledged) since the cut, in segments: Reno adds one
    segment per window acknowledged (RFC 9002 section 7.3.3); CUBIC takes the larger of its
    curve C (t - K)^3 + W_max, K = ((W_max - beta w_max) / C)^(1/3) (RFC 9438 section 4.2) and
    its Reno-friendly estimate, alpha = 3 (1 - beta) / (1 + beta) segments per window (section
    4.3). CUBIC's W_max is ``cubic_w_max`` when given -- fast convergence (RFC 9438 section
    4.7: a window cut below the last W_max sets W_max to (1 + beta) / 2 of it,
    :func:`cubic_w_max_after`) -- else ``w_max``."""
    start = beta * w_max
    reno = start + rounds
    target = w_max if cubic_w_max is None else cubic_w_max
    k = np.cbrt(max(target - start, 0.0) / CUBIC_C)
    curve = CUBIC_C * (seconds - k) ** 3 + target
    friendly = start + 3.0 * (1.0 - beta) / (1.0 + beta) * rounds
    return reno, np.maximum(curve, friendly)


#: CUBIC's multiplicative factor (RFC 9438 section 4.6), which fast convergence uses to set
#: W_max below a window cut short of the last one (section 4.7)
CUBIC_BETA: Final[float] = 0.7


def cubic_w_max_after(before: float, last_w_max: float | None) -> float:
    """CUBIC's W_max after a cut of the window ``before`` (segments), with fast convergence
    (RFC 9438 section 4.7): ``before`` when it reached the last W_max (or there is none), else
    ``before`` (1 + beta_cubic) / 2 -- what aioquic 1.7.2 and quiche 0.30 do, both with
    beta_cubic 0.7 (quic-go's CUBIC instead emulates its connections' shared W_max without this
    step, which only shifts its K a little)."""
    if last_w_max is None or before >= last_w_max:
        return before
    return before * (1.0 + CUBIC_BETA) / 2.0


def cut_score(
    w_max: float,
    beta: float,
    seconds: np.ndarray,
    rounds: np.ndarray,
    window: np.ndarray,
    *,
    cubic_w_max: float | None = None,
) -> float:
    """ln((1 + MSE of Reno's prediction) / (1 + MSE of CUBIC's)) of the ``window`` (segments)
    after one cut (:func:`cut_predictions`): positive when CUBIC's prediction is closer."""
    reno, cubic = cut_predictions(w_max, beta, seconds, rounds, cubic_w_max=cubic_w_max)
    mse_reno = float(np.mean((window - reno) ** 2))
    mse_cubic = float(np.mean((window - cubic) ** 2))
    return math.log((1.0 + mse_reno) / (1.0 + mse_cubic))


#: a cut is *undone* when, within this many smoothed RTTs of it and before the next cut, the
#: window comes back in one step to at least UNDO_SHARE of the window before the cut: the
#: sender learnt that the losses were spurious (reordering) and restored its state (quic-go
#: v0.65.0's Reno, quiche's CUBIC rollback, Linux's undo)
UNDO_RTTS: Final[float] = 1.0
UNDO_SHARE: Final[float] = 0.995
#: an undone cut went back *into slow start* when, within UNDO_GROWTH_RTTS smoothed RTTs after
#: the window was restored (and before it next fell), the window grew by SLOW_START_SEGMENTS
#: 1250-byte segments or more at SLOW_START_RATE doublings per smoothed RTT or more (time
#: counted from at least SLOW_START_MIN_RTTS): the sender restored its slow-start threshold with
#: its window and doubles again. Congestion avoidance adds about one segment per RTT there
#: (quiche 0.30's CUBIC, which never rolls back into slow start: at most 1.1 times the restored
#: window within an RTT on the development draws); quic-go v0.65.0's Reno, whose undo restores
#: the threshold and the state, 1.2-2.3 times
UNDO_GROWTH_RTTS: Final[float] = 2.0
SLOW_START_SEGMENTS: Final[float] = 4.0
SLOW_START_RATE: Final[float] = 0.5
SLOW_START_MIN_RTTS: Final[float] = 0.25


def _cuts(
    events: list[str], times: np.ndarray, cwnd: np.ndarray, rtt: np.ndarray
) -> list[tuple[int, int, bool]]:
    """(row before, row after, undone) of every cut: a one-step drop of the window by a factor
    between :data:`COLLAPSE_BELOW` and 1 - :data:`DROP_SHARE` within two smoothed RTTs after a
    loss; undone as :data:`UNDO_RTTS` says."""
    is_loss = np.array([e in ("packet_lost", "pto") for e in events], dtype=bool)
    loss_times = times[is_loss]
    rows = np.flatnonzero(~np.isnan(cwnd))
    out: list[tuple[int, int, bool]] = []
    # the one-step drops, found over all steps at once (the same comparisons, elementwise)
    steps_before, steps_after = cwnd[rows[:-1]], cwnd[rows[1:]]
    drops = np.flatnonzero(
        (steps_before > 0)
        & (COLLAPSE_BELOW * steps_before <= steps_after)
        & (steps_after < (1 - DROP_SHARE) * steps_before)
    )
    for i in drops.tolist():
        a, b = rows[i], rows[i + 1]
        before, after = cwnd[a], cwnd[b]
        srtt = float(rtt[b]) if not math.isnan(rtt[b]) else DEFAULT_RTT_MS
        t_cut = times[b]
        near = loss_times[(loss_times <= t_cut) & (loss_times >= t_cut - 2 * srtt)]
        if not len(near) or srtt <= 0:
            continue
        undone = False
        previous = after
        for c in rows[i + 2 :]:
            if times[c] - t_cut > UNDO_RTTS * srtt or cwnd[c] < (1 - DROP_SHARE) * previous:
                break
            if previous < UNDO_SHARE * before <= cwnd[c] and cwnd[c] - previous >= 0.5 * (
                before - after
            ):
                undone = True
                break
            previous = cwnd[c]
        out.append((int(a), int(b), undone))
    return out


def _undone_into_slow_start(
    times: np.ndarray, cwnd: np.ndarray, rtt: np.ndarray, a: int, b: int
) -> bool:
    """Whether the undone cut from row ``a`` to row ``b`` went back into slow start: after the
    row that restored the window (the first after ``b`` at :data:`UNDO_SHARE` of the window
    before the cut), the window grew at a slow-start rate (:data:`SLOW_START_RATE`,
    :data:`SLOW_START_SEGMENTS`) within :data:`UNDO_GROWTH_RTTS` smoothed RTTs, before it next
    fell by :data:`DROP_SHARE`."""
    rows = np.flatnonzero(~np.isnan(cwnd))
    later = rows[rows > b]
    restored = later[cwnd[later] >= UNDO_SHARE * cwnd[a]]
    if not len(restored):
        return False
    c = int(restored[0])
    srtt = float(rtt[c]) if not math.isnan(rtt[c]) else DEFAULT_RTT_MS
    if srtt <= 0:
        return False
    start, previous = cwnd[c], cwnd[c]
    top, top_time = start, times[c]
    for r in later[later > c]:
        if times[r] - times[c] > UNDO_GROWTH_RTTS * srtt or cwnd[r] < (1 - DROP_SHARE) * previous:
            break
        previous = cwnd[r]
        if cwnd[r] > top:
            top, top_time = cwnd[r], times[r]
    if top - start < SLOW_START_SEGMENTS * SEGMENT_BYTES:
        return False
    rtts = max((top_time - times[c]) / srtt, SLOW_START_MIN_RTTS)
    return math.log2(top / start) / rtts >= SLOW_START_RATE


def _cut_fits(
    events: list[str],
    times: np.ndarray,
    cwnd: np.ndarray,
    rtt: np.ndarray,
    limited: np.ndarray | None,
) -> tuple[list[float], int, int]:
    """:func:`cut_score` of every cut (:func:`_cuts`) that stood (was not undone) and is
    followed by :data:`MIN_EPOCH_POINTS` distinct windows over :data:`MIN_EPOCH_RTTS` smoothed
    RTTs or more before the next loss, the number of cuts undone and of those that went back
    into slow start (:func:`_undone_into_slow_start`). Rounds are windows
    acknowledged while window-limited (``limited``, cumulative), else smoothed RTTs of
    wall-clock time. CUBIC's W_max follows fast convergence from cut to cut
    (:func:`cubic_w_max_after`)."""
    is_loss = np.array([e in ("packet_lost", "pto") for e in events], dtype=bool)
    loss_times = times[is_loss]
    rows = np.flatnonzero(~np.isnan(cwnd))
    scores: list[float] = []
    undone = into_slow_start = 0
    last_w_max: float | None = None
    for a, b, undo in _cuts(events, times, cwnd, rtt):
        if undo:
            undone += 1
            into_slow_start += _undone_into_slow_start(times, cwnd, rtt, a, b)
            continue
        before, after = cwnd[a], cwnd[b]
        w_max = cubic_w_max_after(before / SEGMENT_BYTES, last_w_max)
        last_w_max = w_max
        t_cut = times[b]
        srtt = float(rtt[b]) if not math.isnan(rtt[b]) else DEFAULT_RTT_MS
        later = loss_times[loss_times > t_cut]
        end = float(later[0]) if len(later) else float(times[-1]) + 1.0
        inside = rows[(times[rows] > t_cut) & (times[rows] < end)]
        score = _cut_fit(
            times[inside],
            cwnd[inside],
            None if limited is None else limited[inside] - limited[b],
            t_cut=t_cut,
            srtt=srtt,
            before=before,
            after=after,
            w_max=w_max,
        )
        if score is not None:
            scores.append(score)
    return scores, undone, into_slow_start


def _cut_fit(
    t: np.ndarray,
    w: np.ndarray,
    rounds: np.ndarray | None,
    *,
    t_cut: float,
    srtt: float,
    before: float,
    after: float,
    w_max: float,
) -> float | None:
    """:func:`cut_score` of one cut that stood, from the rows with a window logged after it
    and before the next loss (times ``t``, windows ``w``, window-limited rounds since the cut
    ``rounds`` or None for rounds of wall-clock time), or None when they are fewer than
    :data:`MIN_EPOCH_POINTS` distinct windows or span less than :data:`MIN_EPOCH_RTTS`
    smoothed RTTs."""
    if len(w) < MIN_EPOCH_POINTS or len(np.unique(w)) < MIN_EPOCH_POINTS:
        return None
    if (t[-1] - t_cut) < MIN_EPOCH_RTTS * srtt:
        return None
    seconds = (t - t_cut) / 1000.0
    if rounds is None:
        rounds = (t - t_cut) / srtt
    return cut_score(
        before / SEGMENT_BYTES,
        after / before,
        seconds,
        rounds,
        w / SEGMENT_BYTES,
        cubic_w_max=w_max,
    )


def _rtt_ms(rtt: np.ndarray) -> np.ndarray:
    """Smoothed RTTs in milliseconds. A trace whose first RTT is RFC 9002's initial 333 ms
    written as 0.333 logs RTTs in seconds (quinn 0.11 does, against the qlog drafts' ms): such a
    trace is scaled to milliseconds here."""
    known = rtt[~np.isnan(rtt)]
    if len(known) and abs(known[0] - 0.333) < 0.0005 and float(np.median(known)) < 1.0:
        return rtt * 1000.0
    return rtt


def _gain(cwnd: np.ndarray) -> float | None:
    """The largest window over the first one (a receiver's window hardly moves)."""
    known = cwnd[~np.isnan(cwnd)]
    if not len(known) or known[0] <= 0:
        return None
    return float(known.max() / known[0])


def _probe_rtt_depth(
    transitions: pl.DataFrame, times: np.ndarray, cwnd: np.ndarray
) -> float | None:
    """The smallest window inside a ``ProbeRTT`` interval over the largest in the second before
    it (the lowest over all intervals): BBRv1 drains to 4 packets (a few percent of a
    bandwidth-delay product), BBRv2/v3 to half the estimated BDP."""
    depths = []
    for start, end in _intervals(transitions, "ProbeRTT"):
        inside = (times >= start) & (times <= end) & ~np.isnan(cwnd)
        before = (times >= start - 1000.0) & (times < start) & ~np.isnan(cwnd)
        if inside.any() and before.any() and cwnd[before].max() > 0:
            depths.append(float(cwnd[inside].min() / cwnd[before].max()))
    return min(depths) if depths else None


def _phases(transitions: pl.DataFrame) -> tuple[int, int]:
    states = [str(s) for s in transitions["state"].to_list()]
    raws = [str(r).lower() for r in transitions["raw_state"].to_list() if r is not None]
    bbr = sum(1 for s in states if s in BBR_STATES)
    bbr2 = sum(1 for r in raws if any(m in r for m in BBR2_MARKERS))
    return bbr, bbr2


@dataclass(frozen=True)
class TraceColumns:
    """One trace's rows of the metrics frame as the features read them: its events and its
    times, windows, flights and smoothed RTTs as floats (NaN where not logged)."""

    events: list[str]
    times: np.ndarray
    cwnd: np.ndarray
    flight: np.ndarray
    rtt: np.ndarray

    @classmethod
    def of(cls, metrics: pl.DataFrame) -> TraceColumns:
        """The columns of ``metrics`` (one trace's rows, or several traces' together)."""
        nan = float("nan")
        return cls(
            metrics["event"].to_list(),
            metrics["time_ms"].to_numpy().astype(float),
            metrics["cwnd_bytes"].fill_null(nan).to_numpy().astype(float),
            metrics["bytes_in_flight"].fill_null(nan).to_numpy().astype(float),
            metrics["smoothed_rtt_ms"].fill_null(nan).to_numpy().astype(float),
        )

    def rows(self, index: np.ndarray) -> TraceColumns:
        """The rows ``index`` (in that order)."""
        if len(index) and index[-1] - index[0] + 1 == len(index) and np.all(np.diff(index) == 1):
            start, end = int(index[0]), int(index[-1]) + 1  # one run of rows: slices of them
            return TraceColumns(
                self.events[start:end],
                self.times[start:end],
                self.cwnd[start:end],
                self.flight[start:end],
                self.rtt[start:end],
            )
        events = self.events
        return TraceColumns(
            [events[i] for i in index.tolist()],
            self.times[index],
            self.cwnd[index],
            self.flight[index],
            self.rtt[index],
        )


def _columns_by_trace(metrics: pl.DataFrame) -> dict[str, TraceColumns]:
    """Each trace's :class:`TraceColumns`, its rows in their order in ``metrics``: the frame's
    columns converted once, not once per trace."""
    groups = (
        metrics.select("trace")
        .with_row_index("row")
        .group_by("trace", maintain_order=True)
        .agg(pl.col("row"))
    )
    columns = TraceColumns.of(metrics)
    order = groups["row"].explode().to_numpy().astype(np.int64)
    ends = np.cumsum(groups["row"].list.len().to_numpy())
    starts = ends - groups["row"].list.len().to_numpy()
    return {
        str(trace): columns.rows(order[start:end])
        for trace, start, end in zip(
            groups["trace"].to_list(), starts.tolist(), ends.tolist(), strict=True
        )
    }


def trace_features(
    trace: str, vantage: str, metrics: pl.DataFrame | TraceColumns, transitions: pl.DataFrame
) -> dict[str, Any]:
    """The features of one trace from its own rows of the two frames (its metrics rows as a
    frame or as their :class:`TraceColumns`)."""
    columns = metrics if isinstance(metrics, TraceColumns) else TraceColumns.of(metrics)
    events, times, cwnd, flight = columns.events, columns.times, columns.cwnd, columns.flight
    rtt = _rtt_ms(columns.rtt)
    n_losses = events.count("packet_lost")
    markers = events
    if not n_losses and transitions.height:
        markers = _recovery_markers(events, times, transitions)
    betas, flights, collapses = _reductions(markers, times, cwnd, flight, rtt)
    acked = _acked_rounds(markers, cwnd, flight)
    intervals = _ca_intervals(transitions) if transitions.height else []
    epochs = _epochs(intervals, times, cwnd, rtt, acked)
    if not epochs and betas:
        # no usable congestion-avoidance interval (none logged, or all shorter than
        # MIN_EPOCH_RTTS: quiche flips between CongestionAvoidance and ApplicationLimited)
        intervals = _between_losses(markers, times, rtt)
        epochs = _epochs(intervals, times, cwnd, rtt, acked)
    step_bytes, step_share = _steps(intervals, times, cwnd)
    below_max, rounds_below = _growth_below_max(
        intervals, times, cwnd, flight, acked, _median(betas)
    )
    cuts, undone, undone_slow_start = _cut_fits(
        markers, times, cwnd, rtt, _window_limited_rounds(cwnd, flight, acked)
    )
    bbr, bbr2 = _phases(transitions) if transitions.height else (0, 0)
    explicit = bool(transitions.height) and bool(
        (transitions["source"].cast(pl.String) == "explicit").any()
    )
    spread = (
        float(np.median(np.abs(np.array(betas) - np.median(betas)))) if len(betas) >= 2 else None
    )
    return {
        "trace": trace,
        "vantage": vantage,
        "n_metrics": events.count("metrics"),
        "cwnd_gain": _gain(cwnd),
        "n_losses": n_losses,
        "n_reductions": len(betas),
        "n_collapses": collapses,
        "beta": _median(betas),
        "beta_spread": spread,
        "beta_flight": _median(flights),
        "n_epochs": len(epochs),
        "epoch_rtts": float(sum(e[2] for e in epochs)),
        "round_basis": "acked" if acked is not None else "rtt",
        "step_bytes": step_bytes,
        "step_share": step_share,
        "growth": _median([e[0] for e in epochs]),
        "curvature": _median([e[1] for e in epochs]),
        "cubic_fit": _median([e[3] for e in epochs]),
        "growth_below_max": below_max,
        "rounds_below_max": rounds_below,
        "cut_fit": _median(cuts),
        "n_cut_fits": len(cuts),
        "n_undone": undone,
        "n_undone_slow_start": undone_slow_start,
        "rtt_ms": float(np.nanmedian(rtt)) if np.any(~np.isnan(rtt)) else None,
        "bbr_phases": bbr,
        "bbr2_phases": bbr2,
        "probe_rtt_depth": _probe_rtt_depth(transitions, times, cwnd) if bbr else None,
        "explicit_states": explicit,
    }


def compute_features_per_trace(metrics: pl.DataFrame, transitions: pl.DataFrame) -> pl.DataFrame:
    """One row of :data:`FEATURES_SCHEMA` per trace of ``transitions`` (in its order), one trace
    at a time: the reference :func:`quicsm.controllers.batch_features.compute_features` is
    tested against, and its path for traces whose times are not in order."""
    by_trace = _columns_by_trace(metrics)
    empty = TraceColumns.of(metrics.clear())
    rows: list[dict[str, Any]] = []
    # the traces' frames split at once (iterating a group-by gathers each group apart)
    traces: Iterable[tuple[Any, ...]] = transitions.partition_by(
        "trace", maintain_order=True, as_dict=True
    ).items()
    for key, frame in traces:
        trace = str(key[0])
        vantage = str(frame["vantage"][0])
        rows.append(trace_features(trace, vantage, by_trace.get(trace, empty), frame))
    return (
        pl.DataFrame(rows, schema=FEATURES_SCHEMA, orient="row")
        if rows
        else pl.DataFrame(schema=FEATURES_SCHEMA)
    )
