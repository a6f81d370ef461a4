"""The report's two charts with one row per state: time in state (:func:`time_in_state_svg`, a
bar per group with its 95% interval) and dwell times (:func:`dwell_svg`, a box per group:
whiskers p10-p90, box p25-p75, a line at the median, on a log axis). Both have the state names
on the left, the value axis at the bottom, each row's test on the right (bold red when
significant) and the groups' legend below."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Final

from quicsm.render.colours import GROUP_COLOURS
from quicsm.render.svg_charts import scales
from quicsm.render.svg_charts.data import Bar, Box
from quicsm.render.svg_charts.draw import (
    AXIS,
    GRID,
    INK,
    MUTED,
    Drawing,
    baseline_for_centre,
    legend,
    legend_height,
)
from quicsm.render.svg_charts.text import ASCENT, fit, text_width

PAD: Final[float] = 8
PLOT_WIDTH: Final[float] = 520
ROW: Final[float] = 34
#: a state's name is cut (with an ellipsis) beyond this width, px
LABEL_ROOM: Final[float] = 220
LABEL_SIZE: Final[float] = 12
NOTE_SIZE: Final[float] = 11
VALUE_SIZE: Final[float] = 10
TICK_SIZE: Final[float] = 12
SIGNIFICANT: Final[str] = "#b00020"
#: the bars' whiskers
WHISKER: Final[str] = "#222222"


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


class _Rows:
    """The frame both charts share: labels, plot, axis, notes, legend."""

    def __init__(
        self, labels: Sequence[str], notes: Sequence[tuple[str, bool]], names: tuple[str, str],
        *, overhang: float, axis_title: str, ticks: Sequence[float],
        fmt: Callable[[float], str], log: bool, domain: tuple[float, float],
    ) -> None:  # fmt: skip
        self.labels = [fit(s, LABEL_ROOM, LABEL_SIZE) for s in labels]
        self.notes = notes
        self.names = names
        label_w = max([text_width(s, LABEL_SIZE) for s in self.labels] + [0.0])
        first_tick = text_width(fmt(ticks[0]), TICK_SIZE) / 2 if ticks else 0.0
        self.left = PAD + max(label_w + 8, first_tick)
        self.right = self.left + PLOT_WIDTH
        self.top = PAD
        self.height = max(ROW * len(labels), 40)
        self.bottom = self.top + self.height
        self.x = scales.Scale(domain[0], domain[1], self.left, self.right, log=log)
        self.ticks, self.fmt, self.axis_title = ticks, fmt, axis_title
        self.notes_x = self.right + max(24.0, overhang + 16)
        notes_w = max([text_width(n, NOTE_SIZE, bold=s) for n, s in notes] + [0.0])
        last_tick = text_width(fmt(ticks[-1]), TICK_SIZE) / 2 if ticks else 0.0
        self.width = max(self.notes_x + notes_w, self.right + last_tick) + PAD
        entries = [("box", c, n) for n, c in zip(names, GROUP_COLOURS, strict=True)]
        self.entries = entries
        self.legend_top = self.bottom + 46
        lh, _, _ = legend_height(None, entries, self.width - self.left)
        self.total_height = self.legend_top + lh + PAD

    def row_centre(self, i: int) -> float:
        return self.top + ROW * i + ROW / 2

    def bar_centre(self, i: int, g: int) -> float:
        """The centre of group ``g``'s bar in row ``i``: A above, B below."""
        return self.top + ROW * i + 3 + 7 * (2 * g + 1)

    def frame(self, d: Drawing, minor: Sequence[float] = ()) -> None:
        d.open("grid")
        for v in minor:
            x = self.x(v)
            d.line(x, self.top, x, self.bottom, stroke="#f1f1f1")
        for v in self.ticks:
            x = self.x(v)
            d.line(x, self.top, x, self.bottom, stroke=GRID)
        d.close()
        d.open("labels", "states")
        for i, s in enumerate(self.labels):
            d.text(self.left - 8, baseline_for_centre(self.row_centre(i), LABEL_SIZE), s,
                   size=LABEL_SIZE, anchor="end", cls="label")  # fmt: skip
        d.close()

    def axis(self, d: Drawing) -> None:
        d.rect(self.left, self.top, PLOT_WIDTH, self.height, fill="none", stroke=AXIS,
               cls="frame")  # fmt: skip
        lo, hi = self.ticks[0], self.ticks[-1]
        d.open("axis x", f"x axis: {self.axis_title}, {self.fmt(lo)} to {self.fmt(hi)}")
        # every tick drawn; a label on every k-th, k the fewest that stand 8 px apart
        widest = max(text_width(self.fmt(v), TICK_SIZE) for v in self.ticks)
        spacing = abs(self.x(self.ticks[1]) - self.x(self.ticks[0])) if len(self.ticks) > 1 else 0
        every = 1 if spacing <= 0 else max(1, math.ceil((widest + 8) / spacing))
        for i, v in enumerate(self.ticks):
            x = self.x(v)
            d.line(x, self.bottom, x, self.bottom + 5, stroke=AXIS)
            if i % every == 0:
                d.text(x, self.bottom + 8 + ASCENT * TICK_SIZE, self.fmt(v), size=TICK_SIZE,
                       anchor="middle", cls="tick")  # fmt: skip
        d.text((self.left + self.right) / 2, self.bottom + 40, self.axis_title, size=12,
               anchor="middle", cls="axis-title")  # fmt: skip
        d.close()
        d.open("notes", "tests")
        for i, (note, sig) in enumerate(self.notes):
            d.text(self.notes_x, baseline_for_centre(self.row_centre(i), NOTE_SIZE), note,
                   size=NOTE_SIZE, bold=sig, fill=SIGNIFICANT if sig else MUTED,
                   cls="note significant" if sig else "note")  # fmt: skip
        d.close()
        legend(d, self.left, self.legend_top, None, self.entries, self.width - self.left)


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def time_in_state_svg(bars: Sequence[Bar], *, names: tuple[str, str]) -> str:
    """Horizontal bars of the mean of per-trace time shares per group, 95% CI whiskers, the
    value right of its whisker."""
    rows: list[list[tuple[int, float, float | None, float | None]]] = []
    overhang = 0.0
    for b in bars:
        row = []
        for g in range(2):
            v, lo, hi = b.values[g], b.lows[g], b.highs[g]
            if not _finite(v):
                continue
            interval = _finite(lo) and _finite(hi) and hi > lo
            low = min(max(lo, 0.0), 1.0) if interval else None
            high = min(max(hi, 0.0), 1.0) if interval else None
            v = min(max(v, 0.0), 1.0)
            row.append((g, v, low, high))
            at = PLOT_WIDTH * (high if high is not None else v)
            overhang = max(overhang, at + 4 + text_width(_pct(v), VALUE_SIZE) - PLOT_WIDTH)
        rows.append(row)
    axis_title = "% of time: mean of per-trace shares (95% CI)"
    frame = _Rows(
        [b.label for b in bars], [(b.note, b.significant) for b in bars], names,
        overhang=overhang, axis_title=axis_title, ticks=scales.ticks(0, 1, 10),
        fmt=scales.percent, log=False, domain=(0.0, 1.0),
    )  # fmt: skip
    d = Drawing()
    frame.frame(d)
    d.open("marks")
    for i, (b, row) in enumerate(zip(bars, rows, strict=True)):
        d.open("row", b.label)
        for g, v, low, high in row:
            name = names[g]
            y = frame.bar_centre(i, g)
            ci = "" if low is None or high is None else f" (95% CI {_pct(low)}–{_pct(high)})"
            d.rect(frame.left, y - 6.5, frame.x(v) - frame.left, 13, fill=GROUP_COLOURS[g],
                   cls="bar", title=f"{b.label}, {name}: {_pct(v)}{ci}")  # fmt: skip
            if low is not None and high is not None:
                d.line(frame.x(low), y, frame.x(high), y, stroke=WHISKER, width=1.2,
                       cls="whisker")  # fmt: skip
            at = frame.x(high if high is not None else v)
            d.text(at + 4, baseline_for_centre(y, VALUE_SIZE), _pct(v), size=VALUE_SIZE,
                   cls="value")  # fmt: skip
        d.close()
    d.close()
    frame.axis(d)
    desc = (
        f"{axis_title}, per state: "
        + "; ".join(
            f"{b.label}: "
            + ", ".join(f"{names[g]} {_pct(v)}" for g, v, _, _ in row)
            + (f" ({b.note})" if b.note else "")
            for b, row in zip(bars, rows, strict=True)
        )
        + "."
    )
    return d.svg(width=frame.width, height=frame.total_height, cls="chart time-in-state",
                 title=f"Time in state: {names[0]} and {names[1]}", desc=desc)  # fmt: skip


#: lowest value of the dwell-time axis (ms)
MIN_DWELL_AXIS_MS: Final[float] = 0.01


def _ms(v: float) -> str:
    return f"{v:,.0f} ms" if v >= 100 else f"{v:.3g} ms"


def dwell_svg(boxes: Sequence[Box], *, names: tuple[str, str]) -> str | None:
    """Box plots (p10-p25-median-p75-p90) of dwell time per state on a log axis; None when
    there is no dwell time."""
    values = [q for b in boxes for qs in b.quantiles if qs for q in qs if _finite(q) and q > 0]
    if not values:
        return None
    lo = 10 ** math.floor(math.log10(max(min(values), MIN_DWELL_AXIS_MS)))
    hi = 10 ** math.ceil(math.log10(max(values)))
    hi = max(hi, lo * 10)
    axis_title = "dwell time per visit (ms, log scale)"
    frame = _Rows(
        [b.label for b in boxes], [(b.note, b.significant) for b in boxes], names,
        overhang=0.0, axis_title=axis_title, ticks=scales.decades(lo, hi), fmt=scales.general,
        log=True, domain=(lo, hi),
    )  # fmt: skip
    d = Drawing()
    frame.frame(d, minor=scales.between_decades(lo, hi))
    d.open("marks")
    said = []
    for i, b in enumerate(boxes):
        d.open("row", b.label)
        parts = []
        for g in range(2):
            qs = b.quantiles[g]
            if not qs or not all(_finite(q) for q in qs):
                continue
            p10, p25, p50, p75, p90 = (min(max(q, lo), hi) for q in qs)
            y = frame.bar_centre(i, g)
            colour = GROUP_COLOURS[g]
            text = (f"{b.label}, {names[g]}: dwell per visit p10 {_ms(qs[0])}, p25 {_ms(qs[1])}, "
                    f"median {_ms(qs[2])}, p75 {_ms(qs[3])}, p90 {_ms(qs[4])}; "
                    f"{b.counts[g]} visits")  # fmt: skip
            d.line(frame.x(p10), y, frame.x(p90), y, stroke=colour, width=1.5, cls="whisker")
            d.rect(frame.x(p25), y - 5.5, max(frame.x(p75) - frame.x(p25), 1.0), 11,
                   fill=colour, opacity=0.6, cls="box", title=text)  # fmt: skip
            d.line(frame.x(p50), y - 5.5, frame.x(p50), y + 5.5, stroke=INK, width=2,
                   cls="median")  # fmt: skip
            parts.append(f"{names[g]} median {_ms(qs[2])} (p25 {_ms(qs[1])}, p75 {_ms(qs[3])})")
        said.append(f"{b.label}: " + ", ".join(parts) + (f" ({b.note})" if b.note else ""))
        d.close()
    d.close()
    frame.axis(d)
    desc = f"{axis_title}, per state: " + "; ".join(said) + "."
    return d.svg(width=frame.width, height=frame.total_height, cls="chart dwell",
                 title=f"Dwell times per visit: {names[0]} and {names[1]}", desc=desc)  # fmt: skip
