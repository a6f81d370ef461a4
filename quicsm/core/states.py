"""The canonical congestion-state taxonomy.

The eight states come from Kakhki et al., "Taking a Long Look at QUIC" (IMC 2017), Table 3;
BBR's four phases are added for stacks that run BBR. ``Unknown`` stands for a producer's state
name that no alias table entry maps; the original name is always kept in ``raw_state``.

The mapping from every known producer's names onto these lives in :mod:`quicsm.core.aliases`.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from quicsm.core import tables

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

#: polars dtype of every ``state`` column.
STATE_DTYPE: Final[pl.Enum] = pl.Enum(list(CANONICAL_STATES))
