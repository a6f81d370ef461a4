"""The report's scenario matrix (:func:`heatmap_svg`): each cell coloured by B's percent
difference from A on a diverging scale (red: B lower, blue: B higher, near white: no
difference) with its legend; a cell whose difference is not significant is drawn pale, a cell
without a value grey. Each cell's text takes the darker or the lighter ink, whichever stands
out more from its fill."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

from quicsm.render.svg_charts.data import Cell
from quicsm.render.svg_charts.draw import AXIS, Drawing, baseline_for_centre, num
from quicsm.render.svg_charts.text import ASCENT, fit, text_width, wrap

PAD: Final[float] = 8
CELL_WIDTH: Final[float] = 120
CELL_HEIGHT: Final[float] = 52
LABEL_SIZE: Final[float] = 12
BIG_SIZE: Final[float] = 14
SMALL_SIZE: Final[float] = 10
#: a row's or a column's name is cut (with an ellipsis) beyond this width, px
LABEL_ROOM: Final[float] = 220
#: the diverging scale from -extent to +extent: red, near white at 0, blue (the colours the
#: report's heatmap has had since it was drawn with a diverging scale)
DIVERGING: Final[tuple[str, ...]] = (
    "#8c0d25", "#bf363a", "#df745e", "#f4ae91", "#fbdbc9", "#f2efee",
    "#d2e5ef", "#9dcae1", "#5da2cb", "#2f78b3", "#134b85",
)  # fmt: skip
#: how strongly a cell whose difference is not significant shows its colour (0 = white)
PALE: Final[float] = 0.4
NO_VALUE: Final[str] = "#ececec"
#: a cell's inks: whichever stands out more from its fill has a contrast of at least 4.58:1
#: (WCAG's 4.5:1 for text) on any fill
DARK_INK: Final[str] = "#000000"
LIGHT_INK: Final[str] = "#ffffff"
LEGEND_LENGTH: Final[float] = 160
LEGEND_STEPS: Final[int] = 64


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def _hex(rgb: Sequence[float]) -> str:
    return "#" + "".join(f"{min(max(round(c), 0), 255):02x}" for c in rgb)


def diverging(value: float, extent: float) -> str:
    """The colour of ``value`` on the scale from ``-extent`` (red) to ``+extent`` (blue),
    clamped; linear between the scale's colours."""
    f = 0.5 if extent <= 0 else min(max((value + extent) / (2 * extent), 0.0), 1.0)
    at = f * (len(DIVERGING) - 1)
    i = min(int(at), len(DIVERGING) - 2)
    w = at - i
    a, b = _rgb(DIVERGING[i]), _rgb(DIVERGING[i + 1])
    return _hex([x + (y - x) * w for x, y in zip(a, b, strict=True)])


def pale(colour: str, amount: float = PALE) -> str:
    """``colour`` at ``amount`` opacity over white."""
    return _hex([255 + (c - 255) * amount for c in _rgb(colour)])


def luminance(colour: str) -> float:
    """WCAG 2 relative luminance of ``#rrggbb``."""

    def channel(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.04045 else ((s + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in _rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two colours (1 to 21)."""
    la, lb = luminance(a), luminance(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def ink_on(fill: str) -> str:
    """The text colour that stands out more from ``fill``: black or white."""
    return DARK_INK if contrast(DARK_INK, fill) >= contrast(LIGHT_INK, fill) else LIGHT_INK


def cell_fill(cell: Cell, extent: float) -> str:
    if cell.percent is None or not math.isfinite(cell.percent):
        return NO_VALUE
    colour = diverging(cell.percent, extent)
    return colour if cell.significant else pale(colour)


def extent_of(cells: Mapping[tuple[str, str], Cell]) -> float:
    """The scale's reach: the largest difference, at least 10 %, rounded up to tens up to
    100 %, as it is beyond."""
    values = [abs(c.percent) for c in cells.values() if c.percent is not None
              and math.isfinite(c.percent)]  # fmt: skip
    extent = max([*values, 10.0])
    return min(float(math.ceil(extent / 10) * 10), 100.0) if extent <= 100 else extent


def big_text(cell: Cell) -> str:
    pct = cell.percent
    if pct is None or not math.isfinite(pct):
        return "–"
    return "±0%" if abs(pct) < 0.5 else _signed(pct) + "%"


def _signed(v: float) -> str:
    """``+30``, ``−96``, ``0``: a whole number with its sign (a typographic minus)."""
    text = f"{v:+.0f}"
    if text in ("+0", "-0"):
        return "0"
    return "−" + text[1:] if text.startswith("-") else text


def heatmap_svg(
    rows: Sequence[str],
    cols: Sequence[str],
    cells: Mapping[tuple[str, str], Cell],
    *,
    row_label: str,
    col_label: str,
    title: str,
) -> str:
    """The scenario matrix: rows x columns of cells, each with its percent difference (bold
    when significant) and its test's words; the colour scale's legend on the right."""
    extent = extent_of(cells)
    row_names = [fit(r, LABEL_ROOM, LABEL_SIZE) for r in rows]
    col_names = [fit(c, LABEL_ROOM, LABEL_SIZE) for c in cols]
    widest = max(
        [text_width(c.text, SMALL_SIZE) + 12 for c in cells.values()]
        + [text_width(big_text(c), BIG_SIZE, bold=True) + 12 for c in cells.values()]
        + [text_width(c, LABEL_SIZE) + 10 for c in col_names]
        + [CELL_WIDTH]
    )
    cell_w = math.ceil(widest)
    row_title_w = LABEL_SIZE + 6 if row_label else 0.0
    label_w = max([text_width(r, LABEL_SIZE) for r in row_names] + [0.0])
    left = PAD + row_title_w + label_w + 8
    grid_w = cell_w * max(len(cols), 1)
    legend_x = left + grid_w + 24
    legend_title = ["% difference", "of B from A"]
    legend_w = max(
        max(text_width(t, LABEL_SIZE, bold=True) for t in legend_title),
        14 + 6 + max(text_width(_signed(v), LABEL_SIZE) for v in (-extent, extent)),
    )
    width = legend_x + legend_w + PAD
    title_lines = wrap(title, width - 2 * PAD, BIG_SIZE, bold=True)
    top = PAD + len(title_lines) * 18 + 4
    if col_label:
        top += 18
    top += 20  # the columns' names
    height = CELL_HEIGHT * len(rows)
    d = Drawing()
    d.open("title")
    for i, line in enumerate(title_lines):
        d.text(PAD, PAD + BIG_SIZE * ASCENT + 18 * i, line, size=BIG_SIZE, bold=True,
               cls="title")  # fmt: skip
    d.close()
    d.open("axis columns", f"columns: {col_label or 'all'}")
    if col_label:
        d.text(left + grid_w / 2, top - 26, fit(col_label, grid_w, LABEL_SIZE), size=LABEL_SIZE,
               anchor="middle", cls="axis-title")  # fmt: skip
    for j, c in enumerate(col_names):
        x = left + cell_w * (j + 0.5)
        d.text(x, top - 7, c, size=LABEL_SIZE, anchor="middle", cls="label")
    d.close()
    d.open("axis rows", f"rows: {row_label}")
    for i, r in enumerate(row_names):
        y = top + CELL_HEIGHT * (i + 0.5)
        d.text(left - 8, baseline_for_centre(y, LABEL_SIZE), r, size=LABEL_SIZE, anchor="end",
               cls="label")  # fmt: skip
    if row_label:
        d.text(PAD + LABEL_SIZE * ASCENT, top + height / 2, fit(row_label, height, LABEL_SIZE),
               size=LABEL_SIZE, anchor="middle", rotate=True, cls="axis-title")  # fmt: skip
    d.close()
    said = []
    d.open("cells")
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            cell = cells.get((r, c))
            if cell is None:
                continue
            x, y = left + cell_w * j, top + CELL_HEIGHT * i
            fill = cell_fill(cell, extent)
            ink = ink_on(fill)
            words = f"{r}, {c}: {big_text(cell)}, {cell.text}"
            said.append(words)
            d.open("cell significant" if cell.significant else "cell", words)
            d.rect(x, y, cell_w, CELL_HEIGHT, fill=fill, stroke="#999999", title=words)
            d.text(x + cell_w / 2, y + CELL_HEIGHT / 2 - 3, big_text(cell), size=BIG_SIZE,
                   anchor="middle", bold=cell.significant, fill=ink, cls="value")  # fmt: skip
            d.text(x + cell_w / 2, y + CELL_HEIGHT / 2 + 15, cell.text, size=SMALL_SIZE,
                   anchor="middle", fill=ink, cls="test")  # fmt: skip
            d.close()
    d.close()
    _legend(d, legend_x, top, legend_title, extent)
    desc = (f"{title}. Rows: {row_label}" + (f"; columns: {col_label}" if col_label else "")
            + ". " + "; ".join(said) + ".")  # fmt: skip
    return d.svg(width=width, height=max(top + height, top + LEGEND_LENGTH + 40) + PAD,
                 cls="chart heatmap", title=title, desc=desc)  # fmt: skip


def _legend(d: Drawing, x: float, top: float, title: Sequence[str], extent: float) -> None:
    d.open("legend gradient", f"colour: % difference of B from A, from −{num(extent)} to "
           f"+{num(extent)}")  # fmt: skip
    for i, line in enumerate(title):
        d.text(x, top + LABEL_SIZE * ASCENT + 15 * i, line, size=LABEL_SIZE, bold=True,
               cls="legend-title")  # fmt: skip
    bar_top = top + 15 * len(title) + 8
    step = LEGEND_LENGTH / LEGEND_STEPS
    for k in range(LEGEND_STEPS):  # top: +extent
        value = extent - (k + 0.5) * 2 * extent / LEGEND_STEPS
        d.rect(x, bar_top + k * step, 14, step + 0.3, fill=diverging(value, extent))
    d.rect(x, bar_top, 14, LEGEND_LENGTH, fill="none", stroke=AXIS)
    for value in (extent, extent / 2, 0.0, -extent / 2, -extent):
        y = bar_top + (extent - value) / (2 * extent) * LEGEND_LENGTH
        d.line(x + 14, y, x + 18, y, stroke=AXIS)
        d.text(x + 20, baseline_for_centre(y, LABEL_SIZE), _signed(value), size=LABEL_SIZE,
               cls="tick")  # fmt: skip
    d.close()
