"""The Vega-Lite charts: every chart of ``quicsm plot`` and the notebooks is a Vega-Lite
specification built here, drawn by the same library everywhere (the comparison report's static
charts are drawn by :mod:`quicsm.render.svg_charts`, with no script engine).

- static SVG and PNG: :func:`to_svg` and :func:`to_png` (``vl-convert-python``, an embedded
  JavaScript engine: no browser, no network);
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
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from quicsm.core.errors import QuicsmError
from quicsm.extract.account import SERIES
from quicsm.extract.raw_events import TraceRecords
from quicsm.extract.streams import StreamTimeline
from quicsm.render.colours import LINE_COLOURS, LOSS_COLOUR, STATE_TINT, state_colour, tint
from quicsm.render.connection import (
    COUNTS,
    EVENTS,
    LEVEL_FACTOR,
    ConnectionSeries,
    band_levels,
    clusters,
    count_text,
    counts,
    drop_repeats,
    ellipsize,
    loss_marks,
    pixel_bands,
    reduce_points,
    zoom_levels,
)
from quicsm.render.escape import esc
from quicsm.render.mark_records import band_record, band_records, record
from quicsm.render.packed_data import (
    TEXT_TO_BYTES_JS,
    UNPACK_JS,
    bytes_to_text,
    js_ms,
    pack_spec,
    text_to_bytes,
)
from quicsm.render.record_table import UNPACK_RECORDS_JS, pack_records

Spec = dict[str, Any]

#: how strongly a state band is filled with its state's colour (0 = white); lines and marks
#: are dark, so each keeps a contrast of at least 3:1 on every band (tests/test_charts.py)
BAND_TINT: Final[float] = STATE_TINT
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
    "packet_lost": ("cross", LOSS_COLOUR, True),
    "spurious_loss": ("diamond", "#08519c", False),
    "pto": ("triangle-down", "#111111", True),
}
#: the packets panel: each kind of point -> (legend label, shape, colour, filled); filled, as
#: the legend draws them (a spurious loss differs from a loss by its shape and colour)
PACKET_MARKS: Final[dict[str, tuple[str, str, str, bool]]] = {
    "sent": ("data packet", "circle", RTT_SAMPLE_COLOUR, True),
    "lost": ("declared lost", "cross", LOSS_COLOUR, True),
    "spurious": ("declared lost, acknowledged later (spurious)", "diamond", "#08519c", True),
}
#: the packets panel's line: the largest packet number acknowledged so far
ACKED_COLOUR: Final[str] = "#00473b"
#: the panels of a connection, top to bottom: title, metrics (drawn when one is logged)
PANELS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("window (bytes)", ("cwnd_bytes", "bytes_in_flight", "ssthresh_bytes")),
    ("RTT (ms); dots: RTT samples", ("smoothed_rtt_ms", "min_rtt_ms")),
    ("pacing rate (bit/s)", ("pacing_rate_bps",)),
)
#: width of a connection's panels, px
PLOT_WIDTH: Final[int] = 1000
PANEL_HEIGHT: Final[int] = 170
#: room the interactive page keeps beside its panels for the y axes' labels (the events panel's
#: row names are the widest) and padding, px: the first drawing then usually fits
FIT_MARGIN: Final[int] = 230
#: marks closer than this fraction of the time axis are merged into one mark with a count
CLUSTER_FRACTION: Final[float] = 1 / 250
#: the area of a mark standing for n events (one scale for every panel of a plot)
COUNT_SIZES: Final[Spec] = {"type": "sqrt", "domain": [1, 50], "range": [60, 400], "clamp": True}
#: points kept per series in the whole-trace view: at most four (first, lowest, highest, last)
#: per this many columns of the time axis; a zoomed view draws finer levels, down to every point
COLUMNS: Final[int] = PLOT_WIDTH

CONFIG: Final[Spec] = {
    "font": "Helvetica, Arial, sans-serif",
    "axis": {"labelFontSize": 12, "titleFontSize": 12, "titleFontWeight": "normal"},
    "legend": {"labelFontSize": 12, "titleFontSize": 12, "orient": "bottom", "columns": 4,
               "columnPadding": 28,
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
    series: ConnectionSeries,
    states: Sequence[str],
    *,
    columns: int | None = None,
    index: int | None = None,
) -> Spec:
    """The state bands; with ``columns``, as many pixel columns can show them (a static
    drawing of a trace that changes state thousands of times); with ``index`` (interactive),
    at the zoom levels of :func:`quicsm.render.connection.band_levels`, each view drawing the
    level its span asks for (sub-pixel bands merged: a trace that changes state thousands of
    times draws a few hundred rectangles per panel)."""
    bands = series.bands
    end = max(series.end_ms, 1e-3)
    if columns is not None:
        bands = pixel_bands(bands, end=end, columns=columns)
    rows: list[dict[str, Any]] = []
    if index is not None and columns is None:
        starts, numbers = ([], []) if series.records is None else band_records(
            series.records, bands)  # fmt: skip
        for a, b, s, lv in band_levels(bands, end=end, columns=COLUMNS):
            rows.append({"start": _r(a), "end": _r(b), "state": s,
                         "ms": js_ms(_r(a), _r(b)), "lv": lv})  # fmt: skip
            if series.records is not None:
                rows[-1]["r"] = band_record(starts, numbers, a)
    else:
        rows = [{"start": _r(a), "end": _r(b), "state": s, "ms": _r(b - a)}
                for a, b, s in bands if b > a]  # fmt: skip
    layer: Spec = {
        "data": {"values": rows},
        "mark": {"type": "rect", "opacity": 1},
        "encoding": {
            "x": {"field": "start", "type": "quantitative"},
            "x2": {"field": "end"},
            "fill": {
                "field": "state",
                "type": "nominal",
                "title": "congestion state",
                # outlined swatches: a light state's swatch still shows on white
                "legend": {"symbolStrokeColor": "#666666", "symbolStrokeWidth": 0.6},
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
    if rows and "lv" in rows[0]:
        finest = max(r["lv"] for r in rows)
        test = f"datum.end >= lo{index} && datum.start <= hi{index}"
        if finest:
            test = f"datum.lv == min({finest}, need{index}) && {test}"
        layer["transform"] = [{"filter": test}]
    return layer


def _rows_in_view(
    xs: Sequence[float],
    ys: Sequence[float],
    *,
    points: int,
    end: float,
    static: bool,
    step: bool = False,
    mark: Callable[[float, float], int] | None = None,
) -> list[dict[str, Any]]:
    """A series' rows ``t``, ``v``, and in an interactive chart ``lv``, the zoom level of
    :func:`quicsm.render.connection.zoom_levels` (see :func:`_view_filter`), and for a step
    line ``u``, the time its row holds until (the next row of its level); a static chart's
    are reduced to its pixel columns. ``step``: a step line, whose repeated values are dropped
    first (each holds until the next change: the same drawing). ``mark``: the record each
    row of an interactive chart was drawn from, by its time and value (``r``)."""
    if step:
        xs, ys = drop_repeats(xs, ys)
    span = (0.0, max(end, 1e-3))
    if static:
        rx, ry = reduce_points(xs, ys, columns=points, span=span)
        return [{"t": _r(x), "v": _r(y)} for x, y in zip(rx, ry, strict=True)]
    rows = zoom_levels(xs, ys, columns=points, span=span)
    if step:
        out = [{"t": _r(x), "v": _r(y), "u": _r(u), "lv": lv} for x, y, u, lv in rows]
    else:
        out = [{"t": _r(x), "v": _r(y), "lv": lv} for x, y, _, lv in rows]
    if mark is not None:
        known: dict[tuple[float, float], int] = {}  # a point is in several levels
        for row, (x, y, _, _) in zip(out, rows, strict=True):
            key = (x, y)
            if key not in known:
                known[key] = mark(x, y)
            row["r"] = known[key]
    return out


def _view_signals(index: int, end: float) -> list[Spec]:
    """The parameters a connection's zoomed view is read from, computed once per zoom rather
    than per row: ``lo<i>`` and ``hi<i>``, the time range in view, and ``need<i>``, the zoom
    level its span asks for (:func:`quicsm.render.connection.level_for`)."""
    zoom = f"zoom{index}"
    lo = f"({zoom} && {zoom}.start ? {zoom}.start[0] : 0)"
    hi = f"({zoom} && {zoom}.start ? {zoom}.start[1] : {_r(end)})"
    need = f"max(0, ceil(log({_r(end)} / max({hi} - {lo}, 1e-9)) / log({LEVEL_FACTOR}) - 1e-9))"
    return [{"name": f"lo{index}", "expr": lo}, {"name": f"hi{index}", "expr": hi},
            {"name": f"need{index}", "expr": need}]  # fmt: skip


def _view_filter(index: int, rows: Sequence[Mapping[str, Any]]) -> list[Spec]:
    """The transform that keeps the rows a zoomed view draws: those of the zoom level its span
    asks for (the series' finest once narrow enough) that reach into it (a step line's row,
    with ``u``, until the next row of its level). The y scales are fitted to these rows, so
    they refit to what is in view as the time axis zooms and pans. One short test per row:
    the view's range and level are parameters (:func:`_view_signals`), the series' finest
    level and each row's reach are in its data."""
    finest = max((int(r.get("lv", 0)) for r in rows), default=0)
    until = "datum.u" if rows and "u" in rows[0] else "datum.t"
    test = f"{until} >= lo{index} && datum.t <= hi{index}"
    if finest:
        test = f"datum.lv == min({finest}, need{index}) && {test}"
    return [{"filter": test}]


#: the window panel's lines are drawn in this order: cwnd last, on top of bytes in flight
LINE_ORDER: Final[tuple[str, ...]] = (
    "ssthresh_bytes",
    "bytes_in_flight",
    "cwnd_bytes",
    "min_rtt_ms",
    "smoothed_rtt_ms",
    "pacing_rate_bps",
)


def _lines_layers(
    series: ConnectionSeries,
    columns: Sequence[str],
    metrics: Sequence[str],
    *,
    points: int,
    index: int,
    static: bool,
) -> list[Spec]:
    """One layer per metric, cwnd drawn last (on top: it would vanish under bytes in flight
    wherever the sender is window-limited) and thicker."""
    names = [LINE_NAMES[m] for m in metrics]
    end = series.end_ms
    layers = []
    for column in sorted(columns, key=LINE_ORDER.index):
        times, values = series.lines[column]
        if times and times[-1] < end:  # the last value holds until the trace ends
            times, values = [*times, end], [*values, values[-1]]
        rows = _rows_in_view(times, values, points=points, end=end, static=static, step=True,
                             mark=_marker(series, "metric", column=column))  # fmt: skip
        layer: Spec = {
            "name": f"c{index}r_{column}",
            "data": {"values": rows},
            "mark": {"type": "line", "interpolate": "step-after", "clip": True,
                     "strokeWidth": 2.4 if column == "cwnd_bytes" else 1.5},
            "encoding": {
                "x": {"field": "t", "type": "quantitative"},
                "y": {"field": "v", "type": "quantitative"},
                "stroke": {
                    "datum": LINE_NAMES[column],
                    "type": "nominal",
                    "title": "line",
                    "scale": {"domain": names, "range": [LINE_COLOURS[m] for m in metrics]},
                },
                "strokeDash": {
                    "datum": LINE_NAMES[column],
                    "type": "nominal",
                    "title": "line",
                    "scale": {
                        "domain": names,
                        "range": [[6, 3] if m in DASHED else [1, 0] for m in metrics],
                    },
                },
                "tooltip": [{"field": "t", "title": "time (ms)"},
                            {"field": "v", "title": LINE_NAMES[column], "format": ",.4~r"}],
            },
        }  # fmt: skip
        if not static:
            layer["transform"] = _view_filter(index, rows)
        layers.append(layer)
    return layers


def _marker(
    series: ConnectionSeries, kind: str, *, column: str | None = None
) -> Callable[[float, float], int] | None:
    """The record of each row of a series (:func:`quicsm.render.mark_records.record`), by its
    time and value (a packet number for ``sent``); None when the records were not read."""
    records = series.records
    if records is None:
        return None
    if kind == "sent":
        return lambda t, v: record(records, kind, t, number=(int(v), int(v)))
    return lambda t, v: record(records, kind, t, column=column)


def _samples_layer(series: ConnectionSeries, *, points: int, index: int, static: bool) -> Spec:
    times, values = series.rtt_samples
    rows = _rows_in_view(times, values, points=points, end=series.end_ms, static=static,
                         mark=_marker(series, "metric", column="latest_rtt_ms"))  # fmt: skip
    layer: Spec = {
        "name": f"c{index}r_rtt_sample",
        "data": {"values": rows},
        "mark": {"type": "circle", "size": 9, "opacity": 0.55, "color": RTT_SAMPLE_COLOUR,
                 "clip": True},
        "encoding": {"x": {"field": "t", "type": "quantitative"},
                     "y": {"field": "v", "type": "quantitative"},
                     "tooltip": [{"field": "t", "title": "time (ms)"},
                                 {"field": "v", "title": "RTT sample (ms)"}]},
    }  # fmt: skip
    if not static:
        layer["transform"] = _view_filter(index, rows)
    return layer


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
                if series.records is not None and columns is None:  # the first event's
                    what = "pto" if kind == "pto" else "lost"
                    rows[-1]["r"] = record(series.records, what, first)
    y = {"field": "row", "type": "nominal", "title": None, "sort": order,
         "scale": {"domain": order}, "axis": {"labelLimit": 300}}  # fmt: skip
    index = int(name[1:].split("p")[0])
    layers: list[Spec] = [
        {**_bands_layer(series, states, columns=columns, index=index), "name": name}
    ]
    for kind in kinds:
        shape, colour, filled = EVENT_MARKS[kind]
        layers.append(
            {
                "name": f"c{index}r_ev_{kind}",
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
                # the middle of the panel, whatever width the page gives it
                "encoding": {"x": {"value": {"expr": "width / 2"}}, "y": y,
                             "text": {"field": "text"}},
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
    times, numbers = p.sent
    label = {k: v[0] for k, v in PACKET_MARKS.items()}
    static = columns is not None
    sent = _rows_in_view(times, numbers, points=points, end=end, static=static,
                         mark=_marker(series, "sent"))  # fmt: skip
    at, top = list(p.largest_acked[0]), list(p.largest_acked[1])
    if at and at[-1] < end:
        at, top = [*at, end], [*top, top[-1]]
    acked = _rows_in_view(at, top, points=points, end=end, static=static, step=True,
                          mark=_marker(series, "ack"))  # fmt: skip
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
            if not static:  # drawn in every zoom level where it falls in view
                marks[-1]["lv"] = 0
                if series.records is not None:  # a click shows the mark's first loss event
                    marks[-1]["r"] = record(series.records, "lost", first, number=(lo, hi))
    domain = [label[k] for k in PACKET_MARKS]
    x = {"field": "t", "type": "quantitative"}
    y = {"field": "v", "type": "quantitative", "title": None, "axis": {"format": "~s"},
         "scale": {"zero": static}}  # fmt: skip
    index = int(name[1:].split("p")[0])
    legend = {
        "shape": {"field": "kind", "type": "nominal", "title": "packets",
                  "scale": {"domain": domain, "range": [v[1] for v in PACKET_MARKS.values()]}},
        "color": {"field": "kind", "type": "nominal", "title": "packets",
                  "scale": {"domain": domain, "range": [v[2] for v in PACKET_MARKS.values()]}},
    }  # fmt: skip
    layers: list[Spec] = [
        {**_bands_layer(series, states, columns=columns, index=index), "name": name},
        {"name": f"c{index}r_sent", "data": {"values": sent},
         "transform": [] if static else _view_filter(index, sent),
         "mark": {"type": "point", "filled": True, "size": 8, "opacity": 1, "clip": True},
         "encoding": {"x": x, "y": y,
                      # the kind as a constant of the layer, not a field of each row
                      **{k: {**{a: b for a, b in v.items() if a != "field"},
                             "datum": label["sent"]} for k, v in legend.items()},
                      "tooltip": [{"field": "t", "title": "time (ms)"},
                                  {"field": "v", "title": "packet number"}]}},
        {"name": f"c{index}r_acked", "data": {"values": acked},
         "transform": [] if static else _view_filter(index, acked),
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
            {"name": f"c{index}r_{kind}", "data": {"values": rows},
             "transform": [] if static else _view_filter(index, rows),
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
             "transform": [] if static else _view_filter(index, rows),
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


#: the byte-offset panel's marks: stream data sent, acknowledged, declared lost; its lines: the
#: connection's and the stream's flow-control limits
STREAM_COLOURS: Final[dict[str, str]] = {
    "sent": RTT_SAMPLE_COLOUR,
    "acked": "#00473b",
    "lost": "#a50f15",
    "max_data": "#252525",
    "max_stream_data": "#54278f",
}


def _streams_panel(
    streams: StreamTimeline,
    *,
    bands: Spec,
    name: str,
    index: int,
    end: float,
    points: int,
    static: bool,
    records: TraceRecords | None = None,
) -> Spec:
    """The data of the connection's main stream by byte offset (y: where in the stream): a
    dot per STREAM frame when sent, another when an ACK first covered its packet, a cross
    when its packet was declared lost; the receiver's flow-control limits (MAX_DATA for the
    connection, MAX_STREAM_DATA for the stream) as step lines, where the trace logs them."""
    x = {"field": "t", "type": "quantitative"}
    y = {"field": "v", "type": "quantitative", "title": None, "axis": {"format": "~s"},
         "scale": {"zero": static}}  # fmt: skip
    f = streams.frames

    def mark(kind: str) -> Callable[[float, float], int] | None:
        if records is None or static:
            return None
        if kind == "sent":
            return lambda t, o: record(records, "sent", t, offset=int(o))
        return lambda t, o: record(records, "ack" if kind == "acked" else kind, t)

    def dots(kind: str, pairs: list[tuple[float, int]], what: str) -> Spec:
        pairs.sort()
        rows = _rows_in_view([t for t, _ in pairs], [o for _, o in pairs], points=points,
                             end=end, static=static, mark=mark(kind))  # fmt: skip
        return {"name": f"c{index}r_stream_{kind}", "data": {"values": rows},
                "transform": [] if static else _view_filter(index, rows),
                "mark": {"type": "circle", "size": 10, "opacity": 0.8,
                         "color": STREAM_COLOURS[kind], "clip": True},
                "encoding": {"x": x, "y": y,
                             "tooltip": [{"field": "t", "title": f"{what} (ms)"},
                                         {"field": "v", "title": "stream offset (bytes)"}]},
                }  # fmt: skip

    sent = [(t, off) for t, off, _, _ in f]
    acked = [(a, o) for (_, o, _, _), a in zip(f, streams.acked_at, strict=True) if a is not None]
    lost = [(t, o) for (_, o, _, _), t in zip(f, streams.lost_at, strict=True) if t is not None]
    layers: list[Spec] = [{**bands, "name": name}, dots("sent", sent, "sent"),
                          dots("acked", acked, "acknowledged")]  # fmt: skip
    if lost:
        crosses = [{"t": _r(t), "v": o, "lv": 0} for t, o in sorted(lost)]
        if records is not None and not static:
            for row in crosses:
                row["r"] = record(records, "lost", row["t"])
        layers.append(
            {"name": f"c{index}r_stream_lost", "data": {"values": crosses},
             "transform": [] if static else _view_filter(index, crosses),
             "mark": {"type": "point", "shape": "cross", "filled": True, "size": 60,
                      "color": STREAM_COLOURS["lost"], "clip": True},
             "encoding": {"x": x, "y": y,
                          "tooltip": [{"field": "t", "title": "declared lost (ms)"},
                                      {"field": "v", "title": "stream offset (bytes)"}]}}
        )  # fmt: skip
    parts = [f"stream {streams.stream_id} by byte offset: dots sent (grey), acknowledged "
             "(green)" + (", crosses declared lost" if lost else "")]  # fmt: skip
    for kind, label, limits, dash in (
        ("max_data", "MAX_DATA (connection limit, dashed)", streams.max_data, [6, 3]),
        ("max_stream_data", "MAX_STREAM_DATA (stream limit)", streams.max_stream_data, [1, 0]),
    ):
        if not limits:
            continue
        ts, vs = [t for t, _ in limits], [float(m) for _, m in limits]
        if ts[-1] < end:
            ts, vs = [*ts, end], [*vs, vs[-1]]
        rows = _rows_in_view(ts, vs, points=points, end=end, static=static, step=True,
                             mark=mark("limit"))  # fmt: skip
        layers.append(
            {"name": f"c{index}r_{kind}", "data": {"values": rows},
             "transform": [] if static else _view_filter(index, rows),
             "mark": {"type": "line", "interpolate": "step-after", "strokeWidth": 1.6,
                      "strokeDash": dash, "color": STREAM_COLOURS[kind], "clip": True},
             "encoding": {"x": x, "y": y,
                          "tooltip": [{"field": "t", "title": "time (ms)"},
                                      {"field": "v", "title": label.split(" (")[0]}]}}
        )  # fmt: skip
        parts.append(label)
    if not (streams.max_data or streams.max_stream_data):
        parts.append("flow-control limits: none logged")
    if streams.other_streams:
        n = streams.other_streams
        parts.append(f"{n} other stream{'s' * (n != 1)} not drawn")
    if not streams.losses_here:
        parts.append("losses are declared by the data's sender: not in this log")
    return {
        "width": PLOT_WIDTH,
        "height": PANEL_HEIGHT,
        "title": {"text": "; ".join(parts), "fontSize": 12, "fontWeight": "normal"},
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


def _band_labels(series: ConnectionSeries, *, end: float, name: str) -> Spec:
    """The state's name on each band wide enough to hold it, along the panel's top edge: a
    static drawing has no hover, and in greyscale the bands' colours do not tell states apart."""
    px = PLOT_WIDTH / max(end, 1e-3)
    rows = [
        {"t": _r((a + b) / 2), "state": st}
        for a, b, st in pixel_bands(series.bands, end=max(end, 1e-3), columns=PLOT_WIDTH)
        if (b - a) * px >= 6.5 * len(st) + 6
    ]
    return {
        "name": name,
        "data": {"values": rows},
        "mark": {"type": "text", "baseline": "top", "fontSize": 10, "color": "#222222",
                 "clip": True},
        "encoding": {"x": {"field": "t", "type": "quantitative"}, "y": {"value": 3},
                     "text": {"field": "state"}},
    }  # fmt: skip


#: how far above the largest value that bounds it an axis reaches
AXIS_HEADROOM: Final[float] = 1.1


def axis_top(series: ConnectionSeries, panel: int) -> tuple[float | None, str]:
    """The top of panel ``panel``'s y axis when a value would squash the rest, and what the
    panel says about it (else None, ""). A line is drawn at the axis's top where it is above:
    ssthresh above the largest cwnd or bytes in flight (ssthresh starts "infinite", RFC 9002
    section 7.3.1, and some producers log a sentinel for it); smoothed or minimum RTT above
    the largest RTT sample (both are made of samples; above them is a value from before the
    first sample, such as the 333 ms initial RTT of RFC 9002 section 6.2.2). Hover shows the
    value itself."""

    def peak(column: str) -> float:
        return max(series.lines[column][1], default=0.0) if column in series.lines else 0.0

    if panel == 0:
        bound = max(peak("cwnd_bytes"), peak("bytes_in_flight"))
        over, what = peak("ssthresh_bytes"), "ssthresh"
    elif panel == 1:
        bound = max(series.rtt_samples[1], default=0.0)
        over, what = max(peak("smoothed_rtt_ms"), peak("min_rtt_ms")), "RTT estimates"
    else:
        return None, ""
    if bound <= 0 or over <= bound * AXIS_HEADROOM:
        return None, ""
    return bound * AXIS_HEADROOM, f"; {what} above the axis drawn at its top (hover: value)"


def _rectangle_zoom(panels: list[Spec], index: int) -> list[Spec]:
    """A parameter per panel with a numeric y axis, ``ry<connection>_<panel>``, that overrides
    the panel's y domain when set: the page's shift-drag (a rectangle zoom) sets it and the
    time zoom together, a double-click clears it (the y axis refits to what is in view)."""
    out: list[Spec] = []
    for k, panel in enumerate(panels):
        name = f"ry{index}_{k}"
        numeric = False
        for layer in panel["layer"][1:]:
            y = layer.get("encoding", {}).get("y")
            if isinstance(y, dict) and y.get("type") == "quantitative" and "field" in y:
                layer["encoding"]["y"] = {
                    **y,
                    "scale": {**y.get("scale", {}), "domainRaw": {"expr": name}},
                }
                numeric = True
        if numeric:
            out.append({"name": name, "value": None})
    return out


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
        layers = [{**_bands_layer(series, states, columns=band_columns, index=index),
                   "name": f"c{index}p{i}"}]  # fmt: skip
        if has_samples:
            layers.append(_samples_layer(series, points=points, index=index, static=static))
        if columns:
            layers += _lines_layers(
                series, columns, metrics, points=points, index=index, static=static
            )
        top, note = axis_top(series, i)
        # a value above the axis is drawn at its top (``y``, set here); hover shows ``v``
        y: Spec = {"field": "v" if top is None else "y", "type": "quantitative", "title": None,
             "axis": {"format": "~s" if i != 1 else ",~r"}}  # fmt: skip
        if i == 1:  # RTTs: the axis spans the values (from zero, 36 ms of jitter is a line)
            y["scale"] = {"zero": False}
        if static and not panels:  # the first panel names its bands (no hover on paper)
            layers.append(_band_labels(series, end=end, name=f"c{index}labels"))
        for layer in layers[1:]:
            if str(layer.get("name", "")).endswith("labels"):
                continue
            layer["encoding"]["y"] = y
            if top is not None:
                layer["data"] = {"values": [{**r, "y": min(r["v"], _r(top))}
                                            for r in layer["data"]["values"]]}  # fmt: skip
        panels.append(
            {
                "width": PLOT_WIDTH,
                "height": PANEL_HEIGHT,
                "title": {"text": name + note, "fontSize": 12, "fontWeight": "normal"},
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
                    {**_bands_layer(series, states, columns=band_columns, index=index),
                     "name": f"c{index}pn"}
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
    if series.packets is not None and series.packets.streams is not None:
        panels.append(
            _streams_panel(
                series.packets.streams,
                bands=_bands_layer(series, states, columns=band_columns, index=index),
                name=f"c{index}ps",
                index=index,
                end=end,
                points=points,
                static=static,
                records=series.records,
            )
        )
    panels.append(
        _events_panel(series, name=f"c{index}pe", end=end, states=states, columns=band_columns)
    )
    for panel in panels:  # a layer with nothing to draw costs the page a dataflow all the same
        panel["layer"] = [panel["layer"][0]] + [
            layer for layer in panel["layer"][1:] if layer.get("data", {}).get("values") != []
        ]
    views = [p["layer"][0]["name"] for p in panels]
    params: list[Spec] = [
        {"name": f"zoom{index}", "select": {"type": "interval", "encodings": ["x"]},
         "bind": "scales", "views": views}
    ]  # fmt: skip
    if not static:
        params += _view_signals(index, end) + _rectangle_zoom(panels, index)
        panels.append(_overview(series, states=states, index=index, end=end))
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
        "params": params,
        "resolve": {"scale": {"x": "independent", "fill": "shared", "stroke": "shared",
                              "strokeDash": "shared", "color": "shared", "shape": "shared"}},
    }  # fmt: skip


#: height of the overview strip under a connection's panels, px
OVERVIEW_HEIGHT: Final[int] = 26


def _overview(series: ConnectionSeries, *, states: Sequence[str], index: int, end: float) -> Spec:
    """The brush overview: the whole connection's state bands in a thin strip (never zoomed),
    the range the panels show drawn over it (it follows every zoom and pan), and a drag along
    it zooms the panels to the dragged range (the page's script, on the layer named
    ``c<index>ov``)."""
    # the panels' band rows (one dataset in the page), at their coarsest level: whole trace
    bands = _bands_layer(series, states, index=index)
    if "transform" in bands:
        bands["transform"] = [{"filter": "datum.lv == 0"}]
    window = {  # its row's t only satisfies the panel's time encoding; lo, hi are the view's
        "data": {"values": [{"t": 0}]},
        "mark": {"type": "rect", "fill": "#1d2330", "fillOpacity": 0.12, "stroke": "#1d2330",
                 "strokeWidth": 1.5},
        "encoding": {"x": {"datum": {"expr": f"lo{index}"}, "type": "quantitative"},
                     "x2": {"datum": {"expr": f"hi{index}"}}},
    }  # fmt: skip
    return {
        "width": PLOT_WIDTH,
        "height": OVERVIEW_HEIGHT,
        "title": {
            "text": "overview: the range shown above (drag here to choose it)",
            "fontSize": 12,
            "fontWeight": "normal",
        },
        "layer": [{**bands, "name": f"c{index}ov"}, window],
        "encoding": {"x": {**_x(None, (0.0, end)), "axis": None}},
    }


def _share_data(spec: Spec) -> Spec:
    """``spec`` with inline data that occurs more than once (a connection's state bands behind
    each of its panels) stored once, as a named dataset. Only lists as long as another are
    compared (as JSON text): the long series, each of its own length, are not written out."""
    lists: list[list[Any]] = []

    def collect(node: Any) -> None:
        if isinstance(node, list):
            for n in node:
                collect(n)
        elif isinstance(node, dict):
            data = node.get("data")
            if isinstance(data, dict) and isinstance(data.get("values"), list) and data["values"]:
                lists.append(data["values"])
            for k, v in node.items():
                if k != "data":
                    collect(v)

    collect(spec)
    lengths: dict[int, int] = {}
    for values in lists:
        lengths[len(values)] = lengths.get(len(values), 0) + 1
    text_of: dict[int, str] = {}  # id of a list -> its JSON text, for lists that may repeat
    seen: dict[str, int] = {}
    for values in lists:
        if lengths[len(values)] > 1 and id(values) not in text_of:
            text_of[id(values)] = json.dumps(values, sort_keys=True, separators=(",", ":"))
        if id(values) in text_of:
            seen[text_of[id(values)]] = seen.get(text_of[id(values)], 0) + 1
        # (a list met twice by identity counts twice, as the same text met twice would)

    def visit(node: Any) -> Any:
        if isinstance(node, list):
            return [visit(n) for n in node]
        if not isinstance(node, dict):
            return node
        data = node.get("data")
        if isinstance(data, dict) and isinstance(data.get("values"), list) and data["values"]:
            text = text_of.get(id(data["values"]))
            if text is not None and seen.get(text, 0) > 1:
                names.setdefault(text, (f"shared{len(names)}", data["values"]))
                node = {**node, "data": {"name": names[text][0]}}
        return {k: (v if k == "data" else visit(v)) for k, v in node.items()}

    names: dict[str, tuple[str, list[Any]]] = {}
    out = visit(spec)
    if names:
        out["datasets"] = {name: values for name, values in names.values()}
    return out


def connections_spec(
    series: Sequence[ConnectionSeries], *, points: int = COLUMNS, static: bool = False
) -> Spec:
    """Several connections as small multiples, one below the other, each on its own time axis
    and zoomed on its own."""
    return _share_data(_connections_spec(series, points=points, static=static))


def _connections_spec(series: Sequence[ConnectionSeries], *, points: int, static: bool) -> Spec:
    if len(series) == 1:
        return {**connection_spec(series[0], points=points, static=static), "config": CONFIG}
    states = list(dict.fromkeys(st for s in series for st in s.states))
    metrics = [c for _, cols in PANELS for c in cols if any(c in s.lines for s in series)]
    specs = [
        connection_spec(s, points=points, index=i, states=states, metrics=metrics, static=static)
        for i, s in enumerate(series)
    ]
    # every connection's parameters at the top: Vega-Lite defines a nested concatenation's
    # variable parameters nowhere (the page failed on the first one its filters read)
    params = [p for spec in specs for p in spec.pop("params", [])]
    return {
        "params": params,
        "vconcat": specs,
        "spacing": 36,
        "resolve": {"scale": {"x": "independent", "y": "independent"}},
        "config": CONFIG,
    }


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
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    prefix = "q" + hashlib.sha256(text.encode()).hexdigest()[:10]
    svg = _draw_svg(spec, prefix)
    root = svg[: svg.index(">")]
    if ' class="marks"' in root:  # the renderer's own class on the root: keep one attribute
        return svg.replace(' class="marks"', f' class="{esc(css_class)}"', 1)
    return svg.replace("<svg ", f'<svg class="{esc(css_class)}" ', 1)


def _draw_svg(spec: Spec, prefix: str) -> str:
    """The renderer's ``<svg>`` element of ``spec``, its ids renamed after ``prefix``."""
    try:
        svg = str(_vl_convert().vegalite_to_svg(spec))
    except ValueError as exc:  # the renderer's message names what it could not draw
        raise QuicsmError(f"the chart could not be drawn: {exc}") from None
    svg = svg[svg.index("<svg") :]
    names = {old: f"{prefix}-{i}" for i, old in enumerate(dict.fromkeys(_ID.findall(svg)))}
    if names:
        refs = re.compile(
            r'(id="|url\(#|href="#)(' + "|".join(map(re.escape, names)) + r')(?=[")])'
        )
        svg = refs.sub(lambda m: m.group(1) + names[m.group(2)], svg)
    return svg


def to_vega(spec: Spec) -> Spec:
    """The Vega specification the Vega-Lite ``spec`` compiles to: an interactive page ships
    this, so the browser does not compile it at every load and redraw (a fifth to a third of
    a connection's drawing time). Compiled once per shape (the specification without its
    data) and kept in the cache directory (:mod:`quicsm.render.vega_compile`): the same chart
    drawn again starts no JavaScript engine."""
    from importlib.metadata import PackageNotFoundError, version

    from quicsm.engine.cache import default_cache_dir
    from quicsm.render.vega_compile import compile_vega

    def compile_spec(part: Spec) -> Spec:
        try:
            out: Spec = _vl_convert().vegalite_to_vega(part)
        except ValueError as exc:
            raise QuicsmError(f"the chart could not be drawn: {exc}") from None
        return out

    try:
        renderer = version("vl-convert-python")
    except PackageNotFoundError:  # pragma: no cover - installed without metadata
        return compile_spec(spec)
    return compile_vega(
        spec, compile_spec=compile_spec, version=renderer, cache_dir=default_cache_dir()
    )


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
    one-connection plot), and it depends only on the renderer's version: it is read from the
    installation's copy (:func:`install_bundle`, which ``scripts/setup`` runs), else from the
    cache directory (:func:`quicsm.engine.cache.default_cache_dir`) as
    ``vega-bundle-<version>.js``, else built and kept there. A copy that cannot be read (or
    whose digest does not match) and a cache that cannot be written only mean the bundle is
    built again."""
    from importlib.metadata import PackageNotFoundError

    from quicsm.engine.cache import default_cache_dir

    try:
        name = _bundle_name()
    except PackageNotFoundError:  # pragma: no cover - installed without metadata
        return str(_vl_convert().javascript_bundle())
    for kept in (_installed_bundle(name), default_cache_dir() / name):
        text = _read_bundle(kept)
        if text is not None:
            return text
    text = str(_vl_convert().javascript_bundle())
    with contextlib.suppress(OSError):  # a read-only or full cache: built again next time
        _write_bundle(default_cache_dir() / name, text)
    return text


def install_bundle() -> Path:
    """Builds the script bundle into the installation, beside this module (where
    :func:`_bundle` reads it first), unless a sound copy is there already; returns its path.
    ``scripts/setup`` runs it after installing quicsm, so that a first plot with an empty cache
    does not build it; an installation without it builds the bundle into the cache directory
    at its first plot instead."""
    path = _installed_bundle(_bundle_name())
    text = _read_bundle(path)
    if text is None:
        text = str(_vl_convert().javascript_bundle())
        _write_bundle(path, text)
    packed = _installed_bundle(_packed_name())
    if _read_packed(packed, text) is None:
        _write_bundle(packed, _packed_record(text))
    return path


def _bundle_name() -> str:
    from importlib.metadata import version

    return f"vega-bundle-{version('vl-convert-python')}.js"


def _packed_name() -> str:
    return _bundle_name() + ".packed"


def _packed_record(bundle: str) -> str:
    """What a kept packed bundle holds: a line naming the bundle (its digest) and the zlib that
    packed it, then the packed text (:func:`_packed`)."""
    return f"{_packed_source(bundle)}\n{_packed(bundle)}"


def _packed_source(bundle: str) -> str:
    import zlib

    return f"{_bundle_digest(bundle)} zlib {zlib.ZLIB_RUNTIME_VERSION} level 9"


def _read_packed(kept: Path, bundle: str) -> str | None:
    """The packed ``bundle`` kept at ``kept`` (digest-checked like the bundle), if it was packed
    from this bundle by this zlib (another zlib may pack the same text into other bytes)."""
    record = _read_bundle(kept)
    if record is None:
        return None
    source, _, packed = record.partition("\n")
    return packed if source == _packed_source(bundle) else None


def _installed_bundle(name: str) -> Path:
    return Path(__file__).with_name(name)


def _read_bundle(kept: Path) -> str | None:
    """The text (the bundle, a chart) kept at ``kept``, if its first line holds the digest of
    the rest."""
    try:
        digest, _, text = kept.read_text(encoding="utf-8").partition("\n")
    except (OSError, UnicodeDecodeError):
        return None
    return text if digest == _bundle_digest(text) else None


def _write_bundle(kept: Path, text: str) -> None:
    """``text`` kept at ``kept`` with its digest, whole or not at all (a reader never sees a
    partial copy)."""
    kept.parent.mkdir(parents=True, exist_ok=True)
    temp = kept.with_name(f".{kept.name}.{os.getpid()}")
    temp.write_text(f"{_bundle_digest(text)}\n{text}", encoding="utf-8")
    os.replace(temp, kept)


def _bundle_digest(text: str) -> str:
    return "// sha256 " + hashlib.sha256(text.encode()).hexdigest()


def _hash(script: str) -> str:
    digest = hashlib.sha256(script.encode()).digest()
    return "'sha256-" + base64.b64encode(digest).decode() + "'"


#: the page's one script: unpacks the libraries (gzip, base64, in #lib) and runs them as an
#: inline script allowed by its hash, unpacks the specification (#spec), fits the panels to the
#: page's width (``data-width`` of #chart: the width they were made for) and draws them with the
#: expression interpreter (no eval); redraws on a resize; a click on a mark that carries a raw
#: event shows it under the chart; exposes the view for scripted checks
_EMBED: Final[str] = (
    r"""(function () {
var chart = document.getElementById('chart');
function unpack(id) {
  var bytes = textToBytes(document.getElementById(id).textContent);
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return new Response(stream).text();
}
function wrap(text, px, size) {  // a title as lines that fit px at font size size
  var room = Math.floor(px / (0.58 * size));
  if (typeof text !== 'string' || text.length <= room) return text;
  var lines = [], rest = text;
  while (rest.length > room) {
    var cut = Math.max(rest.lastIndexOf(', ', room), rest.lastIndexOf('; ', room),
                       rest.lastIndexOf(': ', room));
    if (cut < room / 3) cut = rest.lastIndexOf(' ', room);
    if (cut <= 0) break;
    lines.push(rest.slice(0, cut + 1).trim());
    rest = rest.slice(cut + 1).trim();
  }
  lines.push(rest);
  return lines;
}
function fit(node, from, to) {
  if (Array.isArray(node)) { node.forEach(function (n) { fit(n, from, to); }); return; }
  if (!node || typeof node !== 'object') return;
  if (node.width === from) node.width = to;
  var title = node.title;
  if (title && typeof title === 'object' && title.text !== undefined) {
    title.text = wrap(title.text, to, title.fontSize || 14);
    if (title.subtitle) title.subtitle = wrap(title.subtitle, to, 12);
  }
  Object.keys(node).forEach(function (k) { if (k !== 'data') fit(node[k], from, to); });
}
var source = null, drawn = 0, tries = 0;
function room() {  // the figure's inner width (the chart's own box follows its drawing)
  var box = chart.parentNode, style = getComputedStyle(box);
  return box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
}
function draw(width, vertical) {
  var spec = unpackSpec(JSON.parse(source)), made = Number(chart.dataset.width || 0);
  var space = room();
  if (made && width > 200) fit(spec, made, width);
  var run = ++drawn;
  document.body.dataset.embedMs = String(Math.round(performance.now()));
  function patch(vg) {
    if (kept) {  // a redraw (the window resized) keeps the zoom: time range and y ranges
      (vg.signals || []).forEach(function (s) {
        if (kept[s.name] !== undefined && kept[s.name] !== null) s.value = kept[s.name];
      });
    }
    if (vertical) {
      vg.config = vg.config || {};
      vg.config.legend = vg.config.legend || {};
      vg.config.legend.layout = {bottom: {anchor: 'start', direction: 'vertical', margin: 6}};
      if (space < 1000) vg.config.legend.columns = 2;  // a narrow page: two entries a row
    }
    return vg;
  }
  return vegaEmbed('#chart', spec, {renderer: 'svg', actions: false, ast: true, patch: patch,
                                    tooltip: tooltip})
    .then(function (r) {
      if (run !== drawn) return;
      var excess = Math.ceil(chart.querySelector('svg').getBoundingClientRect().width - space);
      if (made && excess > 0 && tries < 3) {
        tries += 1;
        r.view.finalize();
        // legends side by side too wide: stack them; then narrow the panels
        if (!vertical) return draw(width, true);
        if (width - excess > 200) return draw(width - excess - 2, true);
      }
      if (window.quicsmView && window.quicsmView !== r.view) window.quicsmView.finalize();
      window.quicsmView = r.view;
      rectangle(r.view);
      r.view.addEventListener('click', function (event, item) { showRecord(event, item); });
      document.body.dataset.drawnMs = String(Math.round(performance.now()));
      document.body.dataset.draws = String(drawn);
      document.body.dataset.drawn = 'yes';
    });
}
// hover: a mark's tooltip is a constant list of [title, field, format] (the page's
// specification, see interactive_page), filled in here from the hovered item's row only
var tip = document.createElement('div');
tip.style.cssText = 'position:fixed;pointer-events:none;background:#fff;border:1px solid #999;' +
  'border-radius:4px;padding:4px 8px;font:13px/1.4 sans-serif;white-space:pre;z-index:10;' +
  'display:none';
document.body.appendChild(tip);
function shown(v, format) {
  if (typeof v !== 'number') return String(v);
  if (format === ',.4~r') return v.toLocaleString('en', {maximumSignificantDigits: 4});
  return v.toLocaleString('en', {maximumFractionDigits: 3});
}
function tooltip(handler, event, item, value) {
  var fields = null;
  try { fields = typeof value === 'string' && value[0] === '[' ? JSON.parse(value) : null; }
  catch (e) { fields = null; }
  if (!item || !item.datum || value == null || value === '') { tip.style.display = 'none'; return; }
  var lines = fields ? fields.filter(function (f) {
    var v = item.datum[f[1]]; return v !== undefined && v !== null && v !== '';
  }).map(function (f) { return f[0] + ': ' + shown(item.datum[f[1]], f[2]); }) : [String(value)];
  tip.textContent = lines.join('\n');
  tip.style.display = 'block';
  var x = event.clientX + 14, y = event.clientY + 14, w = tip.offsetWidth, h = tip.offsetHeight;
  if (x + w > window.innerWidth) x = Math.max(0, event.clientX - w - 8);
  if (y + h > window.innerHeight) y = Math.max(0, event.clientY - h - 8);
  tip.style.left = x + 'px'; tip.style.top = y + 'px';
}
// a click on a mark: the record it was drawn from (its row's r), from the page's table of
// records (#records, unpacked at the first click); on a line, the point left of the pointer
var records = null;
function pointOf(event, item) {
  var mark = item.mark;
  if (!mark || mark.marktype !== 'line' || !mark.items || !mark.items.length) return item;
  var x = 0;
  for (var g = mark.group; g; g = g.mark && g.mark.group) x += g.x || 0;
  var svg = chart.querySelector('svg').getBoundingClientRect(), pad = window.quicsmView.padding();
  var at = event.clientX - svg.left - pad.left - window.quicsmView.origin()[0] - x;
  var best = mark.items[0];
  mark.items.forEach(function (it) { if (it.x <= at + 0.5 && it.x >= best.x) best = it; });
  return best;
}
function showRecord(event, item) {
  var out = document.getElementById('raw');
  if (!item || !item.datum || !out || !item.mark || !item.mark.name) return;
  var point = pointOf(event, item), r = point.datum && point.datum.r;
  var conn = (item.mark.name.match(/^c(\d+)/) || [])[1];
  if (typeof r !== 'number' || conn === undefined) return;
  window.quicsmPicked = {conn: Number(conn), r: r, datum: point.datum, mark: item.mark.name};
  if (!records) records = document.getElementById('records') ?
    unpack('records').then(function (text) {
      var table = JSON.parse(text);
      Object.keys(table).forEach(function (k) { table[k].records = unpackRecords(table[k]); });
      return table;
    }) : Promise.resolve({});
  return records.then(function (table) {
    var of = table[conn], text = of && r >= 0 ? of.records[r] : undefined;
    out.textContent = text === undefined ?
      'no event of the trace drawn this mark (it carries a line on to the trace\'s end)' :
      of.file + ', trace ' + of.trace + ', ' + of.unit + ' ' + r + ':\n' + text;
    out.hidden = false;
    document.body.dataset.shown = String(r);
  });
}
var kept = null;  // the zoom of the view a redraw replaces: {signal name: value}
function keepZoom() {
  var v = window.quicsmView;
  if (!v) return null;
  return v.getState({signals: function (n) { return /^(zoom\d+_start|ry\d+_\d+)$/.test(n); },
                     data: function () { return false; }}).signals || null;
}
function first() {
  // legends side by side need about this much room; below it they stack from the start
  kept = keepZoom();
  var space = room();
  tries = 0;
  return draw(space - Number(chart.dataset.margin || 0), space < 1500);
}
// shift-drag: a rectangle zoom on one panel (its time range for every panel of the
// connection, its value range for that panel); double-click: back to the y axes that refit
function groups(item, x, y, out) {
  (item.items || []).forEach(function (child) {
    var cx = x + (child.x || 0), cy = y + (child.y || 0);
    var mark = child.mark;
    if (mark && mark.marktype === 'group' && /^concat_.*_group$/.test(mark.name)) {
      var ov = (child.items || []).filter(function (m) {
        return m.name && /^c\d+ov_marks$/.test(m.name); })[0];
      var nums = child.mark.name.match(/\d+/g).map(Number);
      out.push({name: child.mark.name.replace(/_group$/, ''), x: cx, y: cy,
                width: child.width, height: child.height,
                overview: !!ov, conn: ov ? Number(ov.name.match(/\d+/)[0]) : nums[0]});
    }
    if (child.items) groups(child, child.mark && child.mark.marktype === 'group' ? cx : x,
                            child.mark && child.mark.marktype === 'group' ? cy : y, out);
  });
  return out;
}
var rectView = null;  // the view the rectangle and overview drags act on: the latest drawn
function rectangle(view) {
  // installed once: a redraw (resize) only changes the view they act on (listeners of each
  // redraw would pile up, the first, of a finalized view, stopping the others)
  var installed = rectView !== null;
  rectView = view;
  if (installed) return;
  var start = null, box = document.createElement('div');
  box.style.cssText = 'position:absolute;border:1px dashed #333;background:rgba(0,0,0,.08);' +
    'pointer-events:none;display:none';
  chart.style.position = 'relative';
  chart.appendChild(box);
  function at(e) {
    var r = chart.querySelector('svg').getBoundingClientRect(), pad = rectView.padding(),
      o = rectView.origin();
    return [e.clientX - r.left - pad.left - o[0], e.clientY - r.top - pad.top - o[1]];
  }
  function begin(e) {
    if (!chart.querySelector('svg').contains(e.target)) return;
    if (!e.shiftKey) { overviewStart(e); return; }
    e.stopImmediatePropagation(); e.preventDefault();
    if (!start) start = {client: [e.clientX, e.clientY], at: at(e)};
  }
  window.addEventListener('pointerdown', begin, true);
  window.addEventListener('mousedown', begin, true);
  var over = null;  // a drag along an overview strip: {group, conn, from}
  function overviewStart(e) {
    var p = at(e), g = groups(rectView.scenegraph().root, 0, 0, []).filter(function (g) {
      return g.overview && p[0] >= g.x && p[0] <= g.x + g.width && p[1] >= g.y &&
        p[1] <= g.y + g.height;
    })[0];
    if (!g) return;
    e.stopImmediatePropagation(); e.preventDefault();
    over = {group: g, from: p[0]};
  }
  function overviewTo(e) {
    var g = over.group, xs = rectView.scale(g.name + '_x'), p = at(e);
    if (Math.abs(p[0] - over.from) < 3) return;
    var t = [xs.invert(over.from - g.x), xs.invert(p[0] - g.x)].sort(function (a, b) {
      return a - b; });
    var d = xs.domain();
    rectView.signal('zoom' + g.conn + '_start', [Math.max(t[0], d[0]), Math.min(t[1], d[1])]);
    rectView.runAsync();
  }
  window.addEventListener('pointermove', function (e) {
    if (over) { e.stopImmediatePropagation(); overviewTo(e); return; }
    if (!start) return;
    e.stopImmediatePropagation();
    var c = chart.getBoundingClientRect();
    box.style.display = 'block';
    box.style.left = (Math.min(start.client[0], e.clientX) - c.left) + 'px';
    box.style.top = (Math.min(start.client[1], e.clientY) - c.top) + 'px';
    box.style.width = Math.abs(e.clientX - start.client[0]) + 'px';
    box.style.height = Math.abs(e.clientY - start.client[1]) + 'px';
  }, true);
  window.addEventListener('pointerup', function (e) {
    if (over) { e.stopImmediatePropagation(); overviewTo(e); over = null; return; }
    if (!start) return;
    var a = start.at, b = at(e);
    start = null; box.style.display = 'none';
    e.stopImmediatePropagation();
    zoomTo(rectView, a, b);
  }, true);
  chart.addEventListener('dblclick', function () {
    var v = rectView;
    Object.keys(v.getState({signals: function (n) { return /^ry\d+_\d+$/.test(n); },
                            data: function () { return false; }}).signals || {})
      .forEach(function (n) { v.signal(n, null); });
    v.runAsync();
  });
}
function zoomTo(view, a, b) {  // a, b: corners in the view's coordinates
  var found = groups(view.scenegraph().root, 0, 0, []).filter(function (g) {
    return a[0] >= g.x && a[0] <= g.x + g.width && a[1] >= g.y && a[1] <= g.y + g.height;
  })[0];
  if (!found || Math.abs(b[0] - a[0]) < 3) return;
  var nums = found.name.match(/\d+/g).map(Number);
  var conn = nums.length > 1 ? nums[0] : 0, panel = nums[nums.length - 1];
  var xs = view.scale(found.name + '_x'), ys = view.scale(found.name + '_y');
  function up(p, q) { return p - q; }
  var t = [xs.invert(a[0] - found.x), xs.invert(b[0] - found.x)].sort(up);
  view.signal('zoom' + conn + '_start', t);
  var name = 'ry' + conn + '_' + panel;
  if (ys && typeof ys.invert === 'function' && Math.abs(b[1] - a[1]) >= 3) {
    try {
      var v = [ys.invert(a[1] - found.y), ys.invert(b[1] - found.y)].sort(up);
      view.signal(name, v);
    } catch (err) { /* no such parameter: a panel without a numeric y axis */ }
  }
  view.runAsync();
}
var timer = null;
window.addEventListener('resize', function () {
  clearTimeout(timer);
  timer = setTimeout(function () { if (source) first(); }, 200);
});
var spec = unpack('spec');  // inflated while the libraries are
unpack('lib').then(function (code) {
  var script = document.createElement('script');
  script.textContent = code;
  document.head.appendChild(script);
  document.body.dataset.libMs = String(Math.round(performance.now()));
  return spec;
}).then(function (text) { source = text; return first(); })
  .catch(function (e) { document.body.dataset.drawn = 'failed'; console.error(String(e)); });
"""
    + UNPACK_JS
    + "\n"
    + TEXT_TO_BYTES_JS
    + "\n"
    + UNPACK_RECORDS_JS
    + "\n})();"
)


#: gzip's level for what a page packs as it is made (its specification and records): 6, a
#: quarter of the CPU of 9 for 2% more bytes of them; the script bundle, packed once when
#: installed (:func:`install_bundle`) and about two thirds of a page, takes 9
PAGE_LEVEL: Final[int] = 6


def _packed(text: str, *, level: int = 9) -> str:
    """``text`` gzip-compressed at ``level`` (mtime 0: the same text, the same bytes), written
    with :func:`~quicsm.render.packed_data.bytes_to_text`."""
    import gzip

    return bytes_to_text(gzip.compress(text.encode(), compresslevel=level, mtime=0))


def unpacked(page: str, name: str) -> str:
    """The text an interactive page carries packed in its element ``name`` (``spec``,
    ``lib``, ``records``): :func:`_packed` undone."""
    import gzip

    found = re.search(rf'<script type="application/gzip" id="{re.escape(name)}">([^<]*)<', page)
    if found is None:
        raise QuicsmError(f"the page carries no {name}")
    return gzip.decompress(text_to_bytes(found.group(1))).decode()


@functools.cache
def _packed_bundle() -> str:
    """:func:`_bundle` packed for the page (about 45 ms of CPU: gzip at its best compression of
    a megabyte): read like the bundle from the installation's copy (:func:`install_bundle`),
    else from the cache directory, else packed and kept there."""
    from importlib.metadata import PackageNotFoundError

    from quicsm.engine.cache import default_cache_dir

    bundle = _bundle()
    try:
        name = _packed_name()
    except PackageNotFoundError:  # pragma: no cover - installed without metadata
        return _packed(bundle)
    for kept in (_installed_bundle(name), default_cache_dir() / name):
        packed = _read_packed(kept, bundle)
        if packed is not None:
            return packed
    packed = _packed(bundle)
    with contextlib.suppress(OSError):  # a read-only or full cache: packed again next time
        _write_bundle(default_cache_dir() / name, f"{_packed_source(bundle)}\n{packed}")
    return packed


def interactive_page(
    *,
    title: str,
    head_html: str,
    spec: Spec,
    tail_html: str = "",
    css: str = "",
    fit_width: int | None = None,
    fit_margin: int = 0,
    records: Mapping[str, Any] | None = None,
) -> str:
    """A self-contained HTML page: ``head_html``, the interactive chart, ``tail_html``.
    ``head_html`` and ``tail_html`` must be escaped already. The libraries and the
    specification travel gzip-compressed (a third of their size); ``fit_width``: every view
    of the specification that is this wide takes the page's width instead (less
    ``fit_margin`` px for axes and legends), redrawn when the window is resized. ``records``:
    connection index -> ``{file, trace, records: {number: text}}``, the events a click on a
    mark shows (packed like the specification, unpacked at the first click)."""
    bundle = _bundle()
    spec = _for_page(spec)
    csp = (
        f"default-src 'none'; script-src {_hash(bundle)} {_hash(_EMBED)}; "
        "style-src 'unsafe-inline'; img-src data:"
    )
    fit = ""
    if fit_width is not None:
        fit = f' data-width="{fit_width}" data-margin="{fit_margin}"'
    text = json.dumps(
        pack_spec(to_vega(spec)), ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )
    table = ""
    if records:
        raw = json.dumps(records, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        packed = _packed(raw, level=PAGE_LEVEL)
        table = f'<script type="application/gzip" id="records">{packed}</script>'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{css}</style></head><body><main>"
        f'{head_html}<figure><div id="chart"{fit}></div>'
        '<pre id="raw" hidden></pre></figure>'
        f"{tail_html}</main>"
        f'<script type="application/gzip" id="spec">{_packed(text, level=PAGE_LEVEL)}</script>'
        f"{table}"
        f'<script type="application/gzip" id="lib">{_packed_bundle()}</script>'
        f"<script>{_EMBED}</script></body></html>\n"
    )


#: the interactive page's drawing settings: no invalid-value filter (the rows are numbers
#: already), no per-mark ARIA description (a formatted sentence per dot, thousands of them: the
#: page's text and tables say what the chart shows)
_PAGE_CONFIG: Final[Spec] = {"aria": False, "mark": {"invalid": None}}


def _for_page(spec: Spec) -> Spec:
    """``spec`` as an interactive page draws it fast: :data:`_PAGE_CONFIG`, and each tooltip a
    constant (its fields' titles, names and formats, as JSON) that the page fills in from the
    hovered row, instead of an expression evaluated for every mark at every draw."""

    def visit(node: Any) -> Any:
        if isinstance(node, list):
            return [visit(n) for n in node]
        if not isinstance(node, dict):
            return node
        out = {k: (v if k in ("data", "datasets", "values") else visit(v))
               for k, v in node.items()}  # fmt: skip
        tip = out.get("tooltip")
        if isinstance(tip, list) and all(isinstance(f, dict) and "field" in f for f in tip):
            fields = [[f.get("title", f["field"]), f["field"], f.get("format", "")] for f in tip]
            out["tooltip"] = {"value": json.dumps(fields, separators=(",", ":"))}
        return out

    config = dict(spec.get("config", {}))
    for key, value in _PAGE_CONFIG.items():
        config[key] = {**config.get(key, {}), **value} if isinstance(value, dict) else value
    return {**visit(spec), "config": config}


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
main { max-width:1900px; margin:0 auto; padding:16px 20px 40px; }
h1 { font-size:19px; margin:8px 0 4px; overflow-wrap:anywhere; }
h2 { font-size:16px; margin:18px 0 4px; overflow-wrap:anywhere; }
p.quiet, ol.quiet { color:#5b6475; font-size:14px; margin:4px 0 12px; }
ol.quiet { padding-left:22px; overflow-wrap:anywhere; }
figure { margin:0; background:#fff; border:1px solid #dde2ea; border-radius:8px; padding:8px;
  overflow-x:auto; }
#raw { margin:8px 0 0; padding:8px; background:#f5f7fa; border:1px solid #dde2ea;
  font-size:13px; white-space:pre-wrap; overflow-wrap:anywhere; max-height:320px; overflow:auto; }
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
        "<table><tr><th>state</th><th>ms</th><th>share of time</th><th>visits</th></tr>"
        + rows
        + "</table>"
    )


def _summary(series: ConnectionSeries) -> str:
    def count(kind: str, word: str) -> str:
        if kind in series.not_logged:
            return f"{word}: not logged by this producer"
        return f"{len(series.events(kind))} {word}"

    facts = counts(series)
    if facts:  # the connection's account: the same numbers as every other view
        parts = [f"{series.end_ms:.1f} ms"]
        parts += [count_text(facts[k], COUNTS[k]) for k in COUNTS if k in facts]
        absent = [
            f"{SERIES[c]}: {series.account[c].note}"
            for c in SERIES
            if c in series.account and series.account[c].value is None
        ]
        if absent:
            parts.append("not drawn: " + ", ".join(absent))
        return "; ".join(parts)
    parts = [f"{series.end_ms:.1f} ms", count("packet_lost", "packets declared lost")]
    if series.spurious_ms:
        parts.append(f"{len(series.spurious_ms)} of them spurious (later acknowledged)")
    parts.append(count("pto", "probe timeouts"))
    return "; ".join(parts)


def _records_table(spec: Spec, series: Sequence[ConnectionSeries]) -> dict[str, Any]:
    """The records the marks of ``spec`` (before :func:`_share_data`) were drawn from, by
    connection: ``{index: {file, trace, ...}}``, the records as
    :func:`~quicsm.render.record_table.pack_records` packs them (rows' ``r``; the layers
    of connection ``i`` are named ``c<i>...``)."""
    wanted: dict[int, set[int]] = {}

    def visit(node: Any) -> None:
        if isinstance(node, list):
            for n in node:
                visit(n)
            return
        if not isinstance(node, dict):
            return
        found = re.match(r"c(\d+)", str(node.get("name", "")))
        values = node.get("data", {}).get("values") if isinstance(node.get("data"), dict) else None
        if found and isinstance(values, list):
            numbers = wanted.setdefault(int(found.group(1)), set())
            numbers.update(r["r"] for r in values if isinstance(r, dict) and r.get("r", -1) >= 0)
        for k, v in node.items():
            if k != "data":
                visit(v)

    visit(spec)
    table: dict[str, Any] = {}
    for i, s in enumerate(series):
        rec = s.records
        if rec is None or not wanted.get(i):
            continue
        # like events together (they compress better side by side), joined by the record
        # separator (no JSON string escapes)
        order = sorted(wanted[i])
        table[str(i)] = {"file": rec.file, "trace": rec.trace, "unit": rec.unit,
                         **pack_records(order, [rec.text_of(n) for n in order])}  # fmt: skip
    return table


def connection_page(series: Sequence[ConnectionSeries], *, points: int = COLUMNS) -> str:
    """``quicsm plot``'s HTML: the connections' interactive plot (wheel: zoom the time axis,
    drag: pan, double-click: reset), then the time in each state of each connection."""
    names = [f"{s.trace} ({s.vantage})" for s in series]
    title = names[0] if len(series) == 1 else f"{len(series)} connections"
    head = [f"<h1>{esc(title)}</h1>"]
    if len(series) == 1 and series[0].title:
        head.append(f'<p class="quiet">{esc(series[0].title)}</p>')
    if len(series) == 1:
        head.append(f'<p class="quiet">{esc(_summary(series[0]))}.</p>')
    else:  # each summary named by its connection, in the order drawn
        head.append(
            '<ol class="quiet">'
            + "".join(
                f"<li><b>{esc(name)}</b>"
                + (f" ({esc(s.title)})" if s.title else "")
                + f": {esc(_summary(s))}</li>"
                for name, s in zip(names, series, strict=True)
            )
            + "</ol>"
        )
    head.append(
        '<p class="quiet">Wheel over a panel zooms the time axis of every panel of its '
        "connection (the y axes refit to what is in view), drag pans, shift-drag zooms to a "
        "rectangle (its time range, and its value range on that panel), a drag along the overview "
        "strip under the panels chooses the range shown (the strip marks it), double-click resets; "
        "hover a band, line or mark for its values, click one for the event it was drawn from "
        "(the record as the file has it, with its number). "
        "Share of time: the time a state lasts over "
        "the connection's time, from its first event to its last.</p>"
    )
    tail = []
    for name, s in zip(names, series, strict=True):
        if len(series) > 1:
            tail.append(f"<h2>{esc(name)}</h2>")
        tail.append(_durations_table(s))
    spec = _connections_spec(series, points=points, static=False)
    return interactive_page(
        title=title,
        head_html="".join(head),
        spec=_share_data(spec),
        records=_records_table(spec, series),
        tail_html="".join(tail),
        css=_PLOT_CSS,
        fit_width=PLOT_WIDTH,
        fit_margin=FIT_MARGIN,
    )
