"""DOT text of a model in the style of the paper's Fig. 13, and rendering it with Graphviz.

Kakhki et al. (IMC 2017), Fig. 13: each state is labelled with the share of time spent in it
(red) and each transition with its probability (black). Here both are percentages ("<0.1%"
rather than a bare ``0.00``), each node is filled with its state's colour
(:mod:`quicsm.render.colours`) and, as in Synoptic's own output, the dummy INITIAL node is a box
and TERMINAL a diamond. When a state is split into several nodes, each node shows the time spent
in that node (:mod:`quicsm.model.replay`), labelled "of time in this node"; if visits cannot be
attributed to nodes, each node shows the state's total, labelled as such, and the node's own
share of the state's visits.

Node names are the state names (``SlowStart``; ``SlowStart 2`` for the second node of a split
state, in id order), so a drawing's hover text names states rather than ids. The DOT text is a
pure function of the model: ids are stable (:mod:`quicsm.model.tables`), nodes and edges are
written in id order and every number has a fixed format, so golden files can compare it byte
for byte. Rendering runs Debian's Graphviz ``dot`` program (``scripts/setup`` installs it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from quicsm.core.choices import RENDER_FORMATS as RENDER_FORMATS  # what render_dot produces
from quicsm.core.errors import QuicsmError
from quicsm.core.numbers import pct, short_pct
from quicsm.render.colours import STATE_TINT, state_colour, tint
from quicsm.render.escape import esc
from quicsm.stats.descriptive import INITIAL, TERMINAL

if TYPE_CHECKING:
    import polars as pl

    from quicsm.model.tables import Model

#: resolution of PNG output (dots per inch).
PNG_DPI: Final[int] = 144
#: longest a single ``dot`` run may take, in seconds.
DOT_TIMEOUT_S: Final[float] = 300.0

FONT: Final[str] = "Helvetica"
FRACTION_COLOR: Final[str] = "#c0001a"
PROBABILITY_COLOR: Final[str] = "black"
#: how strongly a node is filled with its state's colour (0 = white)
NODE_TINT: Final[float] = STATE_TINT
#: the outline of every state node
NODE_OUTLINE: Final[str] = "#666666"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def node_names(nodes: pl.DataFrame) -> dict[int, str]:
    """A readable, unique DOT name per node id: the state, numbered when it has several."""
    states = dict(zip(nodes["id"].to_list(), nodes["state"].to_list(), strict=True))
    total: dict[str, int] = {}
    for state in states.values():
        total[state] = total.get(state, 0) + 1
    seen: dict[str, int] = {}
    names: dict[int, str] = {}
    for node_id in sorted(states):
        state = states[node_id]
        seen[state] = seen.get(state, 0) + 1
        names[node_id] = state if total[state] == 1 else f"{state} {seen[state]}"
    return names


def node_label(
    state: str,
    share: float | None,
    *,
    state_total: float | None = None,
    visit_share: float | None = None,
    split: bool = False,
    wrap: bool = False,
) -> str:
    """The HTML-like label of a state node (see the module docstring); ``wrap``: a long state
    name breaks at its last word seam (``CongestionAvoidance-`` / ``Maxed``)."""
    name = esc(state)
    if wrap and len(state) > WRAP_NAMES_OVER:  # at every word seam: the narrowest node
        seams = [0, *(i for i in range(1, len(state)) if state[i].isupper()), len(state)]
        name = "-<BR/>".join(esc(state[a:b]) for a, b in zip(seams, seams[1:], strict=False))
    if state_total is not None:
        lines = [
            f"state: {short_pct(state_total)} of time",
            f"node: {short_pct(visit_share)} of its visits",
        ]
        if wrap:  # compact: the caption says which line is the state's, which the node's
            lines = [f"{short_pct(state_total)} of time", f"{short_pct(visit_share)} of visits"]
    else:
        lines = [f"{short_pct(share)} of time" + (" in this node" if split else "")]
    size = COMPACT_FONT if wrap else 11
    body = "<BR/>".join(
        f'<FONT COLOR="{FRACTION_COLOR}" POINT-SIZE="{size}">{esc(line)}</FONT>' for line in lines
    )
    return f"<{name}<BR/>{body}>"


def node_attrs(state: str, label: str) -> str:
    if state == INITIAL:
        return f"label={_quote(INITIAL)}, shape=box"
    if state == TERMINAL:
        return f"label={_quote(TERMINAL)}, shape=diamond"
    colour = state_colour(state)
    # one dark outline for every state: a light state (Init) still shows on white
    return (
        f'label={label}, style=filled, fillcolor="{tint(colour, NODE_TINT)}", '
        f'color="{NODE_OUTLINE}"'
    )


#: the width of an edge of probability 0 and 1, points: its width tells how likely it is
EDGE_WIDTHS: Final[tuple[float, float]] = (0.6, 4.0)


def edge_attrs(probability: float | None, *, paired: bool = False) -> str:
    """An edge's label (its probability) and width (in proportion to it). ``paired``: the
    edge has one in the opposite direction; its label is then tied to it by a line, so the
    two labels side by side each point at their own edge."""
    p = 0.0 if probability is None else min(max(float(probability), 0.0), 1.0)
    width = EDGE_WIDTHS[0] + (EDGE_WIDTHS[1] - EDGE_WIDTHS[0]) * p
    out = f"label={_quote(short_pct(probability))}, penwidth={width:.2f}"
    return out + (", decorate=true" if paired else "")


def _caption(model: Model, *, attributed: bool, unattributed: bool) -> str:
    n = model.stats.traces
    caption = (
        f"{model.algorithm} model of {n} trace{'' if n == 1 else 's'}: red = share of time in "
        "the state"
    )
    if attributed:
        caption += " (in the node, for a state drawn as several nodes)"
    if unattributed:
        caption += (
            "; a state drawn as several nodes shows its total and each node's share of its visits"
        )
    return caption + (
        ", black = probability of the transition out of its source (also the edge's width)"
    )


#: a model with more nodes than this is drawn compact (closer nodes, long names on two lines),
#: so that its text stays legible at a page's width (a Synoptic model of the shipped corpus:
#: 24 nodes, 1,937 px wide at 72 dpi drawn loose, 1,294 px compact)
COMPACT_OVER: Final[int] = 12
#: state names longer than this break at their last word seam in a compact drawing
WRAP_NAMES_OVER: Final[int] = 16


#: the text size of a compact drawing, points: every label (names, shares, probabilities,
#: caption) at one size, and the drawing narrow enough that it is at least 12 px on a page
#: about 1,000 px wide (tests/test_infer.py measures it)
COMPACT_FONT: Final[int] = 12
#: characters of a compact drawing's caption per line (it would otherwise set the width)
COMPACT_CAPTION_CHARS: Final[int] = 90


def _wrapped(text: str, chars: int) -> str:
    """``text`` quoted for DOT, in lines (``\\n``) of at most ``chars`` characters."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= chars:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "\\n".join(_quote(line)[1:-1] for line in lines).join('""')


def graph_header(caption: str, *, compact: bool = False) -> list[str]:
    """The graph, node and edge defaults. ``compact`` (a model of many nodes, as Synoptic's):
    box nodes with little margin, close together, every text at :data:`COMPACT_FONT` and the
    caption on several lines, so that the drawing stays narrow enough to read at page width
    (an ellipse is about 1.4 times as wide as its text; the widest rank sets the width)."""
    if compact:
        return [
            "digraph quicsm {",
            f"  graph [fontname={_quote(FONT)}, fontsize={COMPACT_FONT}, labelloc=b, "
            f"nodesep=0.05, ranksep=0.3, label={_wrapped(caption, COMPACT_CAPTION_CHARS)}];",
            f"  node [fontname={_quote(FONT)}, fontsize={COMPACT_FONT}, shape=box, "
            'margin="0.04,0.02"];',
            f"  edge [fontname={_quote(FONT)}, fontsize={COMPACT_FONT}, "
            f"fontcolor={PROBABILITY_COLOR}, arrowsize=0.7];",
        ]
    return [
        "digraph quicsm {",
        f"  graph [fontname={_quote(FONT)}, fontsize=11, labelloc=b, nodesep=0.35, "
        f"ranksep=0.45, label={_quote(caption)}];",
        f'  node [fontname={_quote(FONT)}, fontsize=12, shape=ellipse, margin="0.12,0.04"];',
        f"  edge [fontname={_quote(FONT)}, fontsize=10, fontcolor={PROBABILITY_COLOR},"
        " arrowsize=0.7];",
    ]


def model_to_dot(model: Model, *, title: str | None = None) -> str:
    """The model as DOT text (see the module docstring). ``title`` overrides the caption."""
    nodes = model.node_fractions()
    names = node_names(model.nodes)
    unattributed = set(model.states_sharing_a_fraction())
    several = set(model.states_with_several_nodes())
    events: Mapping[str, int] = {}
    if unattributed:
        per_state: dict[str, int] = {}
        for state, n in model.nodes.select("state", "events").iter_rows():
            per_state[state] = per_state.get(state, 0) + int(n)
        events = per_state
    caption = title
    if caption is None:
        caption = _caption(
            model, attributed=bool(several - unattributed), unattributed=bool(unattributed)
        )
    compact = model.nodes.height > COMPACT_OVER
    lines = graph_header(caption, compact=compact)
    for row in nodes.iter_rows(named=True):
        state = row["state"]
        extra: dict[str, Any] = {}
        if state in unattributed:
            total = events.get(state, 0)
            extra = {
                "state_total": row["fraction"],
                "visit_share": row["events"] / total if total else None,
            }
        label = node_label(state, row["fraction"], split=state in several, wrap=compact, **extra)
        lines.append(f"  {_quote(names[row['id']])} [{node_attrs(state, label)}];")
    pairs = {(row["source"], row["target"]) for row in model.edges.iter_rows(named=True)}
    for row in model.edges.iter_rows(named=True):
        lines.append(
            f"  {_quote(names[row['source']])} -> {_quote(names[row['target']])} "
            f"[{edge_attrs(row['probability'], paired=(row['target'], row['source']) in pairs)}];"
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


_PROLOG = re.compile(r"<\?xml.*?\?>|<!DOCTYPE.*?>|<!--.*?-->", re.S)
_SIZE = re.compile(r'(<svg\b[^>]*?)\swidth="[^"]*"\s+height="[^"]*"', re.S)


def inline_svg(dot: str, *, css_class: str = "fsm") -> str:
    """DOT laid out by Graphviz as an ``<svg>`` element to inline in HTML: no XML prolog, no
    fixed size (it scales to its container's width, keeping its aspect), class ``css_class``."""
    svg = _PROLOG.sub("", render_dot(dot, format="svg").decode()).strip()
    svg = _SIZE.sub(r'\1 width="100%"', svg, count=1)
    return svg.replace("<svg ", f'<svg class="{esc(css_class)}" ', 1)


def model_svg(model: Model) -> str | None:
    """The diagram as SVG text, or None when Graphviz is not installed (Jupyter's display hook)."""
    if not dot_available():
        return None
    return render_model(model, format="svg").decode()


# -- two models drawn on one layout -----------------------------------------------------------

#: edge labels of a shared layout are set in a monospace font and padded to this many
#: characters, so every label has the same size whatever its number (``<0.1%`` is the longest)
_EDGE_LABEL_CHARS: Final[int] = 5
_MONO: Final[str] = "Courier"
_NBSP: Final[str] = "\u00a0"
#: font size of a shared layout's nodes (its edge labels are one point smaller)
_SHARED_FONT: Final[int] = 13


def _node_width(state: str) -> float:
    """Width in inches of a fixed-size node that holds the state name and a share line."""
    chars = max(len(state), len("state: 100% of time"))
    per_char = 0.088 * _SHARED_FONT / 12  # inches per character of Helvetica at that size
    return round(0.25 + 1.3 * per_char * chars, 2)  # an ellipse around a line of text


def shared_model_dots(
    models: Sequence[Model | None],
    *,
    captions: Sequence[str],
    shares: Sequence[Mapping[str, float] | None] | None = None,
) -> list[str]:
    """DOT texts of several models (the groups of a comparison) with one common layout:
    every text holds the union of the nodes and edges, in the same order and with the same
    sizes (fixed-size nodes, equal-width edge labels), so Graphviz places every state at the
    same spot in each drawing. A state or transition a model lacks is drawn faint ("not
    seen") or left invisible. ``None`` stands for a group without states.

    ``shares``: per model, state -> the share of time to print on its nodes instead of the
    model's pooled one (a page that states one definition of "% of time", such as the
    report's mean of per-trace shares), with one decimal as the page's other numbers."""
    if len(captions) != len(models):
        raise QuicsmError("shared_model_dots needs one caption per model")
    if shares is not None and len(shares) != len(models):
        raise QuicsmError("shared_model_dots needs one map of shares per model")
    from quicsm.model.tables import label_rank

    per_model: list[tuple[dict[str, dict[str, Any]], dict[tuple[str, str], float]]] = []
    states: dict[str, str] = {}
    for model in models:
        if model is None:
            per_model.append(({}, {}))
            continue
        names = node_names(model.nodes)
        unattributed = set(model.states_sharing_a_fraction())
        several = set(model.states_with_several_nodes())
        nodes: dict[str, dict[str, Any]] = {}
        for row in model.node_fractions().iter_rows(named=True):
            name = names[row["id"]]
            states[name] = row["state"]
            nodes[name] = {
                "state": row["state"],
                "fraction": row["fraction"],
                "split": row["state"] in several,
                "unattributed": row["state"] in unattributed,
            }
        edges = {
            (names[s], names[t]): float(p)
            for s, t, p in model.edges.select("source", "target", "probability").iter_rows()
        }
        per_model.append((nodes, edges))
    order = sorted(states, key=lambda n: (*label_rank(states[n]), n))
    all_edges = sorted(
        {e for _, edges in per_model for e in edges},
        key=lambda e: (order.index(e[0]), order.index(e[1])),
    )
    out = []
    for i, ((nodes, edges), caption) in enumerate(zip(per_model, captions, strict=True)):
        given = None if shares is None else shares[i]
        lines = graph_header(caption)
        # compact: two of these drawings sit side by side in a report column, their text
        # still at least 9 px on screen (tests/test_report_browser.py)
        lines.append("  graph [nodesep=0.12, ranksep=0.28];")
        lines.append(f"  node [fixedsize=true, height=0.62, fontsize={_SHARED_FONT}];")
        lines.append(f"  edge [fontname={_quote(_MONO)}, fontsize={_SHARED_FONT - 1}];")
        for name in order:
            state = states[name]
            node = nodes.get(name)
            if state in (INITIAL, TERMINAL):
                attrs = node_attrs(state, "")
                attrs += ", width=1.1" if state == INITIAL else ", width=1.4"
                if node is None:
                    attrs += ', style=dashed, color="#bbbbbb", fontcolor="#999999"'
            elif node is None:
                label = f'<{esc(state)}<BR/><FONT POINT-SIZE="{_SHARED_FONT}">not seen</FONT>>'
                attrs = (
                    f'label={label}, style=dashed, color="#bbbbbb", fontcolor="#999999", '
                    f"width={_node_width(state)}"
                )
            elif given is not None:  # the page's definition, the state's share on each node
                line = f"{pct(given.get(state))} of time"
                label = (
                    f'<{esc(state)}<BR/><FONT COLOR="{FRACTION_COLOR}" '
                    f'POINT-SIZE="{_SHARED_FONT}">{esc(line)}</FONT>>'
                )
                attrs = f"{node_attrs(state, label)}, width={_node_width(state)}"
            else:
                label = node_label(
                    state,
                    node["fraction"],
                    split=node["split"],
                    state_total=node["fraction"] if node["unattributed"] else None,
                )
                label = label.replace('POINT-SIZE="11"', f'POINT-SIZE="{_SHARED_FONT}"')
                attrs = f"{node_attrs(state, label)}, width={_node_width(state)}"
            lines.append(f"  {_quote(name)} [{attrs}];")
        for source, target in all_edges:
            p = edges.get((source, target))
            text = (short_pct(p) if p is not None else "").rjust(_EDGE_LABEL_CHARS, _NBSP)
            style = "" if p is not None else ", style=invis"
            lines.append(f"  {_quote(source)} -> {_quote(target)} [label={_quote(text)}{style}];")
        lines.append("}")
        out.append("\n".join(lines) + "\n")
    return out


# -- the diff of two models -------------------------------------------------------------------

_HIDDEN = {"INITIAL", "TERMINAL"}


def _node_id(state: str) -> str:
    return '"' + state.replace('"', "") + '"'


def diff_dot(
    edges: pl.DataFrame,
    presence: Mapping[str, list[str]],
    states: list[str],
    *,
    time_shift: Mapping[str, tuple[float, bool]] | None = None,
) -> str:
    """Union graph of both groups: red edges became more likely in B, blue less likely (solid
    when significant, faint otherwise); dashed edges exist in one group only; states only in A
    are dashed grey, states only in B bold green. ``time_shift`` (state -> (difference in time
    share, significant)) fills states whose time share changed significantly: red for more
    time in B, blue for less."""
    time_shift = time_shift or {}
    only_a, only_b = set(presence["states_only_a"]), set(presence["states_only_b"])
    lines = [
        "digraph diff {",
        '  graph [rankdir=TB, nodesep=0.35, ranksep=0.45, bgcolor="transparent"];',
        '  node [shape=ellipse, fontname="Helvetica", fontsize=11, style=filled, '
        'fillcolor="#ffffff", color="#444444"];',
        '  edge [fontname="Helvetica", fontsize=9, arrowsize=0.6];',
    ]
    for state in states:
        if state in _HIDDEN:
            continue
        attrs = ""
        shift, significant = time_shift.get(state, (0.0, False))
        if significant and shift == shift:
            fill = "#f9d9d5" if shift > 0 else "#d9e4f5"
            attrs = (
                f' [label=<{state}<BR/><FONT POINT-SIZE="9">{100 * shift:+.0f} pp of time '
                "(mean per trace)</FONT>>,"
                f' fillcolor="{fill}", penwidth=1.6]'
            )
        if state in only_a:
            attrs = (
                f' [label=<{state}<BR/><FONT POINT-SIZE="9">only in A</FONT>>, style="dashed", '
                'color="#888888", fontcolor="#888888"]'
            )
        elif state in only_b:
            attrs = (
                f' [label=<{state}<BR/><FONT POINT-SIZE="9">only in B</FONT>>, penwidth=2.5, '
                'color="#1e8449", fillcolor="#e9f7ef"]'
            )
        lines.append(f"  {_node_id(state)}{attrs};")
    for r in edges.iter_rows(named=True):
        s, t = r["source"], r["target"]
        if s in _HIDDEN or t in _HIDDEN:
            continue
        a_n, b_n = r["a_count"], r["b_count"]
        d = r["difference"]
        if a_n == 0 and b_n == 0:
            continue
        if a_n == 0 or b_n == 0:
            colour = "#c0392b" if a_n == 0 else "#2962b0"
            # in percentage points, as every other edge: new = from 0, gone = to 0
            p = r["b_probability"] if a_n == 0 else r["a_probability"]
            p = 0.0 if p is None or p != p else float(p)
            label = f"new +{100 * p:.0f} pp" if a_n == 0 else f"gone −{100 * p:.0f} pp"
            lines.append(
                f'  {_node_id(s)} -> {_node_id(t)} [style=dashed, color="{colour}", '
                f'fontcolor="{colour}", label="{label}"];'
            )
            continue
        if d != d:
            continue
        colour = "#c0392b" if d > 0 else "#2962b0"
        if not r["significant"]:
            colour = "#c8c8c8" if abs(d) < 0.05 else ("#e6a39b" if d > 0 else "#9fb6de")
        width = 0.8 + 6.0 * min(abs(d), 0.5)
        label = f"{100 * d:+.0f} pp" + (" *" if r["significant"] else "")
        if abs(d) < 0.005 and not r["significant"]:
            label = ""
        lines.append(
            f'  {_node_id(s)} -> {_node_id(t)} [color="{colour}", fontcolor="{colour}", '
            f'penwidth={width:.2f}, label="{label}"];'
        )
    lines.append("}")
    return "\n".join(lines) + "\n"
