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
    "QuicsmError": "quicsm.errors",
    "QlogError": "quicsm.errors",
    "CANONICAL_STATES": "quicsm.states",
    "STATE_DTYPE": "quicsm.states",
    "read_transitions": "quicsm.read",
    "scan_transitions": "quicsm.read",
    "read_metrics": "quicsm.read",
    "read_traces": "quicsm.read",
    "Diagnostics": "quicsm.qlog.problems",
    "QuicsmWarning": "quicsm.qlog.problems",
    "expand_paths": "quicsm.paths",
    "infer": "quicsm.inference",
    "Model": "quicsm.model",
    **dict.fromkeys(
        ("Stats", "compute_stats", "time_in_state", "time_in_state_summary", "transition_counts",
         "transition_probabilities", "dwell_times", "dwell_summary"),
        "quicsm.stats",
    ),  # fmt: skip
    "diff": "quicsm.comparison",
    "DiffResult": "quicsm.comparison",
    **dict.fromkeys(("EventLog", "mine_invariants", "infer_graph"), "quicsm.synoptic"),
    **dict.fromkeys(("Profile", "generate_transitions"), "quicsm.synthetic"),
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'quicsm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
