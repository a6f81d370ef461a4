"""quicsm: infer the congestion-control state machine of QUIC implementations from traces.

The public API is imported lazily so that ``import quicsm`` stays cheap::

    import quicsm
    transitions = quicsm.read_transitions(["traces/"])
    model = quicsm.infer(transitions)
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "QuicsmError": "quicsm.core.errors",
    "QlogError": "quicsm.core.errors",
    "CANONICAL_STATES": "quicsm.core.states",
    "STATE_DTYPE": "quicsm.core.states",
    "read_transitions": "quicsm.extract.read",
    "scan_transitions": "quicsm.extract.read",
    "read_metrics": "quicsm.extract.read",
    "read_traces": "quicsm.extract.read",
    "Diagnostics": "quicsm.core.diagnostics",
    "QuicsmWarning": "quicsm.core.diagnostics",
    "expand_paths": "quicsm.qlog.paths",
    "infer": "quicsm.model.inference",
    "Model": "quicsm.model.tables",
    **dict.fromkeys(
        (
            "Stats",
            "compute_stats",
            "time_in_state",
            "time_in_state_summary",
            "transition_counts",
            "transition_probabilities",
            "dwell_times",
            "dwell_summary",
        ),
        "quicsm.stats.descriptive",
    ),  # fmt: skip
    "diff": "quicsm.compare.diff",
    "DiffResult": "quicsm.compare.diff",
    **dict.fromkeys(("EventLog", "mine_invariants", "infer_graph"), "quicsm.model.synoptic"),
    **dict.fromkeys(("Profile", "generate_transitions"), "quicsm.testing.synthetic"),
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'quicsm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
