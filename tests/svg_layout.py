"""Where the text and marks of a chart drawn by :mod:`quicsm.render.svg_charts` are, read back
from its SVG (parsed as XML): each text's box as the renderer's character widths give it, the
plot areas, the marks' rectangles, lines and paths."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from quicsm.render.svg_charts.text import ASCENT, DESCENT, text_width

NS = "{http://www.w3.org/2000/svg}"
#: attributes that are coordinates or lengths
NUMERIC = ("x", "y", "width", "height", "x1", "y1", "x2", "y2", "font-size", "stroke-width")


@dataclass(frozen=True)
class Box:
    left: float
    top: float
    right: float
    bottom: float
    text: str = ""

    def overlaps(self, other: Box, *, slack: float = 0.5) -> bool:
        return (
            min(self.right, other.right) - max(self.left, other.left) > slack
            and min(self.bottom, other.bottom) - max(self.top, other.top) > slack
        )

    def within(self, other: Box, *, slack: float = 0.5) -> bool:
        return (
            self.left >= other.left - slack
            and self.right <= other.right + slack
            and self.top >= other.top - slack
            and self.bottom <= other.bottom + slack
        )


def parse(svg: str) -> ET.Element:
    """The chart's root element; fails on SVG that is not well-formed XML."""
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg", root.tag
    return root


def classes(el: ET.Element) -> set[str]:
    return set(el.get("class", "").split())


def numbers(root: ET.Element) -> list[float]:
    """Every coordinate of the drawing: numeric attributes, path data, the view box."""
    out: list[float] = []
    for el in root.iter():
        for name in NUMERIC:
            if el.get(name) is not None:
                out.append(float(el.get(name, "")))
        for name in ("d", "viewBox", "transform"):
            out += [float(v) for v in re.findall(r"-?[\d.]+(?:e[-+]?\d+)?", el.get(name, ""))]
    return out


def canvas(root: ET.Element) -> Box:
    return Box(0.0, 0.0, float(root.get("width", "0")), float(root.get("height", "0")))


def text_boxes(root: ET.Element) -> list[Box]:
    """Each non-empty text's box: its width by the renderer's character widths, from its
    font's ascent to its descent, turned with it."""
    out = []
    for el in root.iter(f"{NS}text"):
        text = el.text or ""
        if not text.strip():
            continue
        x, y, size = float(el.get("x", "0")), float(el.get("y", "0")), float(el.get("font-size"))
        w = text_width(text, size, bold=el.get("font-weight") == "bold")
        anchor = el.get("text-anchor", "start")
        a = x if anchor == "start" else x - w / 2 if anchor == "middle" else x - w
        if el.get("transform"):  # a quarter anticlockwise about (x, y)
            assert el.get("transform") == f"rotate(-90 {el.get('x')} {el.get('y')})"
            out.append(Box(x - ASCENT * size, y - (a + w - x), x + DESCENT * size, y - (a - x),
                           text))  # fmt: skip
        else:
            out.append(Box(a, y - ASCENT * size, a + w, y + DESCENT * size, text))
    return out


def rect_box(el: ET.Element) -> Box:
    x, y = float(el.get("x", "0")), float(el.get("y", "0"))
    return Box(x, y, x + float(el.get("width", "0")), y + float(el.get("height", "0")))


def line_box(el: ET.Element) -> Box:
    xs = sorted(float(el.get(k, "0")) for k in ("x1", "x2"))
    ys = sorted(float(el.get(k, "0")) for k in ("y1", "y2"))
    return Box(xs[0], ys[0], xs[1], ys[1])


def path_box(el: ET.Element) -> Box:
    """The box of a step path (``M x y`` then ``H x`` and ``V y``)."""
    xs: list[float] = []
    ys: list[float] = []
    for op, a, b in re.findall(r"([MHV])(-?[\d.]+)(?: (-?[\d.]+))?", el.get("d", "")):
        if op == "M":
            xs.append(float(a))
            ys.append(float(b))
        elif op == "H":
            xs.append(float(a))
        else:
            ys.append(float(a))
    return Box(min(xs), min(ys), max(xs), max(ys))


def overlapping(boxes: list[Box]) -> list[tuple[str, str]]:
    """The pairs of boxes that overlap (each pair once)."""
    found = []
    ordered = sorted(boxes, key=lambda b: b.left)
    for i, a in enumerate(ordered):
        for b in ordered[i + 1 :]:
            if b.left >= a.right:
                break
            if a.overlaps(b):
                found.append((a.text, b.text))
    return found


def finite(values: list[float]) -> bool:
    return all(math.isfinite(v) for v in values)
