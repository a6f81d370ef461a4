"""The diff graph of the report (edges coloured by the change in probability), and inlining
Graphviz SVG. The per-group state machines are :func:`quicsm.render.dot.model_to_dot` drawings.

Graphs are laid out by Graphviz ``dot`` into SVG, which is inlined. Node names are canonical
state names only; nothing from a trace reaches the DOT text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import polars as pl

from quicsm.core.errors import QuicsmError

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
                f' [label=<{state}<BR/><FONT POINT-SIZE="9">{100 * shift:+.0f} pp of time</FONT>>,'
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
            label = f"new {r['b_probability']:.2f}" if a_n == 0 else "gone"
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


_PROLOG = re.compile(r"<\?xml.*?\?>|<!DOCTYPE.*?>|<!--.*?-->", re.S)


def render_svg(dot: str) -> str:
    """Lay out DOT with Graphviz and return the ``<svg>`` element alone (for inlining)."""
    import graphviz

    try:
        raw = graphviz.Source(dot).pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound as exc:
        raise QuicsmError(
            "the report's state-machine drawings need Graphviz's `dot` program "
            "(Debian package graphviz; scripts/setup installs it)"
        ) from exc
    svg = _PROLOG.sub("", raw).strip()
    # graphviz sets a fixed size in pt; the "fsm" class lets CSS scale it to the column width
    return svg.replace("<svg ", '<svg class="fsm" ', 1)
