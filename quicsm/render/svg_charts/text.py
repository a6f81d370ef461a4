"""How much room a chart's text takes, without a font engine: advance widths per character.

The widths are those of DejaVu Sans (normal and bold, in thousandths of an em, measured in the
browser the report is tested in), the widest of the fonts a browser picks for the charts'
``Helvetica, Arial, sans-serif`` (Helvetica and Arial are narrower): laid out with these
widths, text has room in any of them. A character without a width here counts a full em.
tests/test_svg_charts_browser.py checks in a real browser that no text of a drawn chart
reaches past the box these widths give it.
"""

from __future__ import annotations

from typing import Final

#: the font the charts ask for
FONT_FAMILY: Final[str] = "Helvetica, Arial, sans-serif"

_ASCII: Final[str] = "".join(chr(c) for c in range(32, 127))
_EXTRA: Final[str] = "−…×±·“”–—→≥≤µ°"
_NORMAL: Final[tuple[int, ...]] = (
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337, 636, 636,
    636, 636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698,
    770, 632, 575, 775, 752, 295, 295, 656, 557, 863, 748, 787, 603, 787, 695, 635, 611, 732,
    684, 989, 685, 611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635, 615, 352, 635,
    634, 278, 278, 579, 278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592,
    525, 636, 337, 636, 838,
    838, 1000, 838, 838, 318, 518, 518, 500, 1000, 838, 838, 838, 636, 500,
)  # fmt: skip
_BOLD: Final[tuple[int, ...]] = (
    348, 456, 521, 838, 696, 1002, 872, 306, 457, 457, 523, 838, 380, 415, 380, 365, 696, 696,
    696, 696, 696, 696, 696, 696, 696, 696, 400, 400, 838, 838, 838, 580, 1000, 774, 762, 734,
    830, 683, 683, 821, 837, 372, 372, 775, 637, 995, 837, 850, 733, 850, 770, 720, 682, 812,
    774, 1103, 771, 724, 725, 457, 365, 457, 838, 500, 500, 675, 716, 593, 716, 678, 435, 716,
    712, 343, 343, 665, 343, 1042, 712, 687, 716, 716, 493, 595, 478, 712, 652, 924, 645, 652,
    582, 712, 365, 712, 838,
    838, 1000, 838, 838, 380, 657, 657, 500, 1000, 838, 838, 838, 736, 500,
)  # fmt: skip
_WIDTHS: Final[dict[bool, dict[str, int]]] = {
    bold: dict(zip(_ASCII + _EXTRA, table, strict=True))
    for bold, table in ((False, _NORMAL), (True, _BOLD))
}
#: a line's box above and below its baseline, in ems (DejaVu Sans' ascent and descent)
ASCENT: Final[float] = 0.93
DESCENT: Final[float] = 0.24


def text_width(text: str, size: float, *, bold: bool = False) -> float:
    """The width of ``text`` at font size ``size`` px."""
    widths = _WIDTHS[bold]
    return sum(widths.get(c, 1000) for c in text) * size / 1000


def fit(text: str, room: float, size: float, *, bold: bool = False) -> str:
    """``text``, its middle replaced by an ellipsis until it is at most ``room`` px wide
    (file names keep their start and their end)."""
    if text_width(text, size, bold=bold) <= room:
        return text
    keep = len(text)
    while keep > 2:
        keep -= 1
        cut = text[: keep - keep // 2] + "…" + text[len(text) - keep // 2 :]
        if text_width(cut, size, bold=bold) <= room:
            return cut
    return "…"


def wrap(text: str, room: float, size: float, *, bold: bool = False) -> list[str]:
    """``text`` broken after spaces into lines of at most ``room`` px (a word longer than a
    line is cut to fit, with an ellipsis)."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and text_width(f"{lines[-1]} {word}", size, bold=bold) <= room:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(fit(word, room, size, bold=bold))
    return lines or [""]
