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

from typing import Final

import numpy as np

#: decimals kept (milliseconds to the microsecond)
DECIMALS: Final[int] = 3
#: below this magnitude ``t * 1000`` is below 2**41: its rounding error is at most 2**-12
_FAST_BOUND: Final[float] = float(2**31)
#: fractions this close to a half are left to Python
_NEAR_HALF: Final[float] = 2.0**-10


def round_ms(times: np.ndarray) -> np.ndarray:
    """``[round(t, 3) for t in times]`` as a float64 array."""
    t = np.asarray(times, dtype=np.float64)
    scaled = t * 1000.0
    out = np.rint(scaled) / 1000.0
    fraction = scaled - np.floor(scaled)
    slow = ~(np.abs(t) < _FAST_BOUND) | (np.abs(fraction - 0.5) < _NEAR_HALF)
    if slow.any():
        where = np.flatnonzero(slow)
        out[where] = [round(x, DECIMALS) for x in t[where].tolist()]
    return out
