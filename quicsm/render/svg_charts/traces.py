"""The report's representative traces as small multiples (:func:`traces_svg`), side by side, each
on its own axes (time from its start to its end, window from zero to its largest value): the
congestion state as coloured bands named where they are wide enough, cwnd and bytes in flight
as step lines, a tick at the bottom per packet declared lost, one legend below."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from quicsm.render.colours import LINE_COLOURS, LOSS_COLOUR, STATE_TINT, state_colour, tint
from quicsm.render.connection import pixel_bands, reduce_points
from quicsm.render.svg_charts import scales
from quicsm.render.svg_charts.data import Series
from quicsm.render.svg_charts.draw import (
    AXIS,
    GRID,
    Drawing,
    Entry,
    baseline_for_centre,
    legend,
    step_path,
)
from quicsm.render.svg_charts.text import ASCENT, fit, text_width

PAD: Final[float] = 8
PLOT_WIDTH: Final[float] = 430
PLOT_HEIGHT: Final[float] = 220
#: room along a plot's top edge for the names of its bands, px
STRIP: Final[float] = 15
GAP: Final[float] = 30
TICK_SIZE: Final[float] = 12
BAND_LABEL_SIZE: Final[float] = 10
#: the lines, drawn in this order (cwnd last: on top where the sender is window-limited)
LINES: Final[tuple[tuple[str, str, str], ...]] = (
    ("bytes in flight", "in-flight", LINE_COLOURS["bytes_in_flight"]),
    ("cwnd", "cwnd", LINE_COLOURS["cwnd_bytes"]),
)
#: points kept per line: at most four per this many columns of the time axis
COLUMNS: Final[int] = 600


def _end(s: Series) -> float:
    return max([*s.times_ms, *(b[1] for b in s.bands), 1e-3])


def _points(s: Series, values: Sequence[float | None], end: float) -> tuple[list[float], ...]:
    pts = [(t, v) for t, v in zip(s.times_ms, values, strict=True) if v is not None]
    xs, ys = reduce_points([p[0] for p in pts], [p[1] for p in pts], columns=COLUMNS,
                           span=(0.0, end))  # fmt: skip
    if xs and xs[-1] < end:  # the last value holds until the trace ends
        xs, ys = [*xs, end], [*ys, ys[-1]]
    return xs, ys


def _v_ticks(top: float, length: float) -> list[float]:
    """Ticks from 0 to ``top`` at least 24 px apart (a line of 12 px text and room)."""
    for n in (6, 5, 4, 3, 2):
        values = scales.ticks(0, top, n)
        if len(values) >= 2 and (values[1] - values[0]) * length / top >= 24:
            return values
    return [0.0, top]


class _Panel:
    def __init__(self, x: float, title: str, subtitle: str, s: Series) -> None:
        self.series, self.end = s, _end(s)
        self.lines = {name: _points(s, vals, self.end) for name, vals in
                      (("cwnd", s.cwnd_bytes), ("bytes in flight", s.in_flight_bytes))}  # fmt: skip
        peak = max([v for _, ys in self.lines.values() for v in ys] + [0.0])
        self.y_top = scales.nice_top(peak, 5)
        self.y_ticks = _v_ticks(self.y_top, PLOT_HEIGHT - STRIP)
        label_w = max(text_width(scales.si(v), TICK_SIZE) for v in self.y_ticks)
        self.x0 = x
        self.left = x + 16 + label_w + 9
        self.x_ticks = scales.fitting_ticks(0.0, self.end, length=PLOT_WIDTH, fmt=scales.grouped,
                                            size=TICK_SIZE)  # fmt: skip
        last = text_width(scales.grouped(self.x_ticks[-1]), TICK_SIZE) / 2
        first = text_width(scales.grouped(self.x_ticks[0]), TICK_SIZE) / 2
        self.left = max(self.left, x + first)
        self.right = self.left + PLOT_WIDTH
        self.x = scales.Scale(0.0, self.end, self.left, self.right)
        self.width = (self.right + max(last - (self.right - self.x(self.x_ticks[-1])), 0.0)) - x
        room = self.right - x
        self.title = fit(title, room, 14, bold=True)
        self.subtitle = fit(subtitle, room, 12)

    def draw(self, d: Drawing, top: float) -> None:
        s = self.series
        plot_top, bottom = top + 40, top + 40 + PLOT_HEIGHT
        y = scales.Scale(0.0, self.y_top, bottom, plot_top + STRIP)
        d.open("panel", f"{self.title}: {self.subtitle}")
        d.text(self.x0, top + 14 * ASCENT, self.title, size=14, bold=True, cls="title")
        d.text(self.x0, top + 32, self.subtitle, size=12, cls="subtitle")
        d.open("bands", "congestion state")
        bands = pixel_bands(s.bands, end=self.end, columns=int(PLOT_WIDTH))
        for a, b, state in bands:
            if b <= a:
                continue
            d.rect(self.x(a), plot_top, self.x(b) - self.x(a), PLOT_HEIGHT,
                   fill=tint(state_colour(state), STATE_TINT), cls="band",
                   title=f"{state}: {a:,.1f}–{b:,.1f} ms")  # fmt: skip
        for a, b, state in bands:
            width = self.x(b) - self.x(a)
            if width >= text_width(state, BAND_LABEL_SIZE) + 6:
                d.text((self.x(a) + self.x(b)) / 2, plot_top + 2 + BAND_LABEL_SIZE * ASCENT,
                       state, size=BAND_LABEL_SIZE, anchor="middle", cls="band-label")  # fmt: skip
        d.close()
        d.open("grid")
        for v in self.y_ticks[1:]:
            d.line(self.left, y(v), self.right, y(v), stroke=GRID, width=0.6)
        d.close()
        for name, cls, colour in LINES:
            xs, ys = self.lines[name]
            if xs:
                d.path(step_path([self.x(t) for t in xs], [y(v) for v in ys]), stroke=colour,
                       width=1.5, cls=f"line {cls}")  # fmt: skip
        d.open("losses", "packets declared lost")
        seen: set[int] = set()
        for t in sorted(s.losses_ms):
            half_px = round(self.x(t) * 2)
            if half_px not in seen:  # one tick per half pixel: more would draw the same
                seen.add(half_px)
                x = min(max(half_px / 2, self.left), self.right)
                d.line(x, bottom - 10, x, bottom, stroke=LOSS_COLOUR, width=1.5)
        d.close()
        d.rect(self.left, plot_top, PLOT_WIDTH, PLOT_HEIGHT, fill="none", stroke=AXIS,
               cls="frame")  # fmt: skip
        d.open("axis x", f"x axis: time (ms), from 0 to {scales.grouped(self.end)}")
        for v in self.x_ticks:
            d.line(self.x(v), bottom, self.x(v), bottom + 5, stroke=AXIS)
            d.text(self.x(v), bottom + 8 + TICK_SIZE * ASCENT, scales.grouped(v), size=TICK_SIZE,
                   anchor="middle", cls="tick")  # fmt: skip
        d.text((self.left + self.right) / 2, bottom + 40, "time (ms)", size=12, anchor="middle",
               cls="axis-title")  # fmt: skip
        d.close()
        d.open("axis y", f"y axis: bytes, from 0 to {scales.si(self.y_top)}")
        for v in self.y_ticks:
            d.line(self.left - 5, y(v), self.left, y(v), stroke=AXIS)
            d.text(self.left - 8, baseline_for_centre(y(v), TICK_SIZE), scales.si(v),
                   size=TICK_SIZE, anchor="end", cls="tick")  # fmt: skip
        centre = (plot_top + bottom) / 2
        d.text(self.x0 + 12 * ASCENT, centre, "bytes", size=12, anchor="middle", rotate=True,
               cls="axis-title")  # fmt: skip
        d.close()
        d.close()

    def describe(self) -> str:
        s = self.series
        parts = [f"{self.title} ({self.subtitle}): time from 0 to {self.end:,.0f} ms"]
        for name, (_, ys) in self.lines.items():
            if ys:
                parts.append(f"{name} up to {max(ys):,.0f} bytes")
        parts.append(f"{len(s.losses_ms)} packets declared lost")
        total: dict[str, float] = {}
        for a, b, state in s.bands:
            total[state] = total.get(state, 0.0) + max(b - a, 0.0)
        if total:
            parts.append("time in state: " + ", ".join(
                f"{k} {100 * v / self.end:.1f}%" for k, v in total.items()))  # fmt: skip
        return "; ".join(parts)


def traces_svg(traces: Sequence[tuple[str, str, Series]]) -> str:
    """Representative traces as small multiples: (title, subtitle, series) each."""
    panels: list[_Panel] = []
    x = PAD
    for title, subtitle, s in traces:
        panels.append(_Panel(x, title, subtitle, s))
        x += panels[-1].width + GAP
    width = max(x - GAP + PAD, 200.0)
    states = list(dict.fromkeys(st for _, _, s in traces for _, _, st in s.bands))
    state_entries: list[Entry] = [("band", tint(state_colour(st), STATE_TINT), st)
                                  for st in states]  # fmt: skip
    line_entries: list[Entry] = [("line", LINE_COLOURS["cwnd_bytes"], "cwnd"),
                                 ("line", LINE_COLOURS["bytes_in_flight"], "bytes in flight"),
                                 ("tick", LOSS_COLOUR, "packet declared lost")]  # fmt: skip
    d = Drawing()
    for p in panels:
        p.draw(d, PAD)
    y = PAD + 40 + PLOT_HEIGHT + 56
    room = width - 2 * PAD
    if state_entries:
        y += legend(d, PAD, y, "congestion state", state_entries, room) + 6
    y += legend(d, PAD, y, "line", line_entries, room)
    return d.svg(width=width, height=y + PAD, cls="chart traces",
                 title="Congestion window of a representative trace per group",
                 desc=". ".join(p.describe() for p in panels) + ".")  # fmt: skip
