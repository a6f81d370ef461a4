"""The few distribution functions the tests and intervals use, from ``scipy.special``: the same
functions ``scipy.stats`` evaluates for them (its ``norm``, ``t`` and ``chi2`` call these), at a
fraction of its import (``scipy.stats`` takes about a second of CPU to import, ``scipy.special``
a third of that), so a report or a diff does not pay for the rest of ``scipy.stats``.
"""

from __future__ import annotations

import math

from scipy import special

__all__ = ["chi2_sf", "normal_ppf", "normal_sf", "t_ppf", "t_sf"]


def normal_ppf(q: float) -> float:
    """The standard normal quantile of ``q`` (``scipy.stats.norm.ppf``)."""
    return float(special.ndtri(q))


def normal_sf(x: float) -> float:
    """P(Z > x) for a standard normal Z (``scipy.stats.norm.sf``)."""
    return float(special.ndtr(-x))


def t_sf(x: float, df: float) -> float:
    """P(T > x) for Student's t with ``df`` degrees of freedom (``scipy.stats.t.sf``)."""
    return float(special.stdtr(df, -x))


def t_ppf(q: float, df: float) -> float:
    """The quantile ``q`` of Student's t with ``df`` degrees of freedom (``scipy.stats.t.ppf``;
    its ends, as it gives them: ``stdtrit`` does not)."""
    if q == 0.0:
        return -math.inf
    if q == 1.0:
        return math.inf
    return float(special.stdtrit(df, q))


def chi2_sf(x: float, df: float) -> float:
    """P(X > x) for a chi-squared X with ``df`` degrees of freedom (``scipy.stats.chi2.sf``)."""
    return float(special.chdtrc(df, x))
