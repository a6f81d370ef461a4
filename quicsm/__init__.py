"""quicsm: infer the congestion-control state machine of QUIC implementations from traces.

The public API is imported lazily so that ``import quicsm`` stays cheap::

    import quicsm
    transitions = quicsm.read_transitions(["traces/"])
    model = quicsm.infer(transitions)
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from quicsm.core.version import __version__

# numpy's bundled OpenBLAS starts a worker thread per core when numpy is imported, and each
# worker spins for about 2**28 cycles before it first sleeps: ~0.1 s of CPU per core in every
# process, for BLAS work quicsm hardly does (numpy serves it for byte and index arithmetic).
# Unless the user set it, idle workers sleep at once (the smallest OpenBLAS allows, 2**4
# cycles); BLAS calls still use every core. Only a process that imports quicsm before numpy is
# affected; docs/design.md ("Start-up") says how to choose otherwise.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

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
    "read_packet_timelines": "quicsm.extract.packets",
    "Diagnostics": "quicsm.core.diagnostics",
    "QuicsmWarning": "quicsm.core.diagnostics",
    "expand_paths": "quicsm.qlog.paths",
    "infer": "quicsm.model.inference",
    "Model": "quicsm.model.tables",
    **dict.fromkeys(("model_to_dot", "render_model", "render_dot"), "quicsm.render.dot"),
    **dict.fromkeys(("side_by_side", "plot"), "quicsm.render.notebook"),
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
    "identify": "quicsm.controllers.api",
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


def _model_html(model: Any) -> str:
    from quicsm.render.notebook import model_html

    return model_html(model)


def _diff_html(result: Any) -> str:
    from quicsm.render.notebook import diff_html

    return diff_html(result)


def register_jupyter(shell: Any = None) -> None:
    """Show results as rich HTML in Jupyter/IPython: a model as its diagram (scaled to the cell)
    with its time-in-state table, a diff as its summary and tables with significant rows
    highlighted (:mod:`quicsm.render.notebook`); a model also has an SVG view.

    Views are functions over results (``quicsm.render``), so the results themselves know
    nothing of rendering; this registers the views with IPython's display formatter by class
    name, which imports nothing until a result is displayed. Called on ``import quicsm``
    inside IPython.
    """
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return
    formatters = shell.display_formatter.formatters
    formatters["image/svg+xml"].for_type_by_name("quicsm.model.tables", "Model", _model_svg)
    formatters["text/html"].for_type_by_name("quicsm.model.tables", "Model", _model_html)
    formatters["text/html"].for_type_by_name("quicsm.compare.result", "DiffResult", _diff_html)


register_jupyter()
