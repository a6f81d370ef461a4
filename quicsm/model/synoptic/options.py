"""Checks of the options every entry point of the engine takes (one wording, one error type)."""

from __future__ import annotations

from quicsm.core.errors import InputError


def tail_length(k: object) -> int:
    """``k``, the k-tails depth, as a positive int; anything else is an :class:`InputError`."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k (the k-tails depth) must be a positive integer, got {k!r}")
    return k
