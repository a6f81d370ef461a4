"""The self-contained HTML comparison report: one file, inline CSS and SVG, no scripts and no
external references (a Content-Security-Policy forbids every fetch), readable from disk.

Every string that comes from a trace or the command line passes through
:func:`quicsm.render.escape.esc`; the charts are static SVG drawn by :mod:`quicsm.render.svg_charts`
(no script engine), the diagrams Graphviz SVG (:mod:`quicsm.render.dot`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from quicsm.core.diagnostics import Diagnostics
from quicsm.core.numbers import format_p, pp
from quicsm.render import dot, svg_charts
from quicsm.render.colours import GROUP_COLOURS
from quicsm.render.diff_format import caveat_lines, what_changed
from quicsm.render.escape import esc
from quicsm.render.findings import change_text, evidence_short, scope_text, why_items
from quicsm.render.skipped import skipped_html
from quicsm.render.test_words import describe_tests, policy_sentence
from quicsm.report.methods import methods_items
from quicsm.report.page import byline, heading
from quicsm.report.sections import SHARE_OF_TIME, ComparisonView, loss_rows

_CSS = """
:root { --ink:#1d2330; --muted:#5b6475; --rule:#dde2ea; --a:#4e79a7; --b:#f28e2b; }
* { box-sizing: border-box; }
body { margin:0; background:#f5f7fa; color:var(--ink);
  font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; }
header { background:#1d2330; color:#fff; padding:22px 32px; }
header h1 { margin:0 0 4px; font-size:22px; font-weight:600; }
header p { margin:0; color:#c9d1de; font-size:13px; }
main { max-width:1120px; margin:0 auto; padding:8px 24px 48px; }
nav { font-size:13px; margin:14px 0; color:var(--muted); }
nav a { color:var(--a); margin-right:14px; }
section.comparison > h2 { font-size:20px; margin:28px 0 8px; padding-bottom:6px;
  border-bottom:2px solid var(--ink); }
.card { background:#fff; border:1px solid var(--rule); border-radius:8px; padding:16px 20px;
  margin:14px 0; }
.card > h3 { margin:0 0 10px; font-size:16px; }
.card > h3 .num { color:var(--muted); font-weight:400; margin-right:6px; }
ol.findings { margin:0; padding-left:22px; }
div.verdict { background:#eef3fb; border-left:4px solid #4e79a7; padding:8px 12px;
  margin:0 0 12px; }
div.verdict p { margin:2px 0; overflow-wrap:anywhere; }
ol.findings li { margin:4px 0; }
ol.findings li.state { font-weight:600; }
p.caution { background:#fff4e5; border-left:4px solid #c0392b; padding:6px 10px;
  margin:4px 0 10px; }
.card h4 { margin:12px 0 4px; font-size:14px; }
.quiet { color:var(--muted); font-size:13px; }
.groups { display:flex; gap:24px; flex-wrap:wrap; font-size:13px; margin-bottom:10px; }
.swatch { display:inline-block; width:11px; height:11px; border-radius:2px; margin-right:5px;
  vertical-align:-1px; }
.pair { display:flex; gap:16px; flex-wrap:wrap; align-items:flex-start; }
.pair figure { flex:1 1 460px; margin:0; min-width:0; }
.pair.fsms { flex-wrap:nowrap; }
.pair.fsms figure { flex:1 1 0; }
figure { margin:8px 0; }
figcaption { font-size:13px; color:var(--muted); margin-top:4px; overflow-wrap:anywhere; }
svg { max-width:100%; height:auto; }
svg.fsm { display:block; margin:0 auto; width:100%; height:auto; }
svg.chart { display:block; }
table { border-collapse:collapse; font-size:13px; margin:8px 0; width:100%; }
th, td { border-bottom:1px solid var(--rule); padding:4px 8px; text-align:left;
  vertical-align:top; }
th { background:#f0f3f7; font-weight:600; }
td.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
tr.sig td { background:#fff4e5; }
details { margin:8px 0; }
summary { cursor:pointer; color:var(--a); font-size:14px; }
ul.files { font-size:12px; font-family:ui-monospace,monospace; max-height:260px; overflow:auto;
  overflow-wrap:anywhere; }
.legend { font-size:12px; color:var(--muted); }
.legend b.up { color:#c0392b; } .legend b.down { color:#2962b0; }
"""


def render_html(
    views: Sequence[ComparisonView],
    *,
    alpha: float,
    title: str | None = None,
    generated_at: str | None = None,
    command: str | None = None,
    extra: Sequence[str] = (),
    skipped: Diagnostics | None = None,
) -> str:
    """``extra``: further sections (HTML), placed before Methods; ``skipped``: what lenient
    reading skipped, in a box above the comparisons and in Methods (nothing when it skipped
    nothing)."""
    head = heading(views, title)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(head)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<header><h1>{esc(head)}</h1>"
        f"<p>{esc(byline(alpha=alpha, generated_at=generated_at))}</p></header>",
        "<main>",
    ]
    box = skipped_html(skipped)
    if box:
        parts.append(box)
    if len(views) > 1:
        links = "".join(f'<a href="#cmp{i}">{esc(v.title)}</a>' for i, v in enumerate(views))
        parts.append(f'<nav>Comparisons: {links}<a href="#methods">Methods</a></nav>')
    for i, view in enumerate(views):
        parts.append(_comparison(view, i, alpha=alpha))
    parts.extend(extra)
    parts.append(
        _methods(views, alpha=alpha, generated_at=generated_at, command=command, skipped=skipped)
    )
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _card(number: int, title: str, body: str) -> str:
    return f'<div class="card"><h3><span class="num">{number}.</span>{esc(title)}</h3>{body}</div>'


def _comparison(view: ComparisonView, index: int, *, alpha: float) -> str:
    r = view.result
    a, b = r.names
    groups = (
        '<div class="groups">'
        + "".join(
            f'<span><span class="swatch" style="background:{c}"></span><b>{esc(g.name)}</b> '
            f"— {_plural(g.n_traces, 'trace')}, {_plural(len(g.files), 'file')}</span>"
            for g, c in zip(view.groups, GROUP_COLOURS, strict=True)
        )
        + "</div>"
    )
    out = [f'<section class="comparison" id="cmp{index}"><h2>{esc(view.title)}</h2>', groups]
    out.append(_card(1, "What changed", _summary(view, alpha=alpha)))
    out.append(_card(2, "State machines", _fsms(view)))
    out.append(_card(3, "Time in state and dwell times", _time_in_state(view)))
    out.append(_card(4, "Congestion window of a representative trace", _series(view)))
    out.append(_card(5, "Scenario matrix", _matrix(view, a=a, b=b)))
    out.append("</section>")
    return "\n".join(out)


def _summary(view: ComparisonView, *, alpha: float) -> str:
    """Outcomes and the state changes that explain them, then the evidence, then the caveats."""
    r = view.result
    parts: list[str] = []
    parts.append(_verdict(view, alpha=alpha))
    for caveat in view.caveats:
        parts.append(f'<p class="caution"><b>Caution:</b> {esc(caveat)}</p>')
    parts.append("<h4>Details: every change, strongest first</h4>")
    parts.append('<ol class="findings">')
    parts += [f"<li>{esc(line)}</li>" for line in what_changed(r, view.explanations)]
    parts.append("</ol>")
    if view.explanations:
        parts.append("<h4>Why: the events behind each change</h4>")
        for e in view.explanations:
            items = "".join(f"<li>{esc(item)}</li>" for item in why_items(e, r, view.explanations))
            parts.append(
                f'<details open><summary>{esc(change_text(e, r))} <span class="quiet">'
                f"[{esc(scope_text(e))}]</span></summary><ul>{items}</ul></details>"
            )
        parts.append(
            '<p class="quiet">Evidence ranks indicators by Cliff\'s δ = P(B &gt; A) − P(B &lt; A) '
            "over pairs of traces; it explains, it is not a further test.</p>"
        )
    header, rows = loss_rows(view)
    if rows:
        parts.append("<h4>Loss detection</h4>")
        parts.append(
            "<table><tr>"
            + "".join(f"<th>{esc(h)}</th>" for h in header)
            + "</tr>"
            + "".join(
                "<tr>"
                + f"<td>{esc(r[0])}</td>"
                + "".join(f'<td class="num">{esc(c)}</td>' for c in r[1:])
                + "</tr>"
                for r in rows
            )
            + "</table>"
        )
        parts.append(
            '<p class="quiet">Packets declared lost by the packet threshold and by the time '
            "threshold (RFC 9002 §6.1), the losses later acknowledged (spurious), and probe "
            "timeouts (§6.2), over the groups' sender traces, from each connection's account: "
            "“from packets”: counted from the trace's packets and ACK frames (a producer that "
            "logs no such event is counted alike); “not logged”: no trace of the group logs "
            "that event and its packets cannot tell, so its count says nothing.</p>"
        )
    parts += _app_limited_html(view)
    caveats = caveat_lines(r)
    if caveats:
        parts.append("<h4>Caveats</h4><ul>")
        parts += [f'<li class="quiet">{esc(c)}</li>' for c in caveats]
        parts.append("</ul>")
    family = r.settings.get("family", r.n_tests)
    explore = r.settings.get("exploratory", 0)
    parts.append(
        f'<p class="quiet">Differences are B − A. Significance: {esc(policy_sentence(r))}'
        f" ({family} primary and {explore} exploratory tests can reach significance, of "
        f"{r.n_tests} run), at α = {alpha:g}. Details in the tables below and in Methods.</p>"
    )
    return "\n".join(parts)


def verdict_lines(view: ComparisonView, *, alpha: float) -> list[tuple[str, str]]:
    """The verdict the report opens with, at most three lines: what changed, how sure, why
    (the first significant change that has its evidence explained, and its strongest
    indicator)."""
    r = view.result
    top = next((e for e in view.explanations if e.significant), None)
    if top is None:
        return [("What changed", f"no significant change at α = {alpha:g}"),
                ("How sure", f"{r.n_tests} tests run; see the details below")]  # fmt: skip
    what, _, sure = change_text(top, r).partition(" (")
    size, sep, rest = sure.partition("; ")
    if sep and size.endswith("%"):  # the relative change belongs to what changed
        what, sure = f"{what} ({size})", rest
    lines = [
        ("What changed", f"{what} [{scope_text(top)}]"),
        ("How sure", sure.removesuffix(")") or "significant"),
    ]
    if top.evidence:
        lines.append(("Why", evidence_short(top.evidence[0])))
    return lines


def _verdict(view: ComparisonView, *, alpha: float) -> str:
    return (
        '<div class="verdict">'
        + "".join(f"<p><b>{esc(k)}:</b> {esc(v)}</p>" for k, v in verdict_lines(view, alpha=alpha))
        + "</div>"
    )


def _fsms(view: ComparisonView) -> str:
    r = view.result
    figs = []
    for group in view.groups:
        drawing = dot.inline_svg(group.fsm_dot) if group.fsm_dot else "<p>No states.</p>"
        figs.append(
            f"<figure>{drawing}<figcaption><b>{esc(group.name)}</b> "
            f"({_plural(group.n_traces, 'trace')}): observed model; % of time in red (as "
            "everywhere on this page: the mean of per-trace shares), transition "
            "probabilities in black; both groups are drawn on one layout, so a state sits at the "
            "same spot in each (dashed: not seen in this group)</figcaption></figure>"
        )
    states = [s for s in r.states["state"].to_list()]
    shift = {
        s: (d, bool(sig_))
        for s, d, sig_ in r.states.select("state", "difference", "significant").iter_rows()
    }
    diff_svg = dot.inline_svg(
        dot.diff_dot(r.edges, r.presence, _order_states(states), time_shift=shift)
    )
    legend = (
        '<p class="legend">Diff graph: <b class="up">red</b> edges became more likely in B, '
        '<b class="down">blue</b> less likely (labels in percentage points; * = significant, '
        "faint = not significant); dashed edges and nodes exist in one group only. States "
        "filled red take significantly more of the time in B, blue less.</p>"
    )
    return (
        f'<div class="pair fsms">{figs[0]}{figs[1]}</div>'
        f"<figure>{diff_svg}<figcaption>Diff graph: {esc(view.title)}</figcaption></figure>"
        + legend
        + _tables(view)
    )


def _order_states(states: list[str]) -> list[str]:
    from quicsm.core.states import CANONICAL_STATES

    rank = {s: i for i, s in enumerate(CANONICAL_STATES)}
    return sorted(states, key=lambda s: (rank.get(s, len(rank)), s))


def _num(x: float | None, fmt: str) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return format(x, fmt)


def _p(row: dict[str, Any]) -> str:
    """A row's one p-value, as every section quotes it: adjusted within its family, and which
    adjustment (Holm: primary; BH: exploratory)."""
    if row["p_value"] is None:
        return format_p(None, note=row["note"])
    how = {"primary": "Holm", "exploratory": "BH"}.get(row.get("family") or "", "")
    return f"{format_p(row['p_value'])} {how}".rstrip()


def _tables(view: ComparisonView) -> str:
    r = view.result
    a, b = (esc(n) for n in r.names)
    rows = []
    for e in r.edges.iter_rows(named=True):
        if e["source"] in ("INITIAL",):
            continue
        cls = ' class="sig"' if e["significant"] else ""
        rows.append(
            f"<tr{cls}><td>{esc(e['source'])} → {esc(e['target'])}</td>"
            f'<td class="num">{_num(e["a_probability"], ".3f")} ({e["a_count"]})</td>'
            f'<td class="num">{_num(e["b_probability"], ".3f")} ({e["b_count"]})</td>'
            f'<td class="num">{_num(e["difference"], "+.3f")}</td><td>{esc(e["test"])}</td>'
            f"<td>{esc(_p(e))}</td></tr>"
        )
    src_rows = []
    for s in r.sources.iter_rows(named=True):
        cls = ' class="sig"' if s["significant"] else ""
        src_rows.append(
            f'<tr{cls}><td>{esc(s["source"])}</td><td class="num">{s["a_count"]}</td>'
            f'<td class="num">{s["b_count"]}</td><td class="num">{_num(s["effect"], ".3f")}</td>'
            f"<td>{esc(s['test'])}</td>"
            f"<td>{esc(format_p(s['p_value'], note=s['note']))}</td></tr>"
        )
    return (
        "<details><summary>Transition tables (ranked by effect size)</summary>"
        "<table><tr><th>source state</th><th>exits in A</th><th>exits in B</th>"
        "<th>total variation</th><th>test</th><th>p</th></tr>" + "".join(src_rows) + "</table>"
        f"<table><tr><th>transition</th><th>{a}</th><th>{b}</th><th>difference</th>"
        "<th>test</th><th>p (adjusted)</th></tr>" + "".join(rows) + "</table></details>"
    )


def _time_in_state(view: ComparisonView) -> str:
    r = view.result
    bars = []
    for s in r.states.iter_rows(named=True):
        note = _p(s)
        if s["significant"]:
            note += f"  {pp(s['difference'])}"
        bars.append(
            svg_charts.Bar(
                label=s["state"],
                values=(s["a_fraction"], s["b_fraction"]),
                lows=(s["a_ci_low"], s["b_ci_low"]),
                highs=(s["a_ci_high"], s["b_ci_high"]),
                note=note,
                significant=bool(s["significant"]),
            )
        )
    boxes = []
    for d in r.dwell.iter_rows(named=True):
        q = view.dwell_quantiles.get(d["state"], (None, None))
        note = _p(d)
        if d["log2_ratio"] == d["log2_ratio"] and d["log2_ratio"] is not None:
            note += f"  ×{2 ** d['log2_ratio']:.2f}"
        boxes.append(
            svg_charts.Box(
                d["state"], q, (d["a_visits"], d["b_visits"]), note, bool(d["significant"])
            )
        )
    dwell = svg_charts.dwell_svg(boxes, names=r.names)
    return (
        svg_charts.time_in_state_svg(bars, names=r.names)
        + f'<p class="quiet">{esc(SHARE_OF_TIME)}; with 95% confidence intervals; ranked by '
        "the size of the difference; the test of each row is in the tables of the diff.</p>"
        + (dwell if dwell is not None else "<p>No dwell times.</p>")
        + '<p class="quiet">Dwell time of each visit: whiskers p10–p90, box p25–p75, line '
        f"median (log scale). Test: {esc(describe_tests([r.dwell]))}; the ratio is B's median "
        "over A's.</p>"
    )


def _series(view: ComparisonView) -> str:
    """The groups' representative traces as small multiples, each on its own axes."""
    drawn: list[tuple[str, str, svg_charts.Series]] = []
    notes = []
    for g in view.groups:
        if g.representative is None:
            notes.append(f"<li><b>{esc(g.name)}</b>: {esc(g.series_note)}</li>")
            continue
        file, trace = g.representative
        where = trace if trace.startswith(file) else f"{trace} of {file}"
        caption = f"<b>{esc(g.name)}</b>: trace {esc(where)}"
        if g.representative_title:
            caption += f", titled “{esc(g.representative_title)}”"
        if g.series_note:
            caption += f" — {esc(g.series_note)}"
        notes.append(f"<li>{caption}</li>")
        if g.series is not None and g.series.times_ms:
            end = max([*g.series.times_ms, *(b[1] for b in g.series.bands)])
            drawn.append((g.name, f"{_short(where)} · {end:.0f} ms", g.series))
    chart = svg_charts.traces_svg(drawn) if drawn else ""
    scope = (
        f"Both traces come from <b>{esc(view.stratum)}</b>"
        + (" (where the first change above was found)" if view.explanations else "")
        + ". "
        if view.stratum is not None
        else ""
    )
    return (
        f"<figure>{chart}<figcaption><ul>{''.join(notes)}</ul></figcaption></figure>"
        + f'<p class="quiet">{scope}Each trace is drawn on its own axes (time from its start '
        "to its end, window from zero to its largest value): compare shapes, not heights. The "
        "representative trace of a group is the one whose time-in-state profile is closest (L1 "
        "distance) to the mean profile of the group's traces there. Coloured bands: the state "
        "at each moment; ticks at the bottom: packets declared lost.</p>"
    )


def _short(text: str, room: int = 60) -> str:
    from quicsm.render.connection import ellipsize

    return ellipsize(text, room)


def _matrix(view: ComparisonView, *, a: str, b: str) -> str:
    m = view.matrix
    if m is None:
        return f'<p class="quiet">{esc(view.matrix_note)}</p>'
    what = (
        f"time share of {m.metric.split(':', 1)[1]}" if m.metric.startswith("state:") else m.metric
    )
    chart = svg_charts.heatmap_svg(
        m.rows,
        m.cols,
        m.cells,
        row_label=m.row_label,
        col_label=m.col_label or "",
        title=f"{what}: % difference of {b} from {a}",
    )
    return chart + (
        f'<p class="legend">Each cell: (mean in {esc(b)} − mean in {esc(a)}) / mean in {esc(a)}. '
        '<b class="up">Red</b>: lower in B, <b class="down">blue</b>: higher in B (for '
        "completion time, red means B is faster, as in the paper's Fig. 6); white: no "
        "difference; pale with n.s.: not significant, or too few traces. The last numbers "
        "are the traces in A/B. "
        f"{esc(m.note)}.</p>"
    )


def _methods(
    views: Sequence[ComparisonView],
    *,
    alpha: float,
    generated_at: str | None,
    command: str | None,
    skipped: Diagnostics | None = None,
) -> str:
    items = methods_items(
        views, alpha=alpha, generated_at=generated_at, command=command, skipped=skipped
    )
    lis = "".join(f"<li><b>{esc(k)}</b>: {esc(v)}</li>" for k, v in items)
    files: list[str] = []
    for v in views:
        for g in v.groups:
            files += [f"{g.name}: {f}" for f in g.files]
    file_list = "".join(f"<li>{esc(f)}</li>" for f in sorted(set(files)))
    return (
        f'<div class="card" id="methods"><h3><span class="num">6.</span>Methods</h3>'
        f"<ul>{lis}</ul><details><summary>Input files ({len(set(files))})</summary>"
        f'<ul class="files">{file_list}</ul></details></div>'
    )


def _app_limited_html(view: ComparisonView) -> list[str]:
    """The breakdown of each group's ApplicationLimited time by cause (a table and what it
    says); none when the groups have no connection account."""
    from quicsm.render.app_limited import (
        BREAKDOWN_NOTE,
        BREAKDOWN_TITLE,
        breakdown_table,
        group_accounts,
    )

    comp = view.comparison
    header, rows = breakdown_table(group_accounts((comp.a, comp.b)), view.result.names)
    if not rows:
        return []
    return [
        f"<h4>{esc(BREAKDOWN_TITLE)}</h4>",
        '<table class="app-limited"><tr>'
        + "".join(f"<th>{esc(h)}</th>" for h in header)
        + "</tr>"
        + "".join(
            "<tr>"
            + f"<td>{esc(r[0])}</td>"
            + "".join(f'<td class="num">{esc(c)}</td>' for c in r[1:])
            + "</tr>"
            for r in rows
        )
        + "</table>",
        f'<p class="quiet">{esc(BREAKDOWN_NOTE)}</p>',
    ]
