"""Scales from data to pixels, and their ticks: steps of 1, 2 or 5 times a power of ten (linear),
decades (logarithmic), each tick written as people read it (``2,000``, ``1.2M``, ``40%``,
``0.01``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from quicsm.render.svg_charts.text import text_width


@dataclass(frozen=True)
class Scale:
    """``lo``..``hi`` (data) onto ``start``..``stop`` (px); ``log``: logarithmic."""

    lo: float
    hi: float
    start: float
    stop: float
    log: bool = False

    def __call__(self, value: float) -> float:
        """The pixel of ``value``, clamped to the scale's range."""
        if self.log:
            lo, hi = math.log10(self.lo), math.log10(self.hi)
            v = math.log10(max(value, self.lo))
        else:
            lo, hi, v = self.lo, self.hi, value
        f = 0.0 if hi <= lo else (v - lo) / (hi - lo)
        f = min(max(f, 0.0), 1.0)
        return self.start + f * (self.stop - self.start)


def step(span: float, count: int) -> float:
    """The tick step of 1, 2 or 5 times a power of ten that gives about ``count`` ticks over
    ``span``."""
    raw = span / max(count, 1)
    if not 1e-300 < raw < 1e300:  # an empty span, or one no tick could be written for
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * power * 1.0000001:
            return m * power
    return 10 * power


def ticks(lo: float, hi: float, count: int) -> list[float]:
    """The multiples of :func:`step` within [``lo``, ``hi``]."""
    s = step(hi - lo, count)
    first = math.ceil(lo / s - 1e-9)
    last = math.floor(hi / s + 1e-9)
    return [round(i * s, 12) for i in range(first, last + 1)]


def nice_top(hi: float, count: int) -> float:
    """``hi`` rounded up to a multiple of the step of about ``count`` ticks from zero."""
    if hi <= 0:
        return 1.0
    s = step(hi, count)
    return max(math.ceil(hi / s - 1e-9), 1) * s


def fitting_ticks(
    lo: float, hi: float, *, length: float, fmt: Callable[[float], str], size: float,
    count: int = 10, gap: float = 8.0,
) -> list[float]:  # fmt: skip
    """Ticks over [``lo``, ``hi``] (``length`` px) whose labels, written by ``fmt`` at font size
    ``size``, stand ``gap`` px apart: fewer ticks until they do (every tick keeps its label)."""
    for n in range(count, 1, -1):
        values = ticks(lo, hi, n)
        if len(values) < 2:
            continue
        px = length / (hi - lo) if hi > lo else 0.0
        widest = max(text_width(fmt(v), size) for v in values)
        if (values[1] - values[0]) * px >= widest + gap:
            return values
    return ticks(lo, hi, 1)


def decades(lo: float, hi: float) -> list[float]:
    """The powers of ten within [``lo``, ``hi``] (both powers of ten)."""
    a, b = round(math.log10(lo)), round(math.log10(hi))
    return [10.0**k for k in range(a, b + 1)]


def between_decades(lo: float, hi: float) -> list[float]:
    """2..9 times each power of ten within [``lo``, ``hi``]: a log axis' minor grid."""
    out = []
    for d in decades(lo, hi)[:-1]:
        out += [m * d for m in range(2, 10)]
    return out


# -- how a tick is written --------------------------------------------------------------------


def _trim(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text else text


def minus(text: str) -> str:
    """A typographic minus sign for a leading hyphen."""
    return "−" + text[1:] if text.startswith("-") else text


def grouped(value: float) -> str:
    """``2,000``, ``0.5``, ``−1,500`` (the fewest decimals that write the value, up to 6)."""
    return minus(_trim(f"{value:,.6f}"))


def percent(value: float) -> str:
    """A fraction as a percentage: ``0.4`` -> ``40%``."""
    return minus(_trim(f"{value * 100:.1f}")) + "%"


_SI = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float) -> str:
    """``0``, ``500``, ``10k``, ``1.25M`` (up to four decimals of the unit)."""
    for factor, unit in _SI:
        if abs(value) >= factor:
            return minus(_trim(f"{value / factor:,.4f}")) + unit
    return minus(_trim(f"{value:.6f}"))


def general(value: float) -> str:
    """``0.01``, ``1``, ``100``, ``1k``, ``10M``: a decade of a log axis."""
    if value >= 1000:
        return si(value)
    if value >= 1:
        return f"{value:.0f}"
    return _trim(f"{value:.12f}")
