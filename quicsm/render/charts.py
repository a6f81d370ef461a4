"""The one charting layer: every chart of ``quicsm plot``, the comparison report and the
notebooks is a Vega-Lite specification built here, drawn by the same library everywhere.

- static SVG and PNG: :func:`to_svg` and :func:`to_png` (``vl-convert-python``, an embedded
  JavaScript engine: no browser, no network); the report inlines the SVG (no script);
- interactive HTML: :func:`interactive_page` inlines Vega, Vega-Lite and Vega-Embed and the
  specification in one file; a Content-Security-Policy allows exactly those scripts (by their
  SHA-256 hashes), and Vega runs its expression interpreter (no ``eval``), so the page works
  offline from disk and nothing else can run or be fetched; wheel and drag zoom and pan the
  time axis of every panel of a connection together;
- Jupyter: :class:`Chart` displays as SVG.

Specifications are plain dictionaries built from the data alone (sorted, fixed precision), so
the same input gives the same bytes. Text from traces reaches a chart only as data or titles,
which the renderer escapes.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from quicsm.core.errors import QuicsmError
from quicsm.render.colours import state_colour, tint
from quicsm.render.connection import (
    EVENTS,
    ConnectionSeries,
    clusters,
    ellipsize,
    loss_marks,
    pixel_bands,
    reduce_points,
)
from quicsm.render.escape import esc

Spec = dict[str, Any]

#: colours of group A and group B in every chart
GROUP_COLOURS: Final[tuple[str, str]] = ("#4e79a7", "#e15759")
#: how strongly a state band is filled with its state's colour (0 = white); lines and marks
#: are dark, so each keeps a contrast of at least 3:1 on every band (tests/test_charts.py)
BAND_TINT: Final[float] = 0.32
#: line colour of each plotted metric: dark, none of them close to a state's hue at band tint
LINE_COLOURS: Final[dict[str, str]] = {
    "cwnd_bytes": "#a50f15",
    "bytes_in_flight": "#08519c",
    "ssthresh_bytes": "#252525",
    "smoothed_rtt_ms": "#54278f",
    "min_rtt_ms": "#00441b",
    "pacing_rate_bps": "#5a2a0a",
}
LINE_NAMES: Final[dict[str, str]] = {
    "cwnd_bytes": "cwnd",
    "bytes_in_flight": "bytes in flight",
    "ssthresh_bytes": "ssthresh",
    "smoothed_rtt_ms": "smoothed RTT",
    "min_rtt_ms": "min RTT",
    "pacing_rate_bps": "pacing rate",
}
DASHED: Final[frozenset[str]] = frozenset({"ssthresh_bytes", "min_rtt_ms"})
RTT_SAMPLE_COLOUR: Final[str] = "#525252"
#: mark of each event kind: (shape, colour, filled)
EVENT_MARKS: Final[dict[str, tuple[str, str, bool]]] = {
    "packet_lost": ("cross", "#a50f15", True),
    "spurious_loss": ("diamond", "#08519c", False),
    "pto": ("triangle-down", "#111111", True),
}
#: the packets panel: each kind of point -> (legend label, shape, colour, filled); filled, as
#: the legend draws them (a spurious loss differs from a loss by its shape and colour)
PACKET_MARKS: Final[dict[str, tuple[str, str, str, bool]]] = {
    "sent": ("data packet", "circle", RTT_SAMPLE_COLOUR, True),
    "lost": ("declared lost", "cross", "#a50f15", True),
    "spurious": ("declared lost, acknowledged later (spurious)", "diamond", "#08519c", True),
}
#: the packets panel's line: the largest packet number acknowledged so far
ACKED_COLOUR: Final[str] = "#016c59"
#: the panels of a connection, top to bottom: title, metrics (drawn when one is logged)
PANELS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("window (bytes)", ("cwnd_bytes", "bytes_in_flight", "ssthresh_bytes")),
    ("RTT (ms); dots: RTT samples", ("smoothed_rtt_ms", "min_rtt_ms")),
    ("pacing rate (bit/s)", ("pacing_rate_bps",)),
)
#: width of a connection's panels, px
PLOT_WIDTH: Final[int] = 1000
PANEL_HEIGHT: Final[int] = 170
#: marks closer than this fraction of the time axis are merged into one mark with a count
CLUSTER_FRACTION: Final[float] = 1 / 250
#: the area of a mark standing for n events (one scale for every panel of a plot)
COUNT_SIZES: Final[Spec] = {"type": "sqrt", "domain": [1, 50], "range": [60, 400], "clamp": True}
#: points kept per series: at most four per this many columns of the time axis
COLUMNS: Final[int] = 2000

CONFIG: Final[Spec] = {
    "font": "Helvetica, Arial, sans-serif",
    "axis": {"labelFontSize": 12, "titleFontSize": 12, "titleFontWeight": "normal"},
    "legend": {"labelFontSize": 12, "titleFontSize": 12, "orient": "bottom", "columns": 4,
               "symbolStrokeWidth": 2, "labelLimit": 400},
    "title": {"fontSize": 14, "anchor": "start", "subtitleFontSize": 12},
    "header": {"labelFontSize": 12},
    "view": {"stroke": "#999999"},
}  # fmt: skip


def _r(x: float, digits: int = 3) -> float:
    """Fixed precision, so the specification (and so the drawing) is deterministic."""
    return round(float(x), digits)


# -- one connection ---------------------------------------------------------------------------


def _bands_layer(
    series: ConnectionSeries, states: Sequence[str], *, columns: int | None = None
) -> Spec:
    """The state bands; with ``columns``, as many pixel columns can show them (a static
    drawing of a trace that changes state thousands of times)."""
    bands = series.bands
    if columns is not None:
        bands = pixel_bands(bands, end=max(series.end_ms, 1e-3), columns=columns)
    rows = [
        {"start": _r(a), "end": _r(b), "state": s, "ms": _r(b - a)} for a, b, s in bands if b > a
    ]
    return {
        "data": {"values": rows},
        "mark": {"type": "rect", "opacity": 1},
        "encoding": {
            "x": {"field": "start", "type": "quantitative"},
            "x2": {"field": "end"},
            "fill": {
                "field": "state",
                "type": "nominal",
                "title": "congestion state",
                "scale": {
                    "domain": list(states),
                    "range": [tint(state_colour(s), BAND_TINT) for s in states],
                },
            },
            "tooltip": [
                {"field": "state", "title": "state"},
                {"field": "start", "title": "from (ms)"},
                {"field": "end", "title": "to (ms)"},
                {"field": "ms", "title": "for (ms)"},
            ],
        },
    }


def _lines_layer(
    series: ConnectionSeries, columns: Sequence[str], metrics: Sequence[str], *, points: int
) -> Spec:
    rows = []
    span = (0.0, max(series.end_ms, 1e-3))
    for column in columns:
        times, values = series.lines[column]
        xs, ys = reduce_points(times, values, columns=points, span=span)
        if xs and xs[-1] < series.end_ms:  # the last value holds until the trace ends
            xs, ys = [*xs, series.end_ms], [*ys, ys[-1]]
        rows += [
            {"t": _r(x), "v": _r(y), "m": LINE_NAMES[column]} for x, y in zip(xs, ys, strict=True)
        ]
    names = [LINE_NAMES[m] for m in metrics]
    return {
        "data": {"values": rows},
        "mark": {"type": "line", "interpolate": "step-after", "strokeWidth": 1.6, "clip": True},
        "encoding": {
            "x": {"field": "t", "type": "quantitative"},
            "y": {"field": "v", "type": "quantitative"},
            "stroke": {
                "field": "m",
                "type": "nominal",
                "title": "line",
                "scale": {"domain": names, "range": [LINE_COLOURS[m] for m in metrics]},
            },
            "strokeDash": {
                "field": "m",
                "type": "nominal",
                "title": "line",
                "scale": {
                    "domain": names,
                    "range": [[6, 3] if m in DASHED else [1, 0] for m in metrics],
                },
            },
            "tooltip": [{"field": "m", "title": "series"}, {"field": "t", "title": "time (ms)"},
                        {"field": "v", "title": "value", "format": ",.4~r"}],
        },
    }  # fmt: skip


def _samples_layer(series: ConnectionSeries, *, points: int) -> Spec:
    times, values = series.rtt_samples
    xs, ys = reduce_points(times, values, columns=points, span=(0.0, max(series.end_ms, 1e-3)))
    return {
        "data": {"values": [{"t": _r(x), "v": _r(y)} for x, y in zip(xs, ys, strict=True)]},
        "mark": {"type": "circle", "size": 9, "opacity": 0.55, "color": RTT_SAMPLE_COLOUR,
                 "clip": True},
        "encoding": {"x": {"field": "t", "type": "quantitative"},
                     "y": {"field": "v", "type": "quantitative"},
                     "tooltip": [{"field": "t", "title": "time (ms)"},
                                 {"field": "v", "title": "RTT sample (ms)"}]},
    }  # fmt: skip


def _x(title: str | None, domain: tuple[float, float]) -> Spec:
    return {
        "field": "t",
        "type": "quantitative",
        "title": title,
        "scale": {"domain": [_r(domain[0]), _r(domain[1])], "nice": False, "zero": False},
        "axis": {"labelOverlap": "greedy", "labelSeparation": 8, "tickCount": 10},
    }


#: loss-detection triggers (qlog ``packet_lost`` ``trigger``) -> their name on the plot
LOSS_TRIGGERS: Final[dict[str, str]] = {
    "reordering_threshold": "packet threshold",
    "time_threshold": "time threshold",
    "pto_expired": "PTO expired",
}


def _event_rows(series: ConnectionSeries, kind: str, short: str) -> list[tuple[str, list[float]]]:
    """(row label, event times) of one event kind: packet losses split by what detected them
    when the trace logs it (packet or time threshold, RFC 9002 section 6.1)."""
    times = series.events(kind)
    triggers = series.loss_triggers if kind == "packet_lost" else []
    if not any(triggers):
        return [(f"{short} ({len(times)})", times)]
    by: dict[str, list[float]] = {}
    for t, trigger in zip(times, triggers, strict=True):
        name = LOSS_TRIGGERS.get(trigger, trigger) if trigger else "trigger not logged"
        by.setdefault(name, []).append(t)
    rank = list(LOSS_TRIGGERS.values())
    names = sorted(by, key=lambda n: (rank.index(n) if n in rank else len(rank), n))
    return [(f"{short}, {n} ({len(by[n])})", by[n]) for n in names]


def _events_panel(
    series: ConnectionSeries,
    *,
    name: str,
    end: float,
    states: Sequence[str],
    columns: int | None = None,
) -> Spec:
    """One row per event kind: a mark per cluster of events, its count beside it when it
    holds several; "not logged" when the producer never logs that kind."""
    rows, missing = [], []
    kinds = [
        k for k in EVENTS if series.events(k) or k in series.not_logged or k != "spurious_loss"
    ]
    order: list[str] = []
    for kind in kinds:
        short = EVENTS[kind].split(" (")[0]
        if kind in series.not_logged:
            order.append(f"{short}: not logged")
            missing.append({"row": order[-1], "text": "not logged by this producer"})
            continue
        for label, times in _event_rows(series, kind, short):
            order.append(label)
            for first, last, n in clusters(times, gap=end * CLUSTER_FRACTION):
                rows.append({"t": _r((first + last) / 2), "first": _r(first), "last": _r(last),
                             "n": n, "count": str(n) if n > 1 else "", "kind": kind,
                             "row": label})  # fmt: skip
    y = {"field": "row", "type": "nominal", "title": None, "sort": order,
         "scale": {"domain": order}, "axis": {"labelLimit": 300}}  # fmt: skip
    layers: list[Spec] = [{**_bands_layer(series, states, columns=columns), "name": name}]
    for kind in kinds:
        shape, colour, filled = EVENT_MARKS[kind]
        layers.append(
            {
                "data": {"values": [r for r in rows if r["kind"] == kind]},
                "mark": {"type": "point", "shape": shape, "filled": filled, "color": colour,
                         "strokeWidth": 1.6, "clip": True, "opacity": 0.9},
                "encoding": {
                    "x": {"field": "t", "type": "quantitative"},
                    "y": y,
                    "size": {"field": "n", "type": "quantitative", "legend": None,
                             "scale": COUNT_SIZES},
                    "tooltip": [{"field": "row", "title": "event"},
                                {"field": "n", "title": "events"},
                                {"field": "first", "title": "first (ms)"},
                                {"field": "last", "title": "last (ms)"}],
                },
            }
        )  # fmt: skip
        layers.append(
            {
                "data": {"values": [r for r in rows if r["kind"] == kind and r["count"]]},
                "mark": {"type": "text", "align": "left", "dx": 9, "dy": -7, "fontSize": 11,
                         "color": colour, "clip": True},
                "encoding": {"x": {"field": "t", "type": "quantitative"}, "y": y,
                             "text": {"field": "count"}},
            }
        )  # fmt: skip
    if missing:
        layers.append(
            {
                "data": {"values": missing},
                "mark": {"type": "text", "fontSize": 12, "fontStyle": "italic",
                         "color": "#555555"},
                "encoding": {"x": {"value": PLOT_WIDTH / 2}, "y": y, "text": {"field": "text"}},
            }
        )  # fmt: skip
    panel: Spec = {
        "width": PLOT_WIDTH,
        "height": 30 * len(kinds),
        "title": {"text": "loss and timeout events (a number: that many events close together)",
                  "fontSize": 12, "fontWeight": "normal"},
        "layer": layers,
        "encoding": {"x": _x("time since the trace's first event (ms)", (0.0, end))},
    }  # fmt: skip
    return panel


def _packets_panel(
    series: ConnectionSeries,
    *,
    name: str,
    end: float,
    states: Sequence[str],
    points: int,
    columns: int | None = None,
) -> Spec:
    """The data packets by 1-RTT packet number: a dot per packet sent (thinned per pixel
    column), the largest acknowledged number as a line, a mark per cluster of packets declared
    lost (spurious ones, acknowledged later, marked apart) with its count beside it when it
    holds several; "not logged" when the producer never logs losses."""
    p = series.packets
    assert p is not None
    span = (0.0, end)
    times, numbers = p.sent
    xs, ys = reduce_points(times, numbers, columns=points, span=span)
    label = {k: v[0] for k, v in PACKET_MARKS.items()}
    sent = [{"t": _r(x), "v": int(y), "kind": label["sent"]} for x, y in zip(xs, ys, strict=True)]
    at, top = p.largest_acked
    ax, ay = reduce_points(at, top, columns=points, span=span)
    if ax and ax[-1] < end:
        ax, ay = [*ax, end], [*ay, ay[-1]]
    acked = [{"t": _r(x), "v": int(y)} for x, y in zip(ax, ay, strict=True)]
    high = max(max(numbers, default=1), max(top, default=1), *(n for _, n, _, _ in p.lost), 1)
    gap_number = high * 6 / PANEL_HEIGHT  # marks about 6 px apart or closer merge
    marks: list[dict[str, Any]] = []
    for kind, spurious in (("lost", False), ("spurious", True)):
        chosen = [(t, n) for t, n, s, _ in p.lost if s == spurious]
        for first, last, lo, hi, count in loss_marks(
            chosen, gap_ms=end * CLUSTER_FRACTION, gap_number=gap_number
        ):
            marks.append({"t": _r((first + last) / 2), "v": (lo + hi) / 2, "kind": label[kind],
                          "n": count, "count": str(count) if count > 1 else "",
                          "first": _r(first), "last": _r(last),
                          "numbers": f"{lo}" if lo == hi else f"{lo}-{hi}"})  # fmt: skip
    domain = [label[k] for k in PACKET_MARKS]
    x = {"field": "t", "type": "quantitative"}
    y = {"field": "v", "type": "quantitative", "title": None, "axis": {"format": "~s"},
         "scale": {"domain": [0, _r(high * 1.04)], "nice": False}}  # fmt: skip
    legend = {
        "shape": {"field": "kind", "type": "nominal", "title": "packets",
                  "scale": {"domain": domain, "range": [v[1] for v in PACKET_MARKS.values()]}},
        "color": {"field": "kind", "type": "nominal", "title": "packets",
                  "scale": {"domain": domain, "range": [v[2] for v in PACKET_MARKS.values()]}},
    }  # fmt: skip
    layers: list[Spec] = [
        {**_bands_layer(series, states, columns=columns), "name": name},
        {"data": {"values": sent},
         "mark": {"type": "point", "filled": True, "size": 8, "opacity": 1, "clip": True},
         "encoding": {"x": x, "y": y, **legend,
                      "tooltip": [{"field": "t", "title": "time (ms)"},
                                  {"field": "v", "title": "packet number"}]}},
        {"data": {"values": acked},
         "mark": {"type": "line", "interpolate": "step-after", "strokeWidth": 1.6,
                  "color": ACKED_COLOUR, "clip": True},
         "encoding": {"x": x, "y": y,
                      "tooltip": [{"field": "t", "title": "time (ms)"},
                                  {"field": "v", "title": "largest acknowledged"}]}},
    ]  # fmt: skip
    for kind in ("lost", "spurious"):
        _, _, colour, filled = PACKET_MARKS[kind]
        rows = [m for m in marks if m["kind"] == label[kind]]
        layers.append(
            {"data": {"values": rows},
             "mark": {"type": "point", "filled": filled, "strokeWidth": 1.8, "clip": True,
                      "opacity": 0.95},
             "encoding": {
                 "x": x, "y": y, **legend,
                 "size": {"field": "n", "type": "quantitative", "legend": None,
                          "scale": COUNT_SIZES},
                 "tooltip": [{"field": "kind", "title": "packets"},
                             {"field": "n", "title": "how many"},
                             {"field": "numbers", "title": "packet numbers"},
                             {"field": "first", "title": "first (ms)"},
                             {"field": "last", "title": "last (ms)"}]}}
        )  # fmt: skip
        layers.append(
            {"data": {"values": [m for m in rows if m["count"]]},
             "mark": {"type": "text", "align": "left", "dx": 9, "dy": -8, "fontSize": 12,
                      "fontWeight": "bold", "color": colour, "clip": True},
             "encoding": {"x": x, "y": y, "text": {"field": "count"}}}
        )  # fmt: skip
    note = _packets_note(series)
    if note:
        layers.append(
            {"data": {"values": [{"text": note}]},
             "mark": {"type": "text", "fontSize": 12, "fontStyle": "italic", "color": "#333333",
                      "align": "left"},
             "encoding": {"x": {"value": 8}, "y": {"value": 14}, "text": {"field": "text"}}}
        )  # fmt: skip
    return {
        "width": PLOT_WIDTH,
        "height": PANEL_HEIGHT,
        "title": {"text": packets_title(series), "fontSize": 12, "fontWeight": "normal"},
        "layer": layers,
        "encoding": {"x": _x(None, (0.0, end))},
    }


def packets_title(series: ConnectionSeries) -> str:
    """The packets panel's title: what it draws, with the counts."""
    p = series.packets
    assert p is not None
    whose = "sent" if p.own_sends and not p.captured else "received"
    if p.captured:
        whose = f"sent by the {'client' if p.own_sends else 'server'}"
    parts = [f"{len(p.sent[0]):,} {whose}", f"{p.acknowledged:,} acknowledged"]
    if p.losses_here and "packet_lost" not in series.not_logged:
        parts.append(f"{len(p.lost):,} declared lost, {p.spurious:,} of them spurious")
    return "packets by 1-RTT packet number (line: largest acknowledged): " + ", ".join(parts)


def _packets_note(series: ConnectionSeries) -> str:
    """What the packets panel cannot show, said in the panel."""
    p = series.packets
    assert p is not None
    notes = []
    if not p.losses_here:
        notes.append("losses are declared by the data's sender: not in this log")
    elif "packet_lost" in series.not_logged:
        notes.append("losses: not logged by this producer")
    if p.unnumbered:
        notes.append(f"{p.unnumbered} packets without a packet number not drawn")
    return "; ".join(notes)


def connection_spec(
    series: ConnectionSeries,
    *,
    points: int = COLUMNS,
    index: int = 0,
    states: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
    static: bool = False,
) -> Spec:
    """One connection as panels on one time axis (window; RTT with its samples; pacing rate
    where logged; loss and timeout events), the congestion state as bands behind the metric
    panels. Wheel and drag zoom and pan every panel's time axis together."""
    end = max(series.end_ms, 1e-3)
    # a static drawing shows at most one state per pixel column; the interactive one zooms
    band_columns = PLOT_WIDTH if static else None
    # the colour scales' domains: every state and metric of every connection drawn together
    states = list(states) if states is not None else series.states
    shown = [(t, [c for c in cols if c in series.lines]) for t, cols in PANELS]
    if metrics is None:
        metrics = [c for _, cols in shown for c in cols]
    panels: list[Spec] = []
    for i, (name, columns) in enumerate(shown):
        has_samples = i == 1 and bool(series.rtt_samples[0])
        if not columns and not has_samples:
            continue
        layers = [{**_bands_layer(series, states, columns=band_columns), "name": f"c{index}p{i}"}]
        if columns:
            layers.append(_lines_layer(series, columns, metrics, points=points))
        if has_samples:
            layers.append(_samples_layer(series, points=points))
        y = {"field": "v", "type": "quantitative", "title": None,
             "axis": {"format": "~s" if i != 1 else ",~r"}}  # fmt: skip
        for layer in layers[1:]:
            layer["encoding"]["y"] = y
        panels.append(
            {
                "width": PLOT_WIDTH,
                "height": PANEL_HEIGHT,
                "title": {"text": name, "fontSize": 12, "fontWeight": "normal"},
                "layer": layers,
                "encoding": {"x": _x(None, (0.0, end))},
            }
        )  # fmt: skip
    if not panels:
        panels.append(
            {
                "width": PLOT_WIDTH, "height": 60,
                "title": {"text": "this trace logs no congestion window, RTT or pacing rate",
                          "fontSize": 12, "fontWeight": "normal"},
                "layer": [
                    {**_bands_layer(series, states, columns=band_columns), "name": f"c{index}pn"}
                ],
                "encoding": {"x": _x(None, (0.0, end))},
            }
        )  # fmt: skip
    if series.packets is not None and (series.packets.sent[0] or series.packets.lost):
        panels.append(
            _packets_panel(
                series,
                name=f"c{index}pk",
                end=end,
                states=states,
                points=points,
                columns=band_columns,
            )  # fmt: skip
        )
    panels.append(
        _events_panel(series, name=f"c{index}pe", end=end, states=states, columns=band_columns)
    )
    views = [p["layer"][0]["name"] for p in panels]
    head = f"{series.trace} ({series.vantage})"
    title: Spec = {"text": ellipsize(head, 110)}
    if series.title:
        title["subtitle"] = ellipsize(series.title, 140)
    return {
        "title": title,
        "vconcat": panels,
        "spacing": 12,
        # one zoom for every panel: a selection over the panels' bands layers, bound to each
        # panel's own time scale (a shared scale does not follow a bound selection)
        "params": [{"name": f"zoom{index}", "select": {"type": "interval", "encodings": ["x"]},
                    "bind": "scales", "views": views}],
        "resolve": {"scale": {"x": "independent", "fill": "shared", "stroke": "shared",
                              "strokeDash": "shared", "color": "shared", "shape": "shared"}},
    }  # fmt: skip


def connections_spec(
    series: Sequence[ConnectionSeries], *, points: int = COLUMNS, static: bool = False
) -> Spec:
    """Several connections as small multiples, one below the other, each on its own time axis
    and zoomed on its own."""
    if len(series) == 1:
        return {**connection_spec(series[0], points=points, static=static), "config": CONFIG}
    states = list(dict.fromkeys(st for s in series for st in s.states))
    metrics = [c for _, cols in PANELS for c in cols if any(c in s.lines for s in series)]
    return {
        "vconcat": [
            connection_spec(
                s, points=points, index=i, states=states, metrics=metrics, static=static
            )
            for i, s in enumerate(series)
        ],
        "spacing": 36,
        "resolve": {"scale": {"x": "independent", "y": "independent"}},
        "config": CONFIG,
    }


# -- the comparison report --------------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    label: str
    values: tuple[float, float]  # group A, group B (fractions)
    lows: tuple[float, float]
    highs: tuple[float, float]
    note: str  # "p < 0.001 *" etc.
    significant: bool


@dataclass(frozen=True)
class Box:
    label: str
    quantiles: tuple[list[float] | None, list[float] | None]  # p10, p25, p50, p75, p90 per group
    counts: tuple[int, int]
    note: str
    significant: bool


@dataclass(frozen=True)
class Series:
    """The congestion window of one trace for the report's small multiples."""

    times_ms: list[float]
    cwnd_bytes: list[float | None]
    in_flight_bytes: list[float | None]
    losses_ms: list[float]
    ptos_ms: list[float]
    bands: list[tuple[float, float, str]]  # start_ms, end_ms, state


@dataclass(frozen=True)
class Cell:
    percent: float | None  # (mean_b - mean_a) / mean_a * 100
    significant: bool
    text: str  # second line: "p = 0.003" / "n.s." / "n=2 < 3: no test"
    counts: tuple[int, int]


def _group_scale(names: tuple[str, str]) -> Spec:
    return {"domain": list(names), "range": list(GROUP_COLOURS)}


def _notes_column(rows: Sequence[tuple[str, str, bool]], order: list[str], height: int) -> Spec:
    return {
        "width": 190,
        "height": height,
        "data": {"values": [{"label": a, "note": b, "sig": s} for a, b, s in rows]},
        "mark": {"type": "text", "align": "left", "fontSize": 11},
        "encoding": {
            "y": {"field": "label", "type": "nominal", "sort": order, "axis": None},
            "x": {"value": 4},
            "text": {"field": "note"},
            "fontWeight": {"condition": {"test": "datum.sig", "value": "bold"}, "value": "normal"},
            "color": {"condition": {"test": "datum.sig", "value": "#b00020"}, "value": "#555555"},
        },
        "view": {"stroke": None},
    }


def time_in_state_spec(bars: Sequence[Bar], *, names: tuple[str, str]) -> Spec:
    """Horizontal bars of the mean of per-trace time shares per group, 95% CI whiskers."""
    order = [b.label for b in bars]
    rows = []
    for b in bars:
        for g in range(2):
            v, lo, hi = b.values[g], b.lows[g], b.highs[g]
            if v is None or v != v:
                continue
            row: dict[str, Any] = {"label": b.label, "group": names[g], "v": _r(v, 5),
                                   "text": f"{100 * v:.1f}%"}  # fmt: skip
            if lo == lo and hi == hi and lo is not None and hi is not None and hi > lo:
                row |= {"lo": _r(max(lo, 0.0), 5), "hi": _r(min(hi, 1.0), 5)}
            rows.append(row)
    height = max(34 * len(bars), 40)
    y = {"field": "label", "type": "nominal", "sort": order, "title": None,
         "axis": {"labelFontSize": 12, "labelLimit": 220}}  # fmt: skip
    x = {"field": "v", "type": "quantitative", "scale": {"domain": [0, 1]},
         "axis": {"format": "%"}, "title": "mean of per-trace time shares (95% CI)"}  # fmt: skip
    offset = {"field": "group", "type": "nominal", "sort": list(names)}
    bars_view = {
        "width": 520,
        "height": height,
        "data": {"values": rows},
        "encoding": {"y": y, "yOffset": offset},
        "layer": [
            {"mark": {"type": "bar", "height": {"band": 0.9}},
             "encoding": {"x": x, "color": {"field": "group", "type": "nominal", "title": None,
                                           "scale": _group_scale(names)}}},
            {"mark": {"type": "rule", "color": "#222222", "strokeWidth": 1.2},
             "encoding": {"x": {"field": "lo", "type": "quantitative"}, "x2": {"field": "hi"}}},
            {"mark": {"type": "text", "align": "left", "dx": 4, "fontSize": 10},
             "encoding": {"x": {"field": "v", "type": "quantitative"}, "text": {"field": "text"}}},
        ],
    }  # fmt: skip
    notes = _notes_column([(b.label, b.note, b.significant) for b in bars], order, height)
    return {"hconcat": [bars_view, notes], "spacing": 40, "config": CONFIG}


#: lowest value of the dwell-time axis (ms)
_MIN_DWELL_AXIS_MS = 0.01


def dwell_spec(boxes: Sequence[Box], *, names: tuple[str, str]) -> Spec | None:
    """Box plots (p10-p25-median-p75-p90) of dwell time per state, log-scaled axis; None when
    there is no dwell time."""
    values = [q for b in boxes for qs in b.quantiles if qs for q in qs if q > 0]
    if not values:
        return None
    lo = 10 ** math.floor(math.log10(max(min(values), _MIN_DWELL_AXIS_MS)))
    hi = 10 ** math.ceil(math.log10(max(values)))
    hi = max(hi, lo * 10)
    order = [b.label for b in boxes]
    rows = []
    for b in boxes:
        for g in range(2):
            qs = b.quantiles[g]
            if not qs:
                continue
            p10, p25, p50, p75, p90 = (min(max(q, lo), hi) for q in qs)
            rows.append({"label": b.label, "group": names[g], "p10": _r(p10, 4), "p25": _r(p25, 4),
                         "p50": _r(p50, 4), "p75": _r(p75, 4), "p90": _r(p90, 4)})  # fmt: skip
    height = max(34 * len(boxes), 40)
    x = {"field": "p10", "type": "quantitative", "title": "dwell time per visit (ms, log scale)",
         "scale": {"type": "log", "domain": [lo, hi]}, "axis": {"format": "~g"}}  # fmt: skip
    colour = {"field": "group", "type": "nominal", "title": None, "scale": _group_scale(names)}
    view = {
        "width": 520,
        "height": height,
        "data": {"values": rows},
        "encoding": {"y": {"field": "label", "type": "nominal", "sort": order, "title": None,
                           "axis": {"labelLimit": 220}},
                     "yOffset": {"field": "group", "type": "nominal", "sort": list(names)}},
        "layer": [
            {"mark": {"type": "rule", "strokeWidth": 1.5},
             "encoding": {"x": x, "x2": {"field": "p90"}, "color": colour}},
            {"mark": {"type": "bar", "height": {"band": 0.8}, "opacity": 0.6},
             "encoding": {"x": {"field": "p25", "type": "quantitative"}, "x2": {"field": "p75"},
                          "color": colour}},
            {"mark": {"type": "tick", "color": "#222222", "thickness": 2},
             "encoding": {"x": {"field": "p50", "type": "quantitative"}}},
        ],
    }  # fmt: skip
    notes = _notes_column([(b.label, b.note, b.significant) for b in boxes], order, height)
    return {"hconcat": [view, notes], "spacing": 40, "config": CONFIG}


def traces_spec(traces: Sequence[tuple[str, str, Series]]) -> Spec:
    """Representative traces as small multiples, side by side, each on its own axes (time from
    its start to its end, window from zero to its largest value): (title, subtitle, series)."""
    states = list(dict.fromkeys(s for _, _, ser in traces for _, _, s in ser.bands))
    names = ["cwnd", "bytes in flight"]
    views = []
    for title, subtitle, s in traces:
        end = max([*s.times_ms, *(b[1] for b in s.bands), 1e-3])
        bands = ConnectionSeries("", "", end, s.bands, {})
        rows = []
        for name, values in (("cwnd", s.cwnd_bytes), ("bytes in flight", s.in_flight_bytes)):
            pts = [(t, v) for t, v in zip(s.times_ms, values, strict=True) if v is not None]
            xs, ys = reduce_points([p[0] for p in pts], [p[1] for p in pts], columns=600,
                                   span=(0.0, end))  # fmt: skip
            if xs and xs[-1] < end:
                xs, ys = [*xs, end], [*ys, ys[-1]]
            rows += [{"t": _r(x), "v": _r(y), "m": name} for x, y in zip(xs, ys, strict=True)]
        loss_rows = [{"t": _r(t)} for t in s.losses_ms]
        views.append(
            {
                "width": 470,
                "height": 220,
                "title": {"text": title, "subtitle": subtitle},
                "layer": [
                    _bands_layer(bands, states, columns=470),
                    {"data": {"values": rows},
                     "mark": {"type": "line", "interpolate": "step-after", "strokeWidth": 1.5},
                     "encoding": {"x": {"field": "t", "type": "quantitative"},
                                  "y": {"field": "v", "type": "quantitative",
                                        "title": "bytes", "axis": {"format": "~s"}},
                                  "stroke": {"field": "m", "type": "nominal", "title": "line",
                                             "scale": {"domain": names, "range": [
                                                 LINE_COLOURS["cwnd_bytes"],
                                                 LINE_COLOURS["bytes_in_flight"]]}}}},
                    {"data": {"values": loss_rows},
                     "mark": {"type": "tick", "color": EVENT_MARKS["packet_lost"][1],
                              "orient": "vertical", "size": 10, "thickness": 1.5},
                     "encoding": {"x": {"field": "t", "type": "quantitative"},
                                  "y": {"value": 215}}},
                ],
                "encoding": {"x": {**_x("time (ms)", (0.0, end))}},
            }
        )  # fmt: skip
    return {
        "hconcat": views,
        "spacing": 30,
        "resolve": {"scale": {"x": "independent", "y": "independent", "fill": "shared",
                              "stroke": "shared"}},
        "config": CONFIG,
    }  # fmt: skip


def heatmap_spec(
    rows: Sequence[str],
    cols: Sequence[str],
    cells: Mapping[tuple[str, str], Cell],
    *,
    row_label: str,
    col_label: str,
    title: str,
) -> Spec:
    """The scenario matrix: each cell coloured by the percent difference of B from A on a
    diverging scale (red: B lower, blue: B higher, white: no difference) with a legend; a
    cell whose difference is not significant is drawn pale with "n.s."."""
    data: list[dict[str, Any]] = []
    for (r, c), cell in sorted(cells.items()):
        pct = cell.percent
        data.append({
            "row": r, "col": c, "pct": None if pct is None else _r(pct, 2),
            "big": "–" if pct is None else ("±0%" if abs(pct) < 0.5 else f"{pct:+.0f}%"),
            "small": cell.text,
            "sig": cell.significant,
        })  # fmt: skip
    extent = max([abs(c.percent) for c in cells.values() if c.percent is not None] + [10.0])
    extent = min(float(math.ceil(extent / 10) * 10), 100.0) if extent <= 100 else extent
    x = {"field": "col", "type": "nominal", "sort": list(cols), "title": col_label or None,
         "axis": {"orient": "top", "labelAngle": 0, "labelFontSize": 12}}  # fmt: skip
    y = {"field": "row", "type": "nominal", "sort": list(rows), "title": row_label,
         "axis": {"labelFontSize": 12}}  # fmt: skip
    dark = f"datum.sig && datum.pct != null && abs(datum.pct) > {0.55 * extent}"
    return {
        "title": {"text": title},
        "data": {"values": data},
        "width": max(120 * len(cols), 160),
        "height": 52 * len(rows),
        "encoding": {"x": x, "y": y},
        "layer": [
            {"mark": {"type": "rect", "stroke": "#999999"},
             "encoding": {
                 "color": {"field": "pct", "type": "quantitative",
                           "title": ["% difference", "of B from A"],
                           "scale": {"scheme": "redblue", "domain": [-extent, extent],
                                     "domainMid": 0, "clamp": True},
                           "legend": {"orient": "right", "direction": "vertical",
                                      "gradientLength": 160, "format": "+d"}},
                 "opacity": {"condition": {"test": "datum.sig", "value": 1}, "value": 0.4}}},
            {"mark": {"type": "text", "dy": -8, "fontSize": 14},
             "encoding": {"text": {"field": "big"},
                          "fontWeight": {"condition": {"test": "datum.sig", "value": "bold"},
                                         "value": "normal"},
                          "color": {"condition": {"test": dark, "value": "#ffffff"},
                                    "value": "#222222"}}},
            {"mark": {"type": "text", "dy": 10, "fontSize": 10},
             "encoding": {"text": {"field": "small"},
                          "color": {"condition": {"test": dark, "value": "#ffffff"},
                                    "value": "#222222"}}},
        ],
        "config": CONFIG,
    }  # fmt: skip


# -- output -----------------------------------------------------------------------------------


def _vl_convert() -> Any:
    try:
        import vl_convert
    except ImportError:  # pragma: no cover - a dependency; the message says what to install
        raise QuicsmError(
            "drawing charts needs the Python package vl-convert-python (a quicsm dependency)"
        ) from None
    return vl_convert


_ID = re.compile(r'\bid="([^"]+)"')


def to_svg(spec: Spec, *, css_class: str = "chart") -> str:
    """The chart as an ``<svg>`` element (no XML prolog), with ``class`` ``css_class``.

    The renderer numbers gradient and clip ids per process; they are renamed after the
    specification's hash and their order, so the same chart gives the same bytes and two
    charts inlined in one page never share an id."""
    try:
        svg = str(_vl_convert().vegalite_to_svg(spec))
    except ValueError as exc:  # the renderer's message names what it could not draw
        raise QuicsmError(f"the chart could not be drawn: {exc}") from None
    svg = svg[svg.index("<svg") :]
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    prefix = "q" + hashlib.sha256(text.encode()).hexdigest()[:10]
    names = {old: f"{prefix}-{i}" for i, old in enumerate(dict.fromkeys(_ID.findall(svg)))}
    if names:
        refs = re.compile(
            r'(id="|url\(#|href="#)(' + "|".join(map(re.escape, names)) + r')(?=[")])'
        )
        svg = refs.sub(lambda m: m.group(1) + names[m.group(2)], svg)
    root = svg[: svg.index(">")]
    if ' class="marks"' in root:  # the renderer's own class on the root: keep one attribute
        return svg.replace(' class="marks"', f' class="{esc(css_class)}"', 1)
    return svg.replace("<svg ", f'<svg class="{esc(css_class)}" ', 1)


def to_png(spec: Spec, *, scale: float = 2.0) -> bytes:
    """The chart as PNG, ``scale`` pixels per chart unit."""
    try:
        return bytes(_vl_convert().vegalite_to_png(spec, scale=scale))
    except ValueError as exc:
        raise QuicsmError(f"the chart could not be drawn: {exc}") from None


@functools.cache
def _bundle() -> str:
    """Vega, Vega-Lite and Vega-Embed in one script (defines ``window.vegaEmbed``).

    The renderer builds it anew at every call (about 1.8 s of CPU, more than the rest of a
    one-connection plot), and it depends only on the renderer's version: it is kept in the
    cache directory (:func:`quicsm.engine.cache.default_cache_dir`) as
    ``vega-bundle-<version>.js`` and read from there afterwards. A cache that cannot be read or
    written only means the bundle is built again."""
    from importlib.metadata import PackageNotFoundError, version

    from quicsm.engine.cache import default_cache_dir

    try:
        renderer = version("vl-convert-python")
    except PackageNotFoundError:  # pragma: no cover - installed without metadata
        return str(_vl_convert().javascript_bundle())
    kept = default_cache_dir() / f"vega-bundle-{renderer}.js"
    try:  # the first line holds the digest of the rest: a damaged copy is built again
        digest, _, text = kept.read_text(encoding="utf-8").partition("\n")
        if digest == _bundle_digest(text):
            return text
    except (OSError, UnicodeDecodeError):
        pass
    text = str(_vl_convert().javascript_bundle())
    with contextlib.suppress(OSError):  # a read-only or full cache: built again next time
        kept.parent.mkdir(parents=True, exist_ok=True)
        temp = kept.with_name(f".{kept.name}.{os.getpid()}")
        temp.write_text(f"{_bundle_digest(text)}\n{text}", encoding="utf-8")
        os.replace(temp, kept)  # whole or not at all: a reader never sees a partial copy
    return text


def _bundle_digest(text: str) -> str:
    return "// sha256 " + hashlib.sha256(text.encode()).hexdigest()


def _hash(script: str) -> str:
    digest = hashlib.sha256(script.encode()).digest()
    return "'sha256-" + base64.b64encode(digest).decode() + "'"


#: runs once the libraries are in: draws the specification held in #spec into #chart with the
#: expression interpreter (no eval); exposes the view for scripted checks
_EMBED: Final[str] = (
    "vegaEmbed('#chart', JSON.parse(document.getElementById('spec').textContent), "
    "{renderer: 'svg', actions: false, ast: true})"
    ".then(function (r) { window.quicsmView = r.view; document.body.dataset.drawn = 'yes'; })"
    ".catch(function (e) { document.body.dataset.drawn = 'failed'; console.error(String(e)); });"
)


def _json_in_html(spec: Spec) -> str:
    """JSON safe inside a ``<script type="application/json">`` element."""
    text = json.dumps(spec, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def interactive_page(
    *, title: str, head_html: str, spec: Spec, tail_html: str = "", css: str = ""
) -> str:
    """A self-contained HTML page: ``head_html``, the interactive chart, ``tail_html``.
    ``head_html`` and ``tail_html`` must be escaped already."""
    bundle = _bundle()
    csp = (
        f"default-src 'none'; script-src {_hash(bundle)} {_hash(_EMBED)}; "
        "style-src 'unsafe-inline'; img-src data:"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{css}</style></head><body><main>"
        f'{head_html}<figure><div id="chart"></div></figure>{tail_html}</main>'
        f'<script type="application/json" id="spec">{_json_in_html(spec)}</script>'
        f"<script>{bundle}</script><script>{_EMBED}</script></body></html>\n"
    )


def _compact(png: bytes) -> bytes:
    """A PNG in 64 colours when Pillow is installed (the notebooks extra installs it): about a
    tenth of the bytes in a saved notebook, no visible difference on a chart."""
    try:
        from PIL import Image
    except ImportError:
        return png
    import io

    image = Image.open(io.BytesIO(png)).convert("RGB")
    out = io.BytesIO()
    image.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(
        out, format="PNG", optimize=True
    )
    return out.getvalue()


class Chart:
    """A chart for Jupyter: displays as PNG (compact in a saved notebook, whatever the number
    of points); :meth:`svg` and :meth:`png` give the drawing, :meth:`html` the interactive
    page (zoom and pan); ``spec`` is its Vega-Lite specification."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec

    def _repr_mimebundle_(
        self, include: object = None, exclude: object = None
    ) -> dict[str, object]:
        return {
            "image/png": base64.b64encode(_compact(self.png())).decode(),
            "text/plain": repr(self),
        }

    def __repr__(self) -> str:
        return "<quicsm chart: .svg(), .png(), .html(), .spec>"

    def svg(self) -> str:
        return to_svg(self.spec)

    def png(self, *, scale: float = 1.0) -> bytes:
        return to_png(self.spec, scale=scale)

    def html(self, *, title: str = "quicsm chart") -> str:
        return interactive_page(title=title, head_html="", spec=self.spec)


# -- the page of `quicsm plot` ----------------------------------------------------------------

_PLOT_CSS = """
body { margin:0; background:#f5f7fa; color:#1d2330;
  font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; }
main { max-width:1240px; margin:0 auto; padding:16px 20px 40px; }
h1 { font-size:19px; margin:8px 0 4px; overflow-wrap:anywhere; }
h2 { font-size:16px; margin:18px 0 4px; overflow-wrap:anywhere; }
p.quiet { color:#5b6475; font-size:14px; margin:4px 0 12px; }
figure { margin:0; background:#fff; border:1px solid #dde2ea; border-radius:8px; padding:8px;
  overflow-x:auto; }
table { border-collapse:collapse; font-size:14px; margin:8px 0 14px; }
th, td { border-bottom:1px solid #dde2ea; padding:3px 10px; text-align:left; }
td.num { text-align:right; font-variant-numeric:tabular-nums; }
.swatch { display:inline-block; width:12px; height:12px; border-radius:2px; margin-right:6px;
  vertical-align:-1px; border:1px solid #888; }
"""


def _durations_table(series: ConnectionSeries) -> str:
    from quicsm.render.connection import state_durations

    total = max(series.end_ms, 1e-9)
    rows = "".join(
        f'<tr><td><span class="swatch" style="background:{tint(state_colour(s), BAND_TINT)}">'
        f'</span>{esc(s)}</td><td class="num">{ms:.1f}</td>'
        f'<td class="num">{100 * ms / total:.1f}%</td><td class="num">{n}</td></tr>'
        for s, ms, n in state_durations(series)
    )
    return (
        "<table><tr><th>state</th><th>ms</th><th>share</th><th>visits</th></tr>" + rows + "</table>"
    )


def _summary(series: ConnectionSeries) -> str:
    def count(kind: str, word: str) -> str:
        if kind in series.not_logged:
            return f"{word}: not logged by this producer"
        return f"{len(series.events(kind))} {word}"

    parts = [f"{series.end_ms:.1f} ms", count("packet_lost", "packets declared lost")]
    if series.spurious_ms:
        parts.append(f"{len(series.spurious_ms)} of them spurious (later acknowledged)")
    parts.append(count("pto", "probe timeouts"))
    return "; ".join(parts)


def connection_page(series: Sequence[ConnectionSeries]) -> str:
    """``quicsm plot``'s HTML: the connections' interactive plot (wheel: zoom the time axis,
    drag: pan, double-click: reset), then the time in each state of each connection."""
    names = [f"{s.trace} ({s.vantage})" for s in series]
    title = names[0] if len(series) == 1 else f"{len(series)} connections"
    head = [f"<h1>{esc(title)}</h1>"]
    if len(series) == 1 and series[0].title:
        head.append(f'<p class="quiet">{esc(series[0].title)}</p>')
    head.append(
        '<p class="quiet">'
        + " · ".join(esc(_summary(s)) for s in series)
        + ". Wheel over a panel zooms the time axis of every panel of its connection, drag "
        "pans, double-click resets; hover a band, line or mark for its values.</p>"
    )
    tail = []
    for name, s in zip(names, series, strict=True):
        if len(series) > 1:
            tail.append(f"<h2>{esc(name)}</h2>")
        tail.append(_durations_table(s))
    return interactive_page(
        title=title,
        head_html="".join(head),
        spec=connections_spec(series),
        tail_html="".join(tail),
        css=_PLOT_CSS,
    )
