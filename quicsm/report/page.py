"""The page header every report format shares: its heading and the line under it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from quicsm.core.version import __version__

if TYPE_CHECKING:
    from quicsm.report.sections import ComparisonView


def heading(views: Sequence[ComparisonView], title: str | None) -> str:
    """``quicsm report: <title>`` — the given title, the one comparison's "B vs A", or a
    generic name for several."""
    text = title or (views[0].title if len(views) == 1 else "version-to-version comparison")
    return f"quicsm report: {text}"


def byline(*, alpha: float, generated_at: str | None) -> str:
    """quicsm's version, when the report was generated, and α."""
    parts = [f"quicsm {__version__}"]
    if generated_at:
        parts.append(f"generated {generated_at}")
    parts.append(f"α = {alpha:g}")
    return " · ".join(parts)
