"""How quicsm writes numbers for people: shares, differences of shares, milliseconds, p-values.

One set of formatters for every text view (the diff's sentences and tables, the report, the
``infer`` summary), so that one quantity reads the same everywhere. Missing values (``None`` or
NaN) read ``–``.
"""

from __future__ import annotations

import math

MISSING = "–"


def _missing(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def pct(x: float | None) -> str:
    """A fraction as a percentage with one decimal: ``0.361`` -> ``"36.1%"``."""
    if _missing(x):
        return MISSING
    assert x is not None
    return f"{100 * x:.1f}%"


def pp(x: float | None) -> str:
    """A difference of fractions in signed percentage points: ``-0.115`` -> ``"-11.5 pp"``."""
    if _missing(x):
        return MISSING
    assert x is not None
    return f"{100 * x:+.1f} pp"


def ms(x: float | None, *, unit: bool = True) -> str:
    """Milliseconds: one decimal below 10 ms, whole numbers from there (``"4.2 ms"``,
    ``"375 ms"``); ``unit=False`` leaves out the ``" ms"``."""
    if _missing(x):
        return MISSING
    assert x is not None
    text = f"{x:.1f}" if abs(x) < 10 else f"{x:.0f}"
    return f"{text} ms" if unit else text


def change(x: float | None) -> str:
    """A relative change in signed whole percent: ``-0.957`` -> ``"-96%"``."""
    if _missing(x):
        return MISSING
    assert x is not None
    return f"{100 * x:+.0f}%"


def format_p(p: float | None, *, note: str = "") -> str:
    """``"p < 0.001"``, ``"p = 0.013"`` or the plain reason no test was run."""
    if p is None:
        return note or "no test"
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.3f}"


def short_pct(x: float | None) -> str:
    """A share as a compact percentage for diagrams: ``42%``, ``4.2%``, ``<0.1%``, ``0%``;
    ``–`` when unknown (tables use :func:`pct`, one decimal)."""
    if x is None or x != x:
        return MISSING
    if x <= 0:
        return "0%"
    if x < 0.001:
        return "<0.1%"
    if x < 0.0995:
        return f"{100 * x:.1f}%"
    return f"{100 * x:.0f}%"
