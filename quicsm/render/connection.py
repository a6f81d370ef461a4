"""One connection over time, cut out of the transitions and metrics frames for ``quicsm plot``
(drawn by :mod:`quicsm.render.charts`): the congestion state as bands, each logged metric as a
series, RTT samples, and the loss and probe-timeout events — with which event kinds the
producer does not log at all, so that a plot can say "not logged" instead of "0".

:func:`connection_series` reads :func:`quicsm.extract.read.read_transitions` and
:func:`quicsm.extract.read.read_metrics` output; :func:`reduce_points` thins long series per
pixel column keeping every peak and dip; :func:`clusters` merges nearby events into one mark
that carries their count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import polars as pl

from quicsm.core.errors import InputError
from quicsm.extract.account import Fact
from quicsm.extract.packets import PacketTimeline
from quicsm.extract.raw_events import TraceRecords

#: the metric series a connection can have, in drawing order
METRICS: Final[tuple[str, ...]] = (
    "cwnd_bytes",
    "bytes_in_flight",
    "ssthresh_bytes",
    "smoothed_rtt_ms",
    "min_rtt_ms",
    "pacing_rate_bps",
)
#: event kinds drawn as marks: the metrics frame's ``event`` value -> its name on the plot
EVENTS: Final[dict[str, str]] = {
    "packet_lost": "packet lost",
    "spurious_loss": "spurious loss (declared lost, later acknowledged)",
    "pto": "probe timeout",
}


@dataclass(frozen=True)
class ConnectionSeries:
    """Everything drawn for one trace; times in ms from the trace's first event."""

    trace: str
    vantage: str
    end_ms: float
    #: (start_ms, end_ms, state) in time order
    bands: list[tuple[float, float, str]]
    #: metric column -> (times, values), only metrics the trace logs
    lines: dict[str, tuple[list[float], list[float]]]
    losses_ms: list[float] = field(default_factory=list)
    ptos_ms: list[float] = field(default_factory=list)
    #: spurious losses: ``spurious_loss`` events or, where the producer logs none, packets
    #: declared lost and acknowledged later (from ``packets``)
    spurious_ms: list[float] = field(default_factory=list)
    #: what detected each loss (qlog ``trigger``: ``reordering_threshold``, ``time_threshold``),
    #: None where not logged; parallel to ``losses_ms`` (empty: no trigger read)
    loss_triggers: list[str | None] = field(default_factory=list)
    #: RTT samples (``latest_rtt``): (times, values)
    rtt_samples: tuple[list[float], list[float]] = ([], [])
    title: str = ""
    #: event kinds (keys of :data:`EVENTS`) the producer never logs
    not_logged: frozenset[str] = frozenset()
    #: the data packets sent, acknowledged and declared lost (None: packets not read)
    packets: PacketTimeline | None = None
    #: the connection's account (:mod:`quicsm.extract.account`): its counts and series, each
    #: with its provenance; the counts the plot states are these
    account: Mapping[str, Fact] = field(default_factory=dict)
    #: the trace's event records as its file has them (None: not read, or a format without
    #: numbered records): an interactive plot's marks open the record they were drawn from
    records: TraceRecords | None = None

    @property
    def states(self) -> list[str]:
        return list(dict.fromkeys(s for _, _, s in self.bands))

    def events(self, kind: str) -> list[float]:
        return {"packet_lost": self.losses_ms, "pto": self.ptos_ms}.get(kind, self.spurious_ms)


#: the counts a plot states, from the account: fact -> words
COUNTS: Final[dict[str, str]] = {
    "losses": "packets declared lost",
    "spurious_losses": "spurious losses (declared lost, later acknowledged)",
    "ptos": "probe timeouts",
    "recovery_episodes": "Recovery episodes",
}


def counts(series: ConnectionSeries) -> dict[str, Fact]:
    """The counts the plot states (:data:`COUNTS`), from the connection's account."""
    return {k: series.account[k] for k in COUNTS if k in series.account}


def count_text(fact: Fact, word: str) -> str:
    """A count in words with its provenance: ``117 spurious losses, from packets: quic-go
    v0.48.2 logs none``; ``probe timeouts: absent (...)``."""
    if fact.value is None:
        return f"{word}: absent ({fact.note})" if fact.note else f"{word}: absent"
    text = f"{fact.value:,.0f} {word}"
    if fact.source == "logged":
        return text
    source = "from packets" if fact.source == "packets" else f"from {fact.source}"
    return f"{text}, {source}" + (f": {fact.note}" if fact.note else "")


def connection_series(
    transitions: pl.DataFrame,
    metrics: pl.DataFrame,
    trace: str,
    *,
    title: str = "",
    not_logged: frozenset[str] = frozenset(),
    packets: PacketTimeline | None = None,
    account: Mapping[str, Fact] | None = None,
    records: TraceRecords | None = None,
) -> ConnectionSeries:
    """The series of trace id ``trace`` (``<file>#<n>``) from the two frames. ``not_logged``
    names event kinds the trace's producer does not log (from its profile); a kind the trace
    does log is never reported as not logged. ``packets``: the trace's packets
    (:func:`quicsm.extract.packets.read_packet_timelines`), drawn as a panel of their own.
    ``account``: the trace's facts (:func:`quicsm.extract.account.facts_of`): the counts the
    plot states, and spurious losses drawn from the packets where it counts them there.
    ``records``: the trace's event records (:func:`quicsm.extract.raw_events.trace_records`),
    which an interactive plot's marks open."""
    tr = transitions.filter(pl.col("trace").cast(pl.String) == trace).sort("time_ms")
    if tr.height == 0:
        raise InputError(f"{trace}: no such trace among the transitions read")
    m = metrics.filter(pl.col("trace").cast(pl.String) == trace).sort("time_ms")
    times = [float(t) for t in tr["time_ms"].to_list()]
    states = [str(s) for s in tr["state"].cast(pl.String).to_list()]
    end = float(tr["end_ms"].max())  # type: ignore[arg-type]
    if m.height:
        end = max(end, float(m["time_ms"].max()))  # type: ignore[arg-type]
    bands = [
        (t, times[i + 1] if i + 1 < len(times) else end, s)
        for i, (t, s) in enumerate(zip(times, states, strict=True))
    ]
    updates = m.filter(pl.col("event") == "metrics")
    lines: dict[str, tuple[list[float], list[float]]] = {}
    for column in METRICS:
        if column not in updates.columns:
            continue
        part = updates.select("time_ms", column).drop_nulls()
        if part.height:
            lines[column] = (
                [float(x) for x in part["time_ms"].to_list()],
                [float(x) for x in part[column].to_list()],
            )
    samples: tuple[list[float], list[float]] = ([], [])
    if "latest_rtt_ms" in m.columns:
        part = m.select("time_ms", "latest_rtt_ms").drop_nulls()
        samples = (
            [float(x) for x in part["time_ms"].to_list()],
            [float(x) for x in part["latest_rtt_ms"].to_list()],
        )

    def at(kind: str) -> list[float]:
        return [float(x) for x in m.filter(pl.col("event") == kind)["time_ms"]]

    losses, ptos, spurious = at("packet_lost"), at("pto"), at("spurious_loss")
    facts = dict(account or {})
    said = facts.get("spurious_losses")
    if said is not None and said.source == "packets" and packets is not None:
        # the account counts them from the packets: the marks are those packets
        spurious = [t for t, _, late, _ in packets.lost if late]
    elif not spurious and packets is not None and packets.losses_here:
        # the producer logs no spurious_loss event: its packets tell (declared lost, then
        # acknowledged)
        spurious = [t for t, _, late, _ in packets.lost if late]
    triggers: list[str | None] = []
    if "trigger" in m.columns:
        triggers = [
            None if t is None else str(t)
            for t in m.filter(pl.col("event") == "packet_lost")["trigger"].to_list()
        ]
    seen = {
        k for k, v in (("packet_lost", losses), ("pto", ptos), ("spurious_loss", spurious)) if v
    }
    return ConnectionSeries(
        trace=trace,
        vantage=str(tr["vantage"].cast(pl.String)[0]),
        end_ms=end,
        bands=bands,
        lines=lines,
        losses_ms=losses,
        loss_triggers=triggers,
        ptos_ms=ptos,
        spurious_ms=spurious,
        rtt_samples=samples,
        title=title,
        not_logged=frozenset(not_logged) - seen,
        packets=packets,
        account=facts,
        records=records,
    )


def state_durations(series: ConnectionSeries) -> list[tuple[str, float, int]]:
    """(state, total ms, visits) in order of first visit."""
    totals: dict[str, list[float]] = {}
    for start, end, state in series.bands:
        entry = totals.setdefault(state, [0.0, 0])
        entry[0] += max(end - start, 0.0)
        entry[1] += 1
    return [(s, v[0], int(v[1])) for s, v in totals.items()]


def reduce_points(
    xs: Sequence[float],
    ys: Sequence[float],
    *,
    columns: int,
    span: tuple[float, float] | None = None,
) -> tuple[list[float], list[float]]:
    """At most four points per column (first, lowest, highest, last, in time order) when there
    are more than four per column on average; ``xs`` sorted. The columns split ``span``
    (default: from the first to the last x) into ``columns`` equal parts."""
    if len(xs) <= 4 * columns:
        return list(xs), list(ys)
    lo, hi = span if span is not None else (xs[0], xs[-1])
    width = (hi - lo) / columns if hi > lo else 1.0

    def col(x: float) -> int:
        return math.floor((x - lo) / width)

    out_x: list[float] = []
    out_y: list[float] = []
    start = 0
    n = len(xs)
    while start < n:
        c = col(xs[start])
        end = start
        while end < n and col(xs[end]) == c:
            end += 1
        idx = range(start, end)
        low = min(idx, key=lambda i: ys[i])
        high = max(idx, key=lambda i: ys[i])
        for i in sorted({start, low, high, end - 1}):
            out_x.append(xs[i])
            out_y.append(ys[i])
        start = end
    return out_x, out_y


def clusters(times: Sequence[float], *, gap: float) -> list[tuple[float, float, int]]:
    """Sorted event times merged into (first, last, count) runs whose neighbours are at most
    ``gap`` apart: marks that would overlap on the plot become one mark with a count."""
    out: list[tuple[float, float, int]] = []
    for t in sorted(times):
        if out and t - out[-1][1] <= gap:
            first, _, n = out[-1]
            out[-1] = (first, t, n + 1)
        else:
            out.append((t, t, 1))
    return out


def loss_marks(
    losses: Sequence[tuple[float, int]], *, gap_ms: float, gap_number: float
) -> list[tuple[float, float, int, int, int]]:
    """Losses ``(time, packet number)`` merged into marks ``(first ms, last ms, lowest number,
    highest number, count)``: in time order, a loss joins the mark before it when it is at most
    ``gap_ms`` after that mark's last loss and its number at most ``gap_number`` from that
    loss's (marks that would overlap on the plot become one mark with a count)."""
    out: list[tuple[float, float, int, int, int]] = []
    last_number = 0
    for t, n in sorted(losses):
        if out and t - out[-1][1] <= gap_ms and abs(n - last_number) <= gap_number:
            first, _, lo, hi, count = out[-1]
            out[-1] = (first, t, min(lo, n), max(hi, n), count + 1)
        else:
            out.append((t, t, n, n, 1))
        last_number = n
    return out


def ellipsize(text: str, room: int) -> str:
    """``text`` cut to ``room`` characters, the middle replaced by an ellipsis (file names keep
    their start and their trace number)."""
    if len(text) <= room:
        return text
    keep = max(room - 1, 2)
    return text[: keep - keep // 2] + "…" + text[len(text) - keep // 2 :]


def pixel_bands(
    bands: Sequence[tuple[float, float, str]], *, end: float, columns: int
) -> list[tuple[float, float, str]]:
    """``bands`` as a drawing of ``columns`` pixel columns over [0, ``end``] can show them:
    each column takes the state that covers most of it, and neighbouring columns of one state
    merge. Unchanged when there are no more bands than columns."""
    if len(bands) <= columns or end <= 0:
        return list(bands)
    return merge_bands(bands, end=end, columns=columns)


#: each level of :func:`zoom_levels` has this many times the columns of the one before
LEVEL_FACTOR: Final[int] = 4


def _column_of(t: float, width: float, columns: int) -> int:
    """The column ``c`` with ``c * width <= t < (c + 1) * width`` as those products round (a
    division alone can put a time on a boundary in the column next to the one the products
    give, and then a sliver of a band is drawn in the wrong column), within [0, columns)."""
    c = int(t / width)
    if c * width > t:
        c -= 1
    elif (c + 1) * width <= t:
        c += 1
    return min(max(c, 0), columns - 1)


def merge_bands(
    bands: Sequence[tuple[float, float, str]], *, end: float, columns: int
) -> list[tuple[float, float, str]]:
    """``bands`` as ``columns`` pixel columns over [0, ``end``] show them: each column takes the
    state that covers most of it, neighbouring columns of one state merge (columns no band
    covers stay empty). One pass over ``bands`` (time order), whatever ``columns``: a band's
    inner columns are its own without being visited."""
    if end <= 0 or columns <= 0:
        return [b for b in bands if b[1] > b[0]]
    width = end / columns
    out: list[tuple[float, float, str]] = []
    column = -1  # the open column
    cover: dict[str, float] = {}  # how long each state covers it

    def put(lo: float, hi: float, state: str) -> None:
        if out and out[-1][2] == state and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi, state)
        else:
            out.append((lo, hi, state))

    def close() -> None:
        if column >= 0 and cover:
            state = max(sorted(cover), key=lambda s: cover[s])  # ties: the first name
            put(column * width, min((column + 1) * width, end), state)

    for start, stop, state in bands:
        if stop <= start:
            continue
        first = _column_of(start, width, columns)
        last = _column_of(stop, width, columns)
        if first != column:
            close()
            column, cover = first, {}
        if first == last:
            cover[state] = cover.get(state, 0.0) + stop - start
            continue
        cover[state] = cover.get(state, 0.0) + (first + 1) * width - start
        close()
        if last > first + 1:  # whole columns of this band
            put((first + 1) * width, last * width, state)
        column, cover = last, {}
        if stop > last * width:
            cover[state] = stop - last * width
    close()
    return out


#: the finest merged level of the bands (columns * 4**12): beyond it, the bands themselves
MAX_BAND_LEVEL: Final[int] = 12


def band_levels(
    bands: Sequence[tuple[float, float, str]], *, end: float, columns: int
) -> list[tuple[float, float, str, int]]:
    """The state bands drawn at the resolution of the view, as :func:`zoom_levels` draws a
    series: rows ``(start, end, state, level)``, level k merged over ``columns * 4**k``
    columns (:func:`merge_bands`), the last level the bands themselves, reached once a level
    merges none."""
    exact = [b for b in bands if b[1] > b[0]]
    rows: list[tuple[float, float, str, int]] = []
    level, cols = 0, columns
    while True:
        merged = merge_bands(exact, end=end, columns=cols)
        if len(merged) >= len(exact) or level >= MAX_BAND_LEVEL:
            return rows + [(a, b, s, level) for a, b, s in exact]
        rows += [(a, b, s, level) for a, b, s in merged]
        level, cols = level + 1, cols * LEVEL_FACTOR


def zoom_levels(
    xs: Sequence[float], ys: Sequence[float], *, columns: int, span: tuple[float, float]
) -> list[tuple[float, float, float, int]]:
    """A series drawn at the resolution of the view: rows ``(x, y, until, level)``. Level 0 is
    :func:`reduce_points` over ``columns`` columns of ``span`` (at most four points per column:
    first, lowest, highest, last), level k over ``columns * 4**k``, up to the first level that
    keeps every point, which holds the series itself. A view zoomed in z times draws level
    ``ceil(log4 z)`` (:func:`level_for`): always at least ``columns`` columns' worth of detail,
    full resolution once the view is narrow enough. ``until`` is the next point's x in the same
    level (the end of ``span`` for the last), so a step line's row is drawn wherever
    [x, until) meets the view. ``xs`` sorted."""
    rows: list[tuple[float, float, float, int]] = []
    level, cols = 0, columns
    while True:
        lx, ly = reduce_points(xs, ys, columns=cols, span=span)
        untils = [*lx[1:], max(span[1], lx[-1])] if lx else []
        rows += [(x, y, u, level) for x, y, u in zip(lx, ly, untils, strict=True)]
        if len(lx) == len(xs):
            return rows
        level, cols = level + 1, cols * LEVEL_FACTOR


def level_for(zoom: float, top: int) -> int:
    """The level :func:`zoom_levels` draws when the view spans ``1 / zoom`` of the series."""
    if zoom <= 1:
        return 0
    return min(top, max(0, math.ceil(math.log(zoom) / math.log(LEVEL_FACTOR) - 1e-9)))


def drop_repeats(xs: Sequence[float], ys: Sequence[float]) -> tuple[list[float], list[float]]:
    """A step line's points without those that repeat the value before them (the line holds
    it anyway); the last point is kept, so the line still reaches as far."""
    out_x: list[float] = []
    out_y: list[float] = []
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if not out_y or y != out_y[-1] or i == len(xs) - 1:
            out_x.append(x)
            out_y.append(y)
    return out_x, out_y
