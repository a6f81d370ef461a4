"""Writing a chart's SVG: elements with fixed number formatting (the same drawing, the same
bytes), escaped text, and the accessible frame every chart has (``role="img"``, a ``<title>``
naming it and a ``<desc>`` saying what it shows, in words)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Final

from quicsm.render.escape import esc
from quicsm.render.svg_charts.text import ASCENT, DESCENT, FONT_FAMILY, fit, text_width

#: colour of a chart's text, of its axes and frame, and of its grid lines
INK: Final[str] = "#222222"
AXIS: Final[str] = "#888888"
GRID: Final[str] = "#e4e4e4"
MUTED: Final[str] = "#555555"


#: characters XML does not allow in text (control characters, lone surrogates, non-characters)
_NOT_XML: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def words(text: str) -> str:
    """``text`` escaped for SVG, any character XML does not allow replaced by U+FFFD."""
    return esc(_NOT_XML.sub("\ufffd", text))


def num(x: float) -> str:
    """``x`` with at most two decimals, no trailing zeros (``-0`` is ``0``)."""
    if not math.isfinite(x):
        raise ValueError(f"a chart coordinate must be finite, got {x!r}")
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


class Drawing:
    """The elements of one chart, in drawing order; :meth:`svg` closes it."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, markup: str) -> None:
        self.parts.append(markup)

    def open(self, cls: str, label: str | None = None) -> None:
        """Start a group of class ``cls`` (``aria-label``: what it holds, for a screen reader)."""
        aria = f' aria-label="{words(label)}"' if label is not None else ""
        self.parts.append(f'<g class="{cls}"{aria}>')

    def close(self) -> None:
        self.parts.append("</g>")

    def rect(
        self, x: float, y: float, w: float, h: float, *, fill: str, cls: str = "",
        stroke: str | None = None, opacity: float | None = None, title: str | None = None,
    ) -> None:  # fmt: skip
        # the far edges rounded as the near ones are: a rectangle ends where its neighbour or
        # its plot does
        x0, y0 = round(x, 2), round(y, 2)
        w, h = max(round(x + w, 2) - x0, 0.0), max(round(y + h, 2) - y0, 0.0)
        attrs = f'x="{num(x0)}" y="{num(y0)}" width="{num(w)}" height="{num(h)}"'
        attrs += f' fill="{fill}"'
        if stroke is not None:
            attrs += f' stroke="{stroke}"'
        if opacity is not None:
            attrs += f' fill-opacity="{num(opacity)}"'
        self.parts.append(_element("rect", attrs, cls, title))

    def line(
        self, x1: float, y1: float, x2: float, y2: float, *, stroke: str, width: float = 1.0,
        cls: str = "", dash: str | None = None, title: str | None = None,
    ) -> None:  # fmt: skip
        attrs = (f'x1="{num(x1)}" y1="{num(y1)}" x2="{num(x2)}" y2="{num(y2)}" '
                 f'stroke="{stroke}" stroke-width="{num(width)}"')  # fmt: skip
        if dash is not None:
            attrs += f' stroke-dasharray="{dash}"'
        self.parts.append(_element("line", attrs, cls, title))

    def path(self, d: str, *, stroke: str, width: float, cls: str = "") -> None:
        attrs = f'd="{d}" fill="none" stroke="{stroke}" stroke-width="{num(width)}"'
        self.parts.append(_element("path", attrs + ' stroke-linejoin="round"', cls, None))

    def text(
        self, x: float, y: float, text: str, *, size: float, anchor: str = "start",
        bold: bool = False, fill: str = INK, cls: str = "", rotate: bool = False,
    ) -> None:  # fmt: skip
        """``text`` with its baseline at ``y``; ``anchor``: ``start``, ``middle`` or ``end``
        at ``x``; ``rotate``: turned a quarter anticlockwise about (x, y)."""
        attrs = f'x="{num(x)}" y="{num(y)}" font-size="{num(size)}"'
        if anchor != "start":
            attrs += f' text-anchor="{anchor}"'
        if bold:
            attrs += ' font-weight="bold"'
        if fill != INK:
            attrs += f' fill="{fill}"'
        if rotate:
            attrs += f' transform="rotate(-90 {num(x)} {num(y)})"'
        c = f' class="{cls}"' if cls else ""
        self.parts.append(f"<text{c} {attrs}>{words(text)}</text>")

    def svg(self, *, width: float, height: float, cls: str, title: str, desc: str) -> str:
        """The ``<svg>`` element: ``width`` x ``height`` px, class ``cls``."""
        w, h = num(math.ceil(width)), num(math.ceil(height))
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="{cls}" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" role="img" font-family="{FONT_FAMILY}" fill="{INK}">'
            f"<title>{words(title)}</title><desc>{words(desc)}</desc>"
            + "".join(self.parts)
            + "</svg>"
        )


def _element(tag: str, attrs: str, cls: str, title: str | None) -> str:
    c = f' class="{cls}"' if cls else ""
    if title is None:
        return f"<{tag}{c} {attrs}/>"
    return f"<{tag}{c} {attrs}><title>{words(title)}</title></{tag}>"


def baseline_for_centre(y: float, size: float) -> float:
    """The baseline that centres a line of text of font size ``size`` on ``y``."""
    return y + (ASCENT - DESCENT) / 2 * size


def step_path(xs: Sequence[float], ys: Sequence[float]) -> str:
    """A step line through the points (each value held until the next point), as path data."""
    if not xs:
        return ""
    parts = [f"M{num(xs[0])} {num(ys[0])}"]
    for i in range(1, len(xs)):
        parts.append(f"H{num(xs[i])}")
        if ys[i] != ys[i - 1]:
            parts.append(f"V{num(ys[i])}")
    return "".join(parts)


# -- legends ----------------------------------------------------------------------------------

#: a legend entry: (kind of symbol, colour, label); kinds: ``box`` (a filled swatch), ``band``
#: (a light swatch with an outline), ``line``, ``tick`` (a short vertical stroke)
Entry = tuple[str, str, str]
LEGEND_SIZE: Final[float] = 12
_SYMBOL: Final[float] = 14  # a symbol's width, and the gap after it
_ROW: Final[float] = 20


def legend_height(
    title: str | None, entries: Sequence[Entry], width: float
) -> tuple[float, int, float]:
    """(height, columns, column width) of :func:`legend` within ``width`` px."""
    column = max(_SYMBOL + 6 + text_width(_label(e[2], width), LEGEND_SIZE) + 22
                 for e in entries)  # fmt: skip
    columns = max(1, min(len(entries), int(width // column)))
    rows = math.ceil(len(entries) / columns)
    return (_ROW if title else 0) + rows * _ROW, columns, column


def _label(text: str, width: float) -> str:
    """An entry's label, cut to the legend's width."""
    return fit(text, width - _SYMBOL - 8, LEGEND_SIZE)


def legend(
    d: Drawing, x: float, y: float, title: str | None, entries: Sequence[Entry], width: float
) -> float:
    """A legend whose top left is at (x, y): its title, then its entries in columns, as many
    as fit in ``width`` px; returns its height."""
    height, columns, column = legend_height(title, entries, width)
    d.open("legend", title or "legend")
    top = y
    if title:
        d.text(x, baseline_for_centre(y + _ROW / 2, LEGEND_SIZE),
               fit(title, width, LEGEND_SIZE, bold=True), size=LEGEND_SIZE,
               bold=True, cls="legend-title")  # fmt: skip
        top += _ROW
    for i, (kind, colour, label) in enumerate(entries):
        cx = x + (i % columns) * column
        cy = top + (i // columns) * _ROW + _ROW / 2
        if kind == "line":
            d.line(cx, cy, cx + _SYMBOL, cy, stroke=colour, width=2.5)
        elif kind == "tick":
            d.line(cx + _SYMBOL / 2, cy - 6, cx + _SYMBOL / 2, cy + 6, stroke=colour, width=2)
        else:
            d.rect(cx, cy - 6, _SYMBOL - 2, 12, fill=colour,
                   stroke="#666666" if kind == "band" else None)  # fmt: skip
        d.text(cx + _SYMBOL + 6, baseline_for_centre(cy, LEGEND_SIZE), _label(label, width),
               size=LEGEND_SIZE,
               cls="legend-label")  # fmt: skip
    d.close()
    return height
