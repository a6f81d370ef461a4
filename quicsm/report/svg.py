"""Inline SVG charts of the comparison report, written as text (no plotting library, no
scripts, no external references).

Every string that can come from a trace (group names, labels, file names) passes through
:func:`esc`. Numbers are formatted with fixed precision so the output is deterministic.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from quicsm.render.colours import state_colour

#: colours of group A and group B in every chart
GROUP_COLOURS = ("#4e79a7", "#f28e2b")
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif"


def esc(text: object) -> str:
    """HTML/XML-escape any text (quotes included) for element content and attributes."""
    return html.escape(str(text), quote=True)


def _f(x: float) -> str:
    """Fixed coordinate formatting."""
    return f"{x:.1f}"


def _svg(width: float, height: float, body: list[str], *, title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_f(width)} {_f(height)}" '
        f'width="{_f(width)}" height="{_f(height)}" role="img" style="{FONT}">'
        f"<title>{esc(title)}</title>" + "".join(body) + "</svg>"
    )


def _text(
    x: float,
    y: float,
    text: str,
    *,
    size: int = 11,
    anchor: str = "start",
    fill: str = "#222",
    weight: str = "normal",
) -> str:
    return (
        f'<text x="{_f(x)}" y="{_f(y)}" font-size="{size}" text-anchor="{anchor}" '
        f'fill="{fill}" font-weight="{weight}">{esc(text)}</text>'
    )


# -- time-in-state bars -----------------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    label: str
    values: tuple[float, float]  # group A, group B (fractions)
    lows: tuple[float, float]
    highs: tuple[float, float]
    note: str  # "p < 0.001 *" etc.
    significant: bool


def time_in_state_bars(bars: Sequence[Bar], *, names: tuple[str, str]) -> str:
    """Horizontal bars of mean time-in-state per group with 95% CI whiskers."""
    left, right, width = 190.0, 170.0, 820.0
    plot = width - left - right
    row_h, top = 34.0, 34.0
    height = top + row_h * len(bars) + 30
    body: list[str] = []
    for i, (name, colour) in enumerate(zip(names, GROUP_COLOURS, strict=True)):
        x = left + i * 200
        body.append(f'<rect x="{_f(x)}" y="8" width="12" height="12" fill="{colour}"/>')
        body.append(_text(x + 18, 18, name))
    for tick in range(0, 101, 20):
        x = left + plot * tick / 100
        body.append(
            f'<line x1="{_f(x)}" y1="{_f(top - 4)}" x2="{_f(x)}" '
            f'y2="{_f(top + row_h * len(bars))}" stroke="#e3e3e3"/>'
        )
        body.append(_text(x, top + row_h * len(bars) + 16, f"{tick}%", size=10, anchor="middle"))
    for i, bar in enumerate(bars):
        y0 = top + i * row_h
        weight = "bold" if bar.significant else "normal"
        body.append(_text(left - 8, y0 + 19, bar.label, anchor="end", weight=weight))
        for g in range(2):
            v, lo, hi = bar.values[g], bar.lows[g], bar.highs[g]
            y = y0 + 4 + g * 13
            if v == v:
                body.append(
                    f'<rect x="{_f(left)}" y="{_f(y)}" width="{_f(plot * max(v, 0.0))}" '
                    f'height="11" fill="{GROUP_COLOURS[g]}"/>'
                )
            if lo == lo and hi == hi and hi > lo:
                x1 = left + plot * max(lo, 0.0)
                x2 = left + plot * min(hi, 1.0)
                ym = y + 5.5
                body.append(
                    f'<path d="M{_f(x1)},{_f(ym)}H{_f(x2)}M{_f(x1)},{_f(ym - 4)}V{_f(ym + 4)}'
                    f'M{_f(x2)},{_f(ym - 4)}V{_f(ym + 4)}" stroke="#222" stroke-width="1.2" '
                    f'fill="none"/>'
                )
            if v == v:
                body.append(_text(left + plot + 6, y + 10, f"{100 * v:.1f}%", size=10))
        body.append(
            _text(
                left + plot + 56,
                y0 + 16,
                bar.note,
                size=10,
                weight=weight,
                fill="#b00020" if bar.significant else "#555",
            )
        )
    return _svg(width, height, body, title="Time in state per group with 95% confidence intervals")


# -- dwell-time distributions -----------------------------------------------------------------


@dataclass(frozen=True)
class Box:
    label: str
    quantiles: tuple[list[float] | None, list[float] | None]  # p10, p25, p50, p75, p90 per group
    counts: tuple[int, int]
    note: str
    significant: bool


#: lowest value of the dwell-time axis (ms)
_MIN_DWELL_AXIS_MS = 0.01


def dwell_boxes(boxes: Sequence[Box], *, names: tuple[str, str]) -> str:
    """Box plots (p10-p25-median-p75-p90) of dwell time per state, log-scaled axis."""
    values = [q for b in boxes for qs in b.quantiles if qs for q in qs if q > 0]
    if not values:
        return "<p>No dwell times.</p>"
    # the axis starts at 10 us at the lowest: shorter dwells (state flapping within one event
    # batch) are drawn at the left edge instead of stretching the axis over decades
    lo = 10 ** math.floor(math.log10(max(min(values), _MIN_DWELL_AXIS_MS)))
    hi = 10 ** math.ceil(math.log10(max(values)))
    if hi <= lo:
        hi = lo * 10
    left, right, width = 190.0, 170.0, 820.0
    plot = width - left - right
    row_h, top = 34.0, 34.0
    height = top + row_h * len(boxes) + 30

    def xpos(v: float) -> float:
        v = min(max(v, lo), hi)
        return left + plot * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    body: list[str] = []
    for i, (name, colour) in enumerate(zip(names, GROUP_COLOURS, strict=True)):
        x = left + i * 200
        body.append(f'<rect x="{_f(x)}" y="8" width="12" height="12" fill="{colour}"/>')
        body.append(_text(x + 18, 18, name))
    decade = lo
    while decade <= hi * 1.0001:
        x = xpos(decade)
        body.append(
            f'<line x1="{_f(x)}" y1="{_f(top - 4)}" x2="{_f(x)}" '
            f'y2="{_f(top + row_h * len(boxes))}" stroke="#e3e3e3"/>'
        )
        body.append(
            _text(x, top + row_h * len(boxes) + 16, _ms_label(decade), size=10, anchor="middle")
        )
        decade *= 10
    for i, box in enumerate(boxes):
        y0 = top + i * row_h
        weight = "bold" if box.significant else "normal"
        body.append(_text(left - 8, y0 + 19, box.label, anchor="end", weight=weight))
        for g in range(2):
            qs = box.quantiles[g]
            if not qs:
                continue
            p10, p25, p50, p75, p90 = (xpos(max(q, lo)) for q in qs)
            y = y0 + 4 + g * 13
            c = GROUP_COLOURS[g]
            body.append(
                f'<path d="M{_f(p10)},{_f(y + 5.5)}H{_f(p90)}" stroke="{c}" stroke-width="1.5"/>'
            )
            body.append(
                f'<rect x="{_f(p25)}" y="{_f(y)}" width="{_f(max(p75 - p25, 1.0))}" height="11" '
                f'fill="{c}" fill-opacity="0.55" stroke="{c}"/>'
            )
            body.append(
                f'<path d="M{_f(p50)},{_f(y - 1)}V{_f(y + 12)}" stroke="#222" stroke-width="2"/>'
            )
        body.append(
            _text(
                left + plot + 6,
                y0 + 16,
                box.note,
                size=10,
                weight=weight,
                fill="#b00020" if box.significant else "#555",
            )
        )
    return _svg(width, height, body, title="Dwell time per state (p10, p25, median, p75, p90)")


def _ms_label(ms: float) -> str:
    if ms >= 1000:
        return f"{ms / 1000:g} s"
    return f"{ms:g} ms"


# -- congestion window over time --------------------------------------------------------------


@dataclass(frozen=True)
class Series:
    times_ms: list[float]
    cwnd_bytes: list[float | None]
    in_flight_bytes: list[float | None]
    losses_ms: list[float]
    ptos_ms: list[float]
    bands: list[tuple[float, float, str]]  # start_ms, end_ms, state


def _bytes_label(b: float) -> str:
    if b >= 1e6:
        return f"{b / 1e6:.3g} MB"
    if b >= 1e3:
        return f"{b / 1e3:.3g} kB"
    return f"{b:.0f} B"


def _nice_step(span: float, target: int = 6) -> float:
    raw = span / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _polyline(xs: list[float], ys: list[float | None], colour: str, width: float) -> str:
    """A step line (values hold until the next update); gaps where the value is missing."""
    parts: list[str] = []
    cmd = "M"
    prev_y: float | None = None
    for x, y in zip(xs, ys, strict=True):
        if y is None:
            cmd, prev_y = "M", None
            continue
        if prev_y is not None:
            parts.append(f"H{_f(x)}")
        parts.append(f"{cmd}{_f(x)},{_f(y)}" if cmd == "M" else f"V{_f(y)}")
        cmd, prev_y = "L", y
    if not parts:
        return ""
    return (
        f'<path d="{"".join(parts)}" fill="none" stroke="{colour}" stroke-width="{width}" '
        f'stroke-linejoin="round"/>'
    )


def congestion_chart(
    series: Series,
    *,
    title: str,
    max_points: int = 2500,
    t_max: float | None = None,
    y_top: float | None = None,
) -> str:
    """cwnd and bytes in flight over time, states as coloured bands, losses and PTOs marked.

    ``t_max`` (ms) and ``y_top`` (bytes) fix the axes, so that charts drawn side by side share
    them (default: this series' own extent)."""
    width, height = 820.0, 300.0
    left, right, top, bottom = 70.0, 20.0, 30.0, 64.0
    pw, ph = width - left - right, height - top - bottom
    t_end = max(
        [*series.times_ms, *(b[1] for b in series.bands), *series.losses_ms, *series.ptos_ms, 1.0]
    )
    t0 = min([*series.times_ms, *(b[0] for b in series.bands), 0.0])
    ys = [v for v in (*series.cwnd_bytes, *series.in_flight_bytes) if v is not None]
    y_max = max(ys) * 1.08 if ys else 1.0
    if t_max is not None:
        t_end = max(t_end, t_max)
    if y_top is not None:
        y_max = max(y_max, y_top * 1.08)

    def x(t: float) -> float:
        return left + pw * (t - t0) / (t_end - t0 if t_end > t0 else 1.0)

    def y(v: float) -> float:
        return top + ph * (1 - v / y_max)

    body: list[str] = [
        f'<rect x="{_f(left)}" y="{_f(top)}" width="{_f(pw)}" height="{_f(ph)}" fill="#fff" '
        f'stroke="#bbb"/>'
    ]
    seen_states: list[str] = []
    for start, end, state in series.bands:
        if end <= start:
            continue
        if state not in seen_states:
            seen_states.append(state)
        body.append(
            f'<rect x="{_f(x(start))}" y="{_f(top)}" width="{_f(max(x(end) - x(start), 0.5))}" '
            f'height="{_f(ph)}" fill="{state_colour(state)}" fill-opacity="0.28">'
            f"<title>{esc(state)} {start:.1f}–{end:.1f} ms</title></rect>"
        )
    step = _nice_step(y_max)
    v = 0.0
    while v <= y_max:
        body.append(
            f'<line x1="{_f(left)}" y1="{_f(y(v))}" x2="{_f(left + pw)}" y2="{_f(y(v))}" '
            f'stroke="#000" stroke-opacity="0.08"/>'
        )
        body.append(_text(left - 6, y(v) + 4, _bytes_label(v), size=10, anchor="end"))
        v += step
    tstep = _nice_step(t_end - t0)
    t = math.ceil(t0 / tstep) * tstep
    while t <= t_end:
        body.append(_text(x(t), top + ph + 14, f"{t:g}", size=10, anchor="middle"))
        t += tstep
    body.append(_text(left + pw / 2, top + ph + 28, "time (ms)", size=10, anchor="middle"))
    stride = max(1, len(series.times_ms) // max_points)
    idx = list(range(0, len(series.times_ms), stride))
    if series.times_ms and idx[-1] != len(series.times_ms) - 1:
        idx.append(len(series.times_ms) - 1)
    xs = [x(series.times_ms[i]) for i in idx]
    for values, colour, w in (
        (series.in_flight_bytes, "#1f77b4", 1.0),
        (series.cwnd_bytes, "#c0392b", 1.8),
    ):
        pts = [None if values[i] is None else y(values[i]) for i in idx]  # type: ignore[arg-type]
        body.append(_polyline(xs, pts, colour, w))
    for t_loss in series.losses_ms:
        cx, cy = x(t_loss), top + ph - 6
        body.append(
            f'<path d="M{_f(cx - 3)},{_f(cy - 3)}L{_f(cx + 3)},{_f(cy + 3)}M{_f(cx - 3)},'
            f'{_f(cy + 3)}L{_f(cx + 3)},{_f(cy - 3)}" stroke="#c0392b" stroke-width="1.3"/>'
        )
    for t_pto in series.ptos_ms:
        cx = x(t_pto)
        body.append(
            f'<path d="M{_f(cx - 4)},{_f(top + 2)}L{_f(cx + 4)},{_f(top + 2)}L{_f(cx)},'
            f'{_f(top + 9)}Z" fill="#111"/>'
        )
    # legend: lines and markers, then the states seen
    ly = top + ph + 54
    items: list[tuple[str, str]] = [
        ('<path d="M0,0H18" stroke="#c0392b" stroke-width="2"/>', "cwnd"),
        ('<path d="M0,0H18" stroke="#1f77b4" stroke-width="1.2"/>', "bytes in flight"),
        (
            '<path d="M6,-3L12,3M6,3L12,-3" stroke="#c0392b" stroke-width="1.3"/>',
            f"loss ({len(series.losses_ms)})",
        ),
        ('<path d="M5,-4L13,-4L9,3Z" fill="#111"/>', f"PTO ({len(series.ptos_ms)})"),
    ]
    items += [
        (
            f'<rect x="0" y="-6" width="18" height="11" fill="{state_colour(s)}" '
            f'fill-opacity="0.5"/>',
            s,
        )
        for s in seen_states
    ]
    lx = left
    lrow = 0
    for glyph, label in items:
        w = 26 + 6.2 * len(label) + 14
        if lx + w > width - right:
            lx, lrow = left, lrow + 1
        body.append(f'<g transform="translate({_f(lx)},{_f(ly - 16 + lrow * 16)})">{glyph}</g>')
        body.append(_text(lx + 24, ly - 16 + lrow * 16 + 4, label, size=10))
        lx += w
    body.append(_text(left, 18, title, size=12, weight="bold"))
    return _svg(width, height + 16 * lrow, body, title=title)


# -- scenario heatmap -------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    percent: float | None  # (mean_b - mean_a) / mean_a * 100
    significant: bool
    text: str  # second line: "p = 0.003" / "n.s." / "n=2 < 3: no test"
    counts: tuple[int, int]


def heatmap(
    rows: Sequence[str],
    cols: Sequence[str],
    cells: dict[tuple[str, str], Cell],
    *,
    row_label: str,
    col_label: str,
    title: str,
) -> str:
    """Fig. 6-style matrix: red where B is lower than A, blue where higher, white where the
    difference is not significant (or untested); the percent difference is printed in every
    cell that has both groups."""
    cw, ch = 118.0, 46.0
    left = 24.0 + max(7.0 * max((len(r) for r in rows), default=4), 7.0 * len(row_label), 60.0)
    top = 78.0
    width = max(left + cw * len(cols) + 20, 16.0 + 7.2 * len(title))
    height = top + ch * len(rows) + 20
    body: list[str] = [_text(8, 18, title, size=12, weight="bold")]
    body.append(
        _text(left + cw * len(cols) / 2, 44, col_label, size=11, anchor="middle", weight="bold")
    )
    body.append(_text(left - 8, top - 8, row_label, size=11, anchor="end", weight="bold"))
    for j, c in enumerate(cols):
        body.append(_text(left + cw * j + cw / 2, top - 8, c, size=11, anchor="middle"))
    for i, r in enumerate(rows):
        body.append(_text(left - 8, top + ch * i + ch / 2 + 4, r, size=11, anchor="end"))
        for j, c in enumerate(cols):
            cell = cells.get((r, c))
            x0, y0 = left + cw * j, top + ch * i
            fill = "#ffffff"
            ink = "#222"
            if cell is not None and cell.significant and cell.percent is not None:
                fill = _diverging(cell.percent)
                if abs(cell.percent) > 30:
                    ink = "#fff"
            body.append(
                f'<rect x="{_f(x0)}" y="{_f(y0)}" width="{_f(cw)}" height="{_f(ch)}" '
                f'fill="{fill}" stroke="#999"/>'
            )
            if cell is None:
                body.append(
                    _text(
                        x0 + cw / 2,
                        y0 + ch / 2 + 4,
                        "no traces",
                        size=10,
                        anchor="middle",
                        fill="#888",
                    )
                )
                continue
            big = "–" if cell.percent is None else f"{cell.percent:+.0f}%"
            body.append(
                _text(
                    x0 + cw / 2,
                    y0 + 19,
                    big,
                    size=13,
                    anchor="middle",
                    fill=ink,
                    weight="bold" if cell.significant else "normal",
                )
            )
            body.append(_text(x0 + cw / 2, y0 + 35, cell.text, size=9, anchor="middle", fill=ink))
    return _svg(width, height, body, title=title)


def _diverging(percent: float) -> str:
    """Red for negative (B lower), blue for positive, saturating at ±50%."""
    t = min(abs(percent) / 50.0, 1.0)
    lo = (255, 255, 255)
    hi = (192, 57, 43) if percent < 0 else (41, 98, 176)
    r, g, b = (round(lo[k] + (hi[k] - lo[k]) * (0.25 + 0.75 * t)) for k in range(3))
    return f"#{r:02x}{g:02x}{b:02x}"
