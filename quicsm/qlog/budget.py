"""The per-record work budget: how many JSON values one record may hold.

Decoding a record builds one Python object per value, about 24 to 72 bytes each, so a record
made only of tiny values (``[{},{},…]``, ``[1.5,1.5,…]``) costs up to ~32 bytes of memory per
byte of text; within :attr:`~quicsm.qlog.blocks.ReadLimits.max_record_bytes` (64 MiB) that is
2 GB for one record. A record is decoded only if it holds at most :data:`MAX_RECORD_VALUES`
objects, arrays and element separators (``{``, ``[`` and ``,`` outside strings: every value of
the record but the first in each container is preceded by a separator, so this bounds the number
of values); one that holds more is a record problem, reported (strict) or skipped (lenient)
like any other. No real qlog event comes near it.

The native decoder (``native/src/scan.rs``) hands every record over the cheap bound
(:func:`over_budget`'s first test) back to the Python reader, so both readers decide alike.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Final

from quicsm.core import tables

if TYPE_CHECKING:
    import numpy as np

#: the most objects, arrays and element separators one record may hold (about 75 MB of Python
#: objects at most); defined in quicsm/core/tables.json, which the native scan reads too
MAX_RECORD_VALUES: Final[int] = tables.MAX_RECORD_VALUES

_SLICE = 1 << 20
_QUOTE, _BACKSLASH = 34, 92


@cache
def _counted() -> np.ndarray:
    """The bytes counted, as a lookup table (numpy is imported only when a record is long
    enough to need it)."""
    import numpy as np

    table = np.zeros(256, dtype=bool)
    table[list(b"{[,")] = True
    return table


def expected() -> str:
    """What a record over the budget was expected to be, in error messages."""
    return f"a record of at most {MAX_RECORD_VALUES:,} JSON values"


def over_budget(record: bytes | bytearray | memoryview) -> int | None:
    """The number of values (as counted above) of a record holding more than
    :data:`MAX_RECORD_VALUES`, else ``None``. Linear in the record, at C speed; records too
    short to hold that many are not looked at."""
    if len(record) <= MAX_RECORD_VALUES:
        return None
    data = bytes(record)
    if data.count(b",") + data.count(b"{") + data.count(b"[") <= MAX_RECORD_VALUES:
        return None  # the bound counts separators inside strings too
    count = _count_outside_strings(data)
    return count if count > MAX_RECORD_VALUES else None


def _count_outside_strings(data: bytes) -> int:
    """``{``, ``[`` and ``,`` outside JSON strings, a slice at a time (bounded index arrays)."""
    import numpy as np

    total = 0
    in_string = False
    carried = 0  # backslashes ending the previous slice
    for lo in range(0, len(data), _SLICE):
        v = np.frombuffer(data, dtype=np.uint8, count=min(_SLICE, len(data) - lo), offset=lo)
        quotes = np.flatnonzero(v == _QUOTE)
        backslash = v == _BACKSLASH
        if len(quotes) and (carried or backslash.any()):
            # a quote is escaped by an odd run of backslashes just before it
            index = np.arange(len(v))
            last_other = np.maximum.accumulate(np.where(backslash, -1, index))
            before = quotes - 1
            at = np.maximum(before, 0)
            run = np.where(before >= 0, before - last_other[at], 0)
            reaches_start = (before < 0) | (last_other[at] < 0)
            run = run + np.where(reaches_start, carried, 0)
            quotes = quotes[run % 2 == 0]
        tail = len(v) - len(bytes(v).rstrip(b"\\"))
        carried = tail + (carried if tail == len(v) else 0)
        counted = np.flatnonzero(_counted()[v])
        outside = (np.searchsorted(quotes, counted) + in_string) % 2 == 0
        total += int(outside.sum())
        in_string ^= bool(len(quotes) & 1)
    return total
