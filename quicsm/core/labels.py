"""A label value as text: what ``--where`` and ``--by`` compare against, and what
``quicsm inspect`` and ``quicsm labels`` print."""

from __future__ import annotations

from typing import Any

__all__ = ["label_text"]


def label_text(value: Any) -> str:
    """A label value as the text ``--where`` and ``--by`` compare against."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value is None:
        return "null"
    return str(value)
