"""Rich HTML views for Jupyter: a model as its diagram with its time-in-state table, a diff as
its summary and tables (significant rows highlighted), several models side by side on one
shared layout, and connections over time (:func:`plot`, the chart of ``quicsm plot``).
:func:`quicsm.register_jupyter` hooks the first two into IPython's display formatter;
:func:`side_by_side` and :func:`plot` are called directly.

Every SVG is scaled to the width of its cell (``width:100%``), so nothing is clipped however
narrow the notebook. All text from traces is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from quicsm.render.escape import esc

if TYPE_CHECKING:
    import polars as pl

    from quicsm.compare.diff import DiffResult
    from quicsm.extract.packets import PacketTimeline
    from quicsm.model.tables import Model
    from quicsm.render.charts import Chart


_STYLE = (
    "<style>.quicsm table{border-collapse:collapse;font-size:12px;margin:6px 0}"
    ".quicsm th,.quicsm td{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}"
    ".quicsm td.num{text-align:right;font-variant-numeric:tabular-nums}"
    ".quicsm tr.sig td{background:#fde2e1;font-weight:600}"
    ".quicsm svg{max-width:100%;height:auto}</style>"
)


def _svg_of(dot: str) -> str:
    from quicsm.render.dot import dot_available, inline_svg

    if not dot_available():
        return "<p><i>(Graphviz's dot is not installed: no diagram)</i></p>"
    return inline_svg(dot)


def _state_rows(model: Model) -> str:
    from quicsm.core.numbers import short_pct as pct
    from quicsm.render.outputs import state_table

    rows = []
    for r in state_table(model).iter_rows(named=True):
        median = r["dwell_median_ms"]
        rows.append(
            f"<tr><td>{esc(r['state'])}</td><td class='num'>{pct(r['fraction'])}</td>"
            f"<td class='num'>{r['visits']}</td><td class='num'>{r['traces']}</td>"
            f"<td class='num'>{'–' if median is None else f'{median:.1f}'}</td></tr>"
        )
    return (
        "<table><tr><th>state</th><th>time</th><th>visits</th><th>traces</th>"
        "<th>median dwell (ms)</th></tr>" + "".join(rows) + "</table>"
    )


def model_html(model: Model) -> str:
    """The model's diagram (scaled to the cell) above its time-in-state table."""
    from quicsm.render.dot import model_to_dot

    s = model.stats
    head = (
        f"<p><b>{esc(model.algorithm)} model</b> of {s.traces} trace{'s' * (s.traces != 1)}: "
        f"{model.nodes.height} nodes, {model.edges.height} edges, "
        f"{model.invariants.height} invariants</p>"
    )
    return (
        f"<div class='quicsm'>{_STYLE}{head}{_svg_of(model_to_dot(model))}"
        f"{_state_rows(model)}</div>"
    )


def diff_html(d: DiffResult) -> str:
    """The diff's header, ranked summary and tables; significant rows highlighted."""
    from quicsm.render.diff_format import table_sections

    header, sections, tables, presence = table_sections(d)
    parts = [f"<div class='quicsm'>{_STYLE}<p>{esc(header)}</p>"]
    for title, sentences in sections:
        parts.append(f"<h4>{esc(title)}</h4><ul>")
        for text, items in sentences:
            sub = "".join(f"<li>{esc(i)}</li>" for i in items)
            parts.append(f"<li><b>{esc(text)}</b>" + (f"<ul>{sub}</ul>" if sub else "") + "</li>")
        parts.append("</ul>")
    for title, head, rows in tables:
        parts.append(f"<h4>{esc(title)}</h4>")
        if not rows:
            parts.append("<p>(none)</p>")
            continue
        body = "".join(
            f"<tr{' class=sig' if r[-1] == 'yes' else ''}>"
            + "".join(f"<td>{esc(c)}</td>" for c in r)
            + "</tr>"
            for r in rows
        )
        parts.append(
            "<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head) + f"</tr>{body}</table>"
        )
    parts.append("<h4>Invariants and presence</h4><ul>")
    parts += [f"<li>{esc(s)}</li>" for s in presence]
    parts.append("</ul></div>")
    return "".join(parts)


def side_by_side(models: Mapping[str, Model]) -> str:
    """Several models next to each other on one shared layout (a state sits at the same spot
    in each drawing), each scaled to its column; columns of equal width, at least 320 px."""
    from quicsm.render.dot import shared_model_dots

    names = list(models)
    dots = shared_model_dots([models[n] for n in names], captions=["" for _ in names])
    cells = "".join(
        f"<div style='min-width:0'><h4>{esc(name)}</h4>{_svg_of(dot)}</div>"
        for name, dot in zip(names, dots, strict=True)
    )
    # a grid: every drawing gets the same column width, also alone on the last row
    return (
        f"<div class='quicsm'>{_STYLE}<div style='display:grid;gap:12px;align-items:start;"
        f"grid-template-columns:repeat(auto-fill,minmax(320px,1fr))'>{cells}</div></div>"
    )


def plot(
    transitions: pl.DataFrame,
    metrics: pl.DataFrame,
    traces: Sequence[str],
    *,
    titles: Sequence[str] | None = None,
    packets: Mapping[str, PacketTimeline] | None = None,
    account: pl.DataFrame | None = None,
) -> Chart:
    """Connections as ``quicsm plot`` draws them (window, RTT, pacing rate where logged, loss
    and timeout events, state bands), one below the other, from the frames of
    :func:`quicsm.read_transitions` and :func:`quicsm.read_metrics`; displays in Jupyter.
    ``traces`` are trace ids (``FILE#N``); ``titles`` one line under each; ``packets`` (from
    :func:`quicsm.read_packet_timelines`) adds the packets panel of the traces it holds;
    ``account`` (:func:`quicsm.extract.account.read_account`) gives each connection its counts
    (spurious losses drawn where the account finds them)."""
    from quicsm.core.errors import InputError
    from quicsm.extract.account import facts_of
    from quicsm.render.charts import PLOT_WIDTH, Chart, connections_spec
    from quicsm.render.connection import connection_series

    titles = list(titles) if titles is not None else [""] * len(traces)
    if len(titles) != len(traces):
        raise InputError(f"plot: {len(traces)} traces but {len(titles)} titles")
    series = [
        connection_series(
            transitions,
            metrics,
            str(t),
            title=title,
            packets=None if packets is None else packets.get(str(t)),
            account=None if account is None else facts_of(account, str(t)),
        )
        for t, title in zip(traces, titles, strict=True)
    ]
    # at most four points per two pixel columns: a saved notebook stays small
    return Chart(connections_spec(series, points=PLOT_WIDTH // 2, static=True))
