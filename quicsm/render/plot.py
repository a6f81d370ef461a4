"""One connection over time (``quicsm plot``): congestion window and bytes in flight, smoothed
and minimum RTT, and the pacing rate when the trace logs it, in panels sharing one time axis,
with the congestion state as coloured bands behind every panel, lost packets (×) and probe
timeouts (▼) marked.

:func:`connection_series` cuts one trace out of the transitions and metrics frames
(:func:`quicsm.extract.read.read_transitions`, :func:`quicsm.extract.read.read_metrics`);
:func:`plot_svg` draws it as SVG text and :func:`plot_html` wraps that in a self-contained page
(inline CSS, no script, no external reference). Both are pure functions of their input: the
same trace gives the same bytes. Long traces are reduced per pixel column to the first, lowest,
highest and last value, so every peak and dip survives.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import polars as pl

from quicsm.core.errors import InputError
from quicsm.render.colours import state_colour, tint

FONT: Final[str] = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif"
#: line colour of each plotted metric
LINE_COLOURS: Final[dict[str, str]] = {
    "cwnd_bytes": "#c0392b",
    "bytes_in_flight": "#1f77b4",
    "ssthresh_bytes": "#555555",
    "smoothed_rtt_ms": "#6a3d9a",
    "min_rtt_ms": "#2ca02c",
    "pacing_rate_bps": "#d35400",
}
LINE_NAMES: Final[dict[str, str]] = {
    "cwnd_bytes": "cwnd",
    "bytes_in_flight": "bytes in flight",
    "ssthresh_bytes": "ssthresh",
    "smoothed_rtt_ms": "smoothed RTT",
    "min_rtt_ms": "min RTT",
    "pacing_rate_bps": "pacing rate",
}
#: the panels, top to bottom: title, unit, metrics (a panel is drawn when one of them is logged)
PANELS: Final[tuple[tuple[str, str, tuple[str, ...]], ...]] = (
    ("window", "bytes", ("cwnd_bytes", "bytes_in_flight", "ssthresh_bytes")),
    ("RTT", "ms", ("smoothed_rtt_ms", "min_rtt_ms")),
    ("pacing rate", "bit/s", ("pacing_rate_bps",)),
)
DASHED: Final[frozenset[str]] = frozenset({"ssthresh_bytes", "min_rtt_ms"})


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
    title: str = ""

    @property
    def states(self) -> list[str]:
        return list(dict.fromkeys(s for _, _, s in self.bands))


def connection_series(
    transitions: pl.DataFrame, metrics: pl.DataFrame, trace: str, *, title: str = ""
) -> ConnectionSeries:
    """The series of trace id ``trace`` (``<file>#<n>``) from the two frames."""
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
    for _, _, columns in PANELS:
        for column in columns:
            if column not in updates.columns:
                continue
            part = updates.select("time_ms", column).drop_nulls()
            if part.height:
                lines[column] = (
                    [float(x) for x in part["time_ms"].to_list()],
                    [float(x) for x in part[column].to_list()],
                )
    return ConnectionSeries(
        trace=trace,
        vantage=str(tr["vantage"].cast(pl.String)[0]),
        end_ms=end,
        bands=bands,
        lines=lines,
        losses_ms=[float(x) for x in m.filter(pl.col("event") == "packet_lost")["time_ms"]],
        ptos_ms=[float(x) for x in m.filter(pl.col("event") == "pto")["time_ms"]],
        title=title,
    )


# -- drawing ----------------------------------------------------------------------------------


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _f(x: float) -> str:
    return f"{x:.1f}"


def _text(
    x: float, y: float, text: str, *, size: int = 11, anchor: str = "start", fill: str = "#222"
) -> str:
    return (
        f'<text x="{_f(x)}" y="{_f(y)}" font-size="{size}" text-anchor="{anchor}" '
        f'fill="{fill}">{_esc(text)}</text>'
    )


def nice_step(span: float, target: int = 5) -> float:
    """A round tick step (1, 2, 2.5 or 5 times a power of ten) giving about ``target`` ticks."""
    raw = span / max(target, 1)
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _unit_label(value: float, unit: str) -> str:
    if unit == "ms":
        return f"{value:g}"
    scale = 1000.0
    prefix = ("", "k", "M", "G")
    i = 0
    while abs(value) >= scale and i < len(prefix) - 1:
        value /= scale
        i += 1
    text = f"{value:.3g}"
    return f"{text} {prefix[i]}B" if unit == "bytes" else f"{text} {prefix[i]}bit/s"


def reduce_points(
    xs: Sequence[float], ys: Sequence[float], *, columns: int
) -> tuple[list[float], list[float]]:
    """At most four points per pixel column (first, lowest, highest, last, in time order);
    ``xs`` are already in pixels and sorted."""
    if len(xs) <= 4 * columns:
        return list(xs), list(ys)
    out_x: list[float] = []
    out_y: list[float] = []
    start = 0
    n = len(xs)
    while start < n:
        col = math.floor(xs[start])
        end = start
        while end < n and math.floor(xs[end]) == col:
            end += 1
        idx = range(start, end)
        lo = min(idx, key=lambda i: ys[i])
        hi = max(idx, key=lambda i: ys[i])
        for i in sorted({start, lo, hi, end - 1}):
            out_x.append(xs[i])
            out_y.append(ys[i])
        start = end
    return out_x, out_y


def _step_path(xs: Sequence[float], ys: Sequence[float]) -> str:
    """A step line: each value holds until the next update."""
    parts: list[str] = []
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if i == 0:
            parts.append(f"M{_f(x)},{_f(y)}")
        else:
            parts.append(f"H{_f(x)}V{_f(y)}")
    return "".join(parts)


def plot_svg(series: ConnectionSeries, *, width: float = 960.0) -> str:
    """The connection as one SVG (see the module docstring)."""
    left, right, top = 84.0, 24.0, 58.0 if series.title else 40.0
    panel_h, gap = 170.0, 22.0
    pw = width - left - right
    panels = [(t, u, [c for c in cols if c in series.lines]) for t, u, cols in PANELS]
    shown = [p for p in panels if p[2]]
    if not shown:
        shown = [("window", "bytes", [])]
    t0, t1 = 0.0, max(series.end_ms, 1e-3)

    def x(t: float) -> float:
        return left + pw * (t - t0) / (t1 - t0)

    body: list[str] = []
    ys0 = [top + i * (panel_h + gap) for i in range(len(shown))]
    bottom = ys0[-1] + panel_h
    # state bands behind every panel, one <title> each for hover
    for start, end, state in series.bands:
        if end <= start:
            continue
        colour = tint(state_colour(state), 0.3)
        for y0 in ys0:
            body.append(
                f'<rect class="band" x="{_f(x(start))}" y="{_f(y0)}" '
                f'width="{_f(max(x(end) - x(start), 0.4))}" height="{_f(panel_h)}" '
                f'fill="{colour}"><title>{_esc(state)}: {start:.1f}–{end:.1f} ms '
                f"({end - start:.1f} ms)</title></rect>"
            )
    # time grid and axis, shared by all panels
    step = nice_step(t1 - t0, 8)
    tick = 0.0
    while tick <= t1 + 1e-9:
        body.append(
            f'<line x1="{_f(x(tick))}" y1="{_f(top)}" x2="{_f(x(tick))}" y2="{_f(bottom)}" '
            'stroke="#000" stroke-opacity="0.08"/>'
        )
        body.append(_text(x(tick), bottom + 15, f"{tick:g}", size=10, anchor="middle"))
        tick += step
    body.append(_text(left + pw / 2, bottom + 32, "time since the trace's first event (ms)",
                      size=11, anchor="middle"))  # fmt: skip
    for (title, unit, columns), y0 in zip(shown, ys0, strict=True):
        values = [v for c in columns for v in series.lines[c][1]]
        vmax = max(values) * 1.08 if values and max(values) > 0 else 1.0

        def y(v: float, y0: float = y0, vmax: float = vmax) -> float:
            return y0 + panel_h * (1 - v / vmax)

        body.append(
            f'<rect x="{_f(left)}" y="{_f(y0)}" width="{_f(pw)}" height="{_f(panel_h)}" '
            'fill="none" stroke="#999"/>'
        )
        vstep = nice_step(vmax, 4)
        v = 0.0
        while v <= vmax:
            body.append(
                f'<line x1="{_f(left)}" y1="{_f(y(v))}" x2="{_f(left + pw)}" y2="{_f(y(v))}" '
                'stroke="#000" stroke-opacity="0.08"/>'
            )
            body.append(_text(left - 6, y(v) + 4, _unit_label(v, unit), size=10, anchor="end"))
            v += vstep
        label = f"{title} ({unit})" if unit == "ms" else title
        body.append(
            f'<text x="14" y="{_f(y0 + panel_h / 2)}" font-size="11" text-anchor="middle" '
            f'fill="#222" transform="rotate(-90 14 {_f(y0 + panel_h / 2)})">{_esc(label)}</text>'
        )
        if not columns:
            body.append(
                _text(left + pw / 2, y0 + panel_h / 2, "this trace logs no congestion window, "
                      "RTT or pacing rate", size=12, anchor="middle", fill="#666")
            )  # fmt: skip
        for column in reversed(columns):  # the first-named line on top
            times, vals = series.lines[column]
            px = [x(t) for t in times]
            py = [y(v) for v in vals]
            px, py = reduce_points(px, py, columns=int(pw))
            if px and px[-1] < x(t1):
                px.append(x(t1))
                py.append(py[-1])
            dash = ' stroke-dasharray="5,3"' if column in DASHED else ""
            body.append(
                f'<path class="line {column}" d="{_step_path(px, py)}" fill="none" '
                f'stroke="{LINE_COLOURS[column]}" stroke-width="1.5"{dash} '
                f'stroke-linejoin="round"><title>{_esc(LINE_NAMES[column])}</title></path>'
            )
    # losses (×) along the bottom of the first panel, PTOs (▼) along its top
    y_loss = ys0[0] + panel_h - 6
    for t in series.losses_ms:
        cx = x(t)
        body.append(
            f'<path class="loss" d="M{_f(cx - 3)},{_f(y_loss - 3)}L{_f(cx + 3)},{_f(y_loss + 3)}'
            f'M{_f(cx - 3)},{_f(y_loss + 3)}L{_f(cx + 3)},{_f(y_loss - 3)}" stroke="#c0392b" '
            f'stroke-width="1.3"><title>packet lost at {t:.1f} ms</title></path>'
        )
    for t in series.ptos_ms:
        cx = x(t)
        body.append(
            f'<path class="pto" d="M{_f(cx - 4)},{_f(ys0[0] + 2)}L{_f(cx + 4)},{_f(ys0[0] + 2)}'
            f'L{_f(cx)},{_f(ys0[0] + 9)}Z" fill="#111"><title>probe timeout at {t:.1f} ms'
            "</title></path>"
        )
    legend_y, rows = _legend(series, body, left=left, right=width - right, y=bottom + 54)
    title = f"{series.trace} ({series.vantage})"
    room = int((width - left - right) / 7.5)  # characters of 13 px bold text that fit
    body.append(
        f'<text x="{_f(left)}" y="22" font-size="13" font-weight="bold" fill="#222">'
        f"{_esc(_ellipsize(title, room))}</text>"
    )
    if series.title:
        body.append(_text(left, 40, _ellipsize(series.title, int(room * 1.15)), fill="#555"))
    if series.title:
        title += f" — {series.title}"
    height = legend_y + 16 * rows + 8
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="connection" viewBox="0 0 {_f(width)} '
        f'{_f(height)}" width="{_f(width)}" height="{_f(height)}" role="img" style="{FONT}">'
        f"<title>{_esc(title)}</title>" + "".join(body) + "</svg>"
    )


def _ellipsize(text: str, room: int) -> str:
    """``text`` cut to ``room`` characters, the middle replaced by an ellipsis (file names keep
    their start and their trace number)."""
    if len(text) <= room:
        return text
    keep = max(room - 1, 2)
    return text[: keep - keep // 2] + "…" + text[len(text) - keep // 2 :]


def _legend(
    series: ConnectionSeries, body: list[str], *, left: float, right: float, y: float
) -> tuple[float, int]:
    items: list[tuple[str, str]] = []
    for column in series.lines:
        dash = ' stroke-dasharray="5,3"' if column in DASHED else ""
        items.append(
            (
                f'<path d="M0,0H18" stroke="{LINE_COLOURS[column]}" stroke-width="2"{dash}/>',
                LINE_NAMES[column],
            )
        )
    items.append(
        (
            '<path d="M6,-3L12,3M6,3L12,-3" stroke="#c0392b" stroke-width="1.3"/>',
            f"packet lost ({len(series.losses_ms)})",
        )
    )
    items.append(
        ('<path d="M5,-4L13,-4L9,3Z" fill="#111"/>', f"probe timeout ({len(series.ptos_ms)})")
    )
    for state in series.states:
        items.append(
            (
                f'<rect x="0" y="-6" width="18" height="11" '
                f'fill="{tint(state_colour(state), 0.55)}" stroke="{state_colour(state)}"/>',
                state,
            )
        )
    lx, row = left, 0
    for glyph, label in items:
        w = 30 + 6.4 * len(label) + 12
        if lx + w > right and lx > left:
            lx, row = left, row + 1
        ly = y + row * 16
        body.append(f'<g transform="translate({_f(lx)},{_f(ly)})">{glyph}</g>')
        body.append(_text(lx + 24, ly + 4, label, size=11))
        lx += w
    return y, row + 1


_CSS = """
body { margin:0; background:#f5f7fa; color:#1d2330;
  font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; }
main { max-width:1000px; margin:0 auto; padding:16px 20px 40px; }
h1 { font-size:18px; margin:8px 0 4px; overflow-wrap:anywhere; }
p.quiet { color:#5b6475; font-size:13px; margin:4px 0 12px; }
figure { margin:0; background:#fff; border:1px solid #dde2ea; border-radius:8px; padding:8px; }
svg { max-width:100%; height:auto; display:block; }
table { border-collapse:collapse; font-size:13px; margin:14px 0; }
th, td { border-bottom:1px solid #dde2ea; padding:3px 10px; text-align:left; }
td.num { text-align:right; font-variant-numeric:tabular-nums; }
.swatch { display:inline-block; width:11px; height:11px; border-radius:2px; margin-right:6px;
  vertical-align:-1px; }
"""


def state_durations(series: ConnectionSeries) -> list[tuple[str, float, int]]:
    """(state, total ms, visits) in order of first visit."""
    totals: dict[str, list[float]] = {}
    for start, end, state in series.bands:
        entry = totals.setdefault(state, [0.0, 0])
        entry[0] += max(end - start, 0.0)
        entry[1] += 1
    return [(s, v[0], int(v[1])) for s, v in totals.items()]


def plot_html(series: ConnectionSeries) -> str:
    """A self-contained HTML page: the plot, then time in each state for this connection."""
    total = max(series.end_ms, 1e-9)
    rows = "".join(
        f'<tr><td><span class="swatch" style="background:{state_colour(s)}"></span>{_esc(s)}'
        f'</td><td class="num">{ms:.1f}</td><td class="num">{100 * ms / total:.1f}%</td>'
        f'<td class="num">{n}</td></tr>'
        for s, ms, n in state_durations(series)
    )
    title = f"{series.trace} ({series.vantage})"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body><main>"
        f"<h1>{_esc(title)}</h1>"
        + (f'<p class="quiet">{_esc(series.title)}</p>' if series.title else "")
        + f'<p class="quiet">{series.end_ms:.1f} ms; {len(series.losses_ms)} packets lost, '
        f"{len(series.ptos_ms)} probe timeouts. Hover a band, line or mark for details.</p>"
        f"<figure>{plot_svg(series)}</figure>"
        "<table><tr><th>state</th><th>ms</th><th>share</th><th>visits</th></tr>"
        + rows
        + "</table></main></body></html>\n"
    )
