"""quicsm: infer the congestion-control state machine of QUIC implementations from traces.

The public API is imported lazily so that ``import quicsm`` stays cheap::

    import quicsm
    transitions = quicsm.read_transitions(["traces/"])
    model = quicsm.infer(transitions)
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from quicsm.core.version import __version__

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
    **dict.fromkeys(("model_to_dot", "render_model", "render_dot"), "quicsm.render.dot"),
    **dict.fromkeys(
        ("Stats", "compute_stats", "time_in_state", "time_in_state_summary", "transition_counts",
         "transition_probabilities", "dwell_times", "dwell_summary"),
        "quicsm.stats.descriptive",
    ),  # fmt: skip
    "diff": "quicsm.compare.diff",
    "DiffResult": "quicsm.compare.diff",
    **dict.fromkeys(("EventLog", "mine_invariants", "infer_graph"), "quicsm.model.synoptic"),
    **dict.fromkeys(("Profile", "generate_transitions"), "quicsm.testing.synthetic"),
}

__all__ = ["__version__", "register_jupyter", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'quicsm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def _model_svg(model: Any) -> str | None:
    from quicsm.render.dot import model_svg

    return model_svg(model)


def register_jupyter(shell: Any = None) -> None:
    """Show models as their diagrams in Jupyter/IPython.

    Views are functions over results (``quicsm.render``), so the model itself knows nothing of
    rendering; this registers the SVG view with IPython's display formatter by class name, which
    imports nothing until a model is displayed. Called on ``import quicsm`` inside IPython.
    """
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return
    svg = shell.display_formatter.formatters["image/svg+xml"]
    svg.for_type_by_name("quicsm.model.tables", "Model", _model_svg)


register_jupyter()
