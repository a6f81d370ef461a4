"""DOT text of a model in the style of the paper's Fig. 13, and rendering it with Graphviz.

Kakhki et al. (IMC 2017), Fig. 13: each state is labelled with the fraction of time spent in it
(red) and each transition with its probability (black). As in Synoptic's own output, the dummy
INITIAL node is a box and TERMINAL a diamond. When a state is split into several nodes, each
node shows the time spent in that node (:mod:`quicsm.model.replay`); if visits cannot be attributed
to nodes, each shows its state's total in parentheses.

The DOT text is a pure function of the model: node names are ``n<id>`` (ids are stable, see
:mod:`quicsm.model.tables`), nodes and edges are written in id order, and every number has a fixed
format (two decimals, like the figure — so a probability below 0.005 reads ``0.00``, as the
paper's caption notes), so golden files can compare it byte for byte. Rendering runs Debian's
Graphviz ``dot`` program (``scripts/setup`` installs it).
"""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING, Final

from quicsm.core.errors import QuicsmError
from quicsm.stats.descriptive import INITIAL, TERMINAL

if TYPE_CHECKING:
    from quicsm.model.tables import Model

#: formats :func:`render_dot` produces.
RENDER_FORMATS: Final[tuple[str, ...]] = ("svg", "png", "pdf")
#: resolution of PNG output (dots per inch).
PNG_DPI: Final[int] = 144
#: longest a single ``dot`` run may take, in seconds.
DOT_TIMEOUT_S: Final[float] = 300.0

FONT: Final[str] = "Helvetica"
FRACTION_COLOR: Final[str] = "red"
PROBABILITY_COLOR: Final[str] = "black"


def _fmt(x: float | None) -> str:
    """Fixed two-decimal format used for every number in the diagram."""
    return "–" if x is None else f"{x:.2f}"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def model_to_dot(model: Model, *, title: str | None = None) -> str:
    """The model as DOT text (see the module docstring). ``title`` overrides the caption."""
    nodes = model.node_fractions()
    split = set(model.states_sharing_a_fraction())
    caption = title
    if caption is None:
        where = "node" if model.states_with_several_nodes() and not split else "state"
        caption = (
            f"{model.algorithm} model of {model.stats.traces} trace"
            f"{'' if model.stats.traces == 1 else 's'}: red = fraction of time in the {where}, "
            "black = transition probability"
        )
        if split:
            caption += "; (x) = total of a state drawn as several nodes"
    lines = [
        "digraph quicsm {",
        f"  graph [fontname={_quote(FONT)}, fontsize=11, labelloc=b, nodesep=0.35, ranksep=0.45,"
        f" label={_quote(caption)}];",
        f'  node [fontname={_quote(FONT)}, fontsize=12, shape=ellipse, margin="0.12,0.04"];',
        f"  edge [fontname={_quote(FONT)}, fontsize=10, fontcolor={PROBABILITY_COLOR},"
        " arrowsize=0.7];",
    ]
    for row in nodes.iter_rows(named=True):
        state = row["state"]
        if state == INITIAL:
            attrs = f"label={_quote(INITIAL)}, shape=box"
        elif state == TERMINAL:
            attrs = f"label={_quote(TERMINAL)}, shape=diamond"
        else:
            frac = _fmt(row["fraction"])
            if state in split:
                frac = f"({frac})"
            label = (
                f"<{_html_escape(state)}<BR/>"
                f'<FONT COLOR="{FRACTION_COLOR}" POINT-SIZE="11">{frac}</FONT>>'
            )
            attrs = f"label={label}"
        lines.append(f"  n{row['id']} [{attrs}];")
    for row in model.edges.iter_rows(named=True):
        lines.append(
            f"  n{row['source']} -> n{row['target']} [label={_quote(_fmt(row['probability']))}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def dot_available() -> bool:
    """Whether Graphviz's ``dot`` program is on PATH."""
    return shutil.which("dot") is not None


def render_dot(dot: str, *, format: str = "svg") -> bytes:
    """Render DOT text with Graphviz ``dot`` into ``format`` (svg, png or pdf)."""
    if format not in RENDER_FORMATS:
        raise QuicsmError(
            f"cannot render format {format!r}; choose one of {', '.join(RENDER_FORMATS)}"
        )
    exe = shutil.which("dot")
    if exe is None:
        raise QuicsmError(
            "rendering a diagram needs Graphviz's `dot` program, which is not on PATH; install "
            "Graphviz (Debian package graphviz, which scripts/setup installs), or write DOT/JSON "
            "only (--format dot or --format json)"
        )
    argv = [exe, f"-T{format}"]
    if format == "png":
        argv.append(f"-Gdpi={PNG_DPI}")
    try:
        done = subprocess.run(
            argv, input=dot.encode(), capture_output=True, timeout=DOT_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise QuicsmError(f"Graphviz dot did not finish within {DOT_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip()
        raise QuicsmError(f"Graphviz dot failed (exit {done.returncode}): {err}")
    return done.stdout


def render_model(model: Model, *, format: str = "svg", title: str | None = None) -> bytes:
    """The model's Fig. 13-style diagram rendered by Graphviz ``dot`` (svg, png or pdf)."""
    return render_dot(model_to_dot(model, title=title), format=format)


def model_svg(model: Model) -> str | None:
    """The diagram as SVG text, or None when Graphviz is not installed (Jupyter's display hook)."""
    if not dot_available():
        return None
    return render_model(model, format="svg").decode()
