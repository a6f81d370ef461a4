"""Times rounded to the microsecond, as Python's ``round(t, 3)`` rounds them, for whole arrays.

``round(t, 3)`` rounds the exact binary value of ``t`` to three decimals and returns the float
nearest to that decimal. ``numpy.round`` multiplies by 1000 first, and the product's own
rounding can tip a value lying just beside a half (``x.xxx5``) the other way, so it differs from
Python in rare cases. Here ``rint(t * 1000) / 1000`` is used where it cannot differ (``t`` small
enough that the product is exact to 2**-11, and its fraction not within 2**-10 of a half: the
product's error cannot cross the half, and the division rounds ``k / 1000`` to the nearest float
as Python's parse of the decimal does), and Python's own ``round`` for the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # imported where used: the constants are read without it
    import polars as pl

#: decimals kept (milliseconds to the microsecond)
DECIMALS: Final[int] = 3
#: below this magnitude ``t * 1000`` is below 2**41: its rounding error is at most 2**-12
_FAST_BOUND: Final[float] = float(2**31)
#: fractions this close to a half are left to Python
_NEAR_HALF: Final[float] = 2.0**-10


def round_ms(times: pl.Series) -> pl.Series:
    """``[round(t, 3) for t in times]`` as a Float64 series (polars only: no numpy). The
    division is by a column of 1000.0, not a literal: polars divides by a scalar as a
    multiplication by its reciprocal, which is not the correctly rounded quotient."""
    import polars as pl

    n = len(times)
    frame = pl.DataFrame(
        {"t": times.cast(pl.Float64), "k": pl.repeat(1000.0, n, dtype=pl.Float64, eager=True)}
    )
    t = pl.col("t")
    scaled = t * 1000.0
    out = frame.select(
        (scaled.round(0) / pl.col("k")).alias("out"),
        (~(t.abs() < _FAST_BOUND) | ((scaled - scaled.floor() - 0.5).abs() < _NEAR_HALF))
        .fill_null(False)
        .alias("slow"),
    )
    result = out.get_column("out")
    slow = out.get_column("slow")
    if slow.any():
        where = slow.arg_true()
        exact = [round(x, DECIMALS) for x in times.gather(where).to_list()]
        result = result.scatter(where, exact)
    return result


def round_ms_exprs(t: pl.Expr, thousands: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """:func:`round_ms` inside a query: ``(rounded, slow)``, ``rounded`` right wherever
    ``slow`` (an aggregate: whether any row is one Python must round, see
    :func:`round_ms`) is false; ``thousands`` is a column of 1000.0."""
    scaled = t * 1000.0
    rounded = scaled.round(0) / thousands
    slow = (~(t.abs() < _FAST_BOUND) | ((scaled - scaled.floor() - 0.5).abs() < _NEAR_HALF)).any()
    return rounded, slow
