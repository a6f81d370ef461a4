"""The comparison report as Markdown, for pasting into a pull request."""

from __future__ import annotations

import re
from collections.abc import Sequence

from quicsm.report.methods import methods_items
from quicsm.report.sections import ComparisonView

_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_ENTITY = re.compile(r"&(?=#?\w+;)")


def _cell(text: str) -> str:
    """Table-safe and inert Markdown: pipes escaped; anything that could start an HTML tag
    or entity is escaped, so text from traces shows as text."""
    text = _TAG_START.sub("&lt;", _ENTITY.sub("&amp;", text))
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(
    views: Sequence[ComparisonView],
    *,
    alpha: float,
    title: str | None = None,
    generated_at: str | None = None,
    command: str | None = None,
) -> str:
    heading = title or (views[0].title if len(views) == 1 else "version-to-version comparison")
    out = [f"# quicsm report: {_cell(heading)}", ""]
    for view in views:
        out.append(view.result.to_markdown(heading="##").rstrip("\n"))
        out += ["", "### Representative traces", ""]
        for g in view.groups:
            if g.representative is None:
                out.append(f"- {_cell(g.name)}: {_cell(g.series_note)}")
            else:
                file, trace = g.representative
                titled = (
                    f", titled “{_cell(g.representative_title)}”" if g.representative_title else ""
                )
                out.append(f"- {_cell(g.name)}: trace `{_cell(trace)}` of `{_cell(file)}`{titled}")
        out += ["", "### Scenario matrix", ""]
        m = view.matrix
        if m is None:
            out.append(_cell(view.matrix_note))
        else:
            a, b = view.result.names
            out.append(
                f"{_cell(m.metric)}: % difference of {_cell(b)} from {_cell(a)} "
                f"(rows {_cell(m.row_label)}, columns {_cell(m.col_label or 'all')}; "
                "bold = significant)"
            )
            out += ["", "| " + " | ".join([_cell(m.row_label)] + [_cell(c) for c in m.cols]) + " |"]
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
                    cells.append(f"{pct} ({_cell(cell.text)})")
                out.append("| " + " | ".join([_cell(r), *cells]) + " |")
        out.append("")
    out += ["## Methods", ""]
    items = methods_items(views, alpha=alpha, generated_at=generated_at, command=command)
    out += [f"- **{_cell(k)}**: {_cell(v)}" for k, v in items]
    return "\n".join(out) + "\n"
