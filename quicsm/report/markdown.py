"""The comparison report as Markdown, for pasting into a pull request."""

from __future__ import annotations

from collections.abc import Sequence

from quicsm.core.diagnostics import Diagnostics
from quicsm.render.app_limited import group_accounts
from quicsm.render.diff_format import app_limited_markdown, md_cell, to_markdown
from quicsm.render.skipped import skipped_markdown
from quicsm.report.methods import methods_items
from quicsm.report.page import byline, heading
from quicsm.report.sections import ComparisonView, loss_rows


def render_markdown(
    views: Sequence[ComparisonView],
    *,
    alpha: float,
    title: str | None = None,
    generated_at: str | None = None,
    command: str | None = None,
    extra: Sequence[str] = (),
    skipped: Diagnostics | None = None,
) -> str:
    """``extra``: further sections (Markdown), placed before Methods; ``skipped``: what lenient
    reading skipped, said under the byline and in Methods (nothing when it skipped nothing)."""
    out = [f"# {md_cell(heading(views, title))}", ""]
    out += [md_cell(byline(alpha=alpha, generated_at=generated_at)), ""]
    out += skipped_markdown(skipped, md_cell=md_cell)
    for view in views:
        out.append(
            to_markdown(view.result, heading="##", explanations=view.explanations).rstrip("\n")
        )
        header, rows = loss_rows(view)
        if rows:
            out += ["", "### Loss detection", ""]
            out.append("| " + " | ".join(md_cell(h) for h in header) + " |")
            out.append("|---" + "|---:" * (len(header) - 1) + "|")
            out += ["| " + " | ".join(md_cell(c) for c in r) + " |" for r in rows]
        comp = view.comparison
        out += app_limited_markdown(
            group_accounts((comp.a, comp.b)), view.result.names, heading="###"
        )
        out += ["", "### Representative traces", ""]
        where = f"both from {md_cell(view.stratum)}, " if view.stratum is not None else ""
        out.append(
            f"The trace of each group closest to its mean time-in-state profile ({where}"
            "each drawn on its own axes in the HTML report):"
        )
        out.append("")
        for g in view.groups:
            if g.representative is None:
                out.append(f"- {md_cell(g.name)}: {md_cell(g.series_note)}")
            else:
                file, trace = g.representative
                titled = (
                    f", titled “{md_cell(g.representative_title)}”"
                    if g.representative_title
                    else ""
                )
                out.append(
                    f"- {md_cell(g.name)}: trace `{md_cell(trace)}` of `{md_cell(file)}`{titled}"
                )
        out += ["", "### Scenario matrix", ""]
        m = view.matrix
        if m is None:
            out.append(md_cell(view.matrix_note))
        else:
            a, b = view.result.names
            out.append(
                f"{md_cell(m.metric)}: % difference of {md_cell(b)} from {md_cell(a)} "
                f"(rows {md_cell(m.row_label)}, columns {md_cell(m.col_label or 'all')}; "
                "bold = significant)"
            )
            out += [
                "",
                "| " + " | ".join([md_cell(m.row_label)] + [md_cell(c) for c in m.cols]) + " |",
            ]
            out.append("|" + "---|" * (len(m.cols) + 1))
            for r in m.rows:
                cells = []
                for c in m.cols:
                    cell = m.cells.get((r, c))
                    if cell is None:
                        cells.append("–")
                        continue
                    pct = "–" if cell.percent is None else f"{cell.percent:+.0f}%"
                    pct = f"**{pct}**" if cell.significant else pct
                    cells.append(f"{pct} ({md_cell(cell.text)})")
                out.append("| " + " | ".join([md_cell(r), *cells]) + " |")
        out.append("")
    for section in extra:
        out += [section.rstrip("\n"), ""]
    out += ["## Methods", ""]
    items = methods_items(
        views, alpha=alpha, generated_at=generated_at, command=command, skipped=skipped
    )
    out += [f"- **{md_cell(k)}**: {md_cell(v)}" for k, v in items]
    return "\n".join(out) + "\n"
