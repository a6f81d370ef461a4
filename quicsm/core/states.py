"""The canonical congestion-state taxonomy.

The eight states come from Kakhki et al., "Taking a Long Look at QUIC" (IMC 2017), Table 3;
BBR's four phases are added for stacks that run BBR. ``Unknown`` stands for a producer's state
name that no alias table entry maps; the original name is always kept in ``raw_state``.

The mapping from every known producer's names onto these lives in :mod:`quicsm.core.aliases`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from quicsm.core import tables

if TYPE_CHECKING:
    import polars as pl

#: the paper's eight states; their order (positions are the deriver's state codes) is defined
#: in tables.json, shared with the native core
PAPER_STATES: Final[tuple[str, ...]] = tables.STATES
BBR_STATES: Final[tuple[str, ...]] = ("Startup", "Drain", "ProbeBW", "ProbeRTT")
UNKNOWN: Final[str] = "Unknown"

#: ApplicationLimited split by why the sender was short of data (:mod:`quicsm.extract.sendable`):
#: only states of a model read with ``split_app_limited``; appended, so the codes of the others
#: stay as they were
APP_LIMITED: Final[str] = "ApplicationLimited"
APP_LIMITED_APPLICATION: Final[str] = "ApplicationLimited (application)"
APP_LIMITED_FLOW_CONTROL: Final[str] = "ApplicationLimited (flow control)"
APP_LIMITED_PACING: Final[str] = "ApplicationLimited (pacing)"
APP_LIMITED_UNKNOWN: Final[str] = "ApplicationLimited (unknown)"
APP_LIMITED_CAUSES: Final[tuple[str, ...]] = (
    APP_LIMITED_APPLICATION,
    APP_LIMITED_FLOW_CONTROL,
    APP_LIMITED_PACING,
    APP_LIMITED_UNKNOWN,
)

CANONICAL_STATES: Final[tuple[str, ...]] = (
    *PAPER_STATES,
    *BBR_STATES,
    UNKNOWN,
    *APP_LIMITED_CAUSES,
)

if TYPE_CHECKING:
    #: polars dtype of every ``state`` column.
    STATE_DTYPE: pl.Enum


def __getattr__(name: str) -> Any:
    """``STATE_DTYPE``, made when first asked for: importing the taxonomy does not import
    polars (a reader that needs no frame, such as ``quicsm inspect``, starts without it)."""
    if name == "STATE_DTYPE":
        import polars as pl

        dtype = pl.Enum(list(CANONICAL_STATES))
        globals()["STATE_DTYPE"] = dtype
        return dtype
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
