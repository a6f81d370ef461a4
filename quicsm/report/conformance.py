"""The report's conformance section: each compared stack against a reference stack (the
kernel's TCP, say) per scenario, read from :func:`quicsm.compare.conformance.conformance_table`.

Two tables per comparison: per scenario, the throughput ratio, the distance between the
congestion-window trajectories and the largest difference in time in state and in transition
probability (each with its 95% bootstrap interval); then every state's time-share difference.
Renderers are pure and deterministic (fixed number formats, rows in the table's order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from quicsm.compare.grouping import Comparison
from quicsm.render.escape import esc

_NOTE = (
    "Each candidate against the reference on the same scenarios: throughput ratio (1 = as "
    "fast), distance between the median congestion-window trajectories (0 = the same; a share "
    "of the reference's mean window), and differences of time in state and of transition "
    "probabilities (candidate minus reference). Brackets: 95% bootstrap intervals over traces "
    "(a distance's interval lies above its estimate when the groups are close: resampling "
    "only adds distance)."
)


@dataclass(frozen=True, kw_only=True)
class ConformanceView:
    reference: str
    by: str
    table: pl.DataFrame


def conformance_views(
    comparisons: Sequence[Comparison], *, reference: str, seed: int = 0, resamples: int = 2000
) -> list[ConformanceView]:
    """One view per comparison whose groups hold traces of ``by`` = ``reference``."""
    from quicsm.compare.conformance import conformance_table

    views = []
    for comp in comparisons:
        by = comp.label or "stack"
        metrics = [g.metrics for g in (comp.a, comp.b) if g.metrics is not None]
        table = conformance_table(
            pl.concat([comp.a.transitions, comp.b.transitions], how="vertical_relaxed"),
            pl.concat([comp.a.traces, comp.b.traces], how="vertical_relaxed"),
            pl.concat(metrics, how="vertical_relaxed").filter(pl.col("event") == "metrics")
            if metrics
            else None,
            by=by,
            reference=reference,
            resamples=resamples,
            seed=seed,
        )
        views.append(ConformanceView(reference=reference, by=by, table=table))
    return views


def _ci(row: dict[str, object], fmt: str) -> str:
    est, low, high = (row[k] for k in ("estimate", "low", "high"))
    assert isinstance(est, float) and isinstance(low, float) and isinstance(high, float)
    if est != est:  # NaN: the reference or the candidate never left the source state
        return "–"
    if low != low:
        return format(est, fmt)
    return f"{format(est, fmt)} [{format(low, fmt)}, {format(high, fmt)}]"


def summary_rows(view: ConformanceView) -> tuple[list[str], list[list[str]]]:
    """Per (scenario, candidate): traces, throughput ratio, cwnd distance, largest time-in-state
    and transition differences."""
    t = view.table
    header = [
        "scenario",
        f"{view.by}",
        "traces (ref / cand)",
        "throughput ratio",
        "cwnd distance",
        "largest time-in-state difference (pp)",
        "largest transition difference",
    ]
    rows = []
    for (scenario, cand), g in t.group_by(["scenario", "candidate"], maintain_order=True):
        first = g.row(0, named=True)

        def one(measure: str, fmt: str, g: pl.DataFrame = g) -> str:
            sub = g.filter(pl.col("measure") == measure)
            return _ci(sub.row(0, named=True), fmt) if sub.height else "–"

        def largest(measure: str, scale: float, fmt: str, g: pl.DataFrame = g) -> str:
            sub = g.filter(pl.col("measure") == measure, pl.col("estimate").is_not_nan())
            if not sub.height:
                return "–"
            row = sub.sort(pl.col("estimate").abs(), descending=True, maintain_order=True).row(
                0, named=True
            )
            scaled = {k: row[k] * scale for k in ("estimate", "low", "high")}
            return f"{row['item']}: {_ci(scaled, fmt)}"

        rows.append(
            [
                str(scenario),
                str(cand),
                f"{first['n_reference']} / {first['n_candidate']}",
                one("throughput_ratio", ".2f"),
                one("cwnd_distance", ".2f"),
                largest("time_in_state", 100.0, "+.1f"),
                largest("transition", 1.0, "+.2f"),
            ]
        )
    return header, rows


def state_rows(view: ConformanceView) -> tuple[list[str], list[list[str]]]:
    t = view.table.filter(pl.col("measure") == "time_in_state")
    header = ["scenario", view.by, "state", "reference (%)", "candidate (%)", "difference (pp)"]
    rows = []
    for row in t.iter_rows(named=True):
        scaled = {k: row[k] * 100.0 for k in ("estimate", "low", "high")}
        rows.append(
            [
                row["scenario"],
                row["candidate"],
                row["item"],
                f"{100 * row['reference_value']:.1f}",
                f"{100 * row['candidate_value']:.1f}",
                _ci(scaled, "+.1f"),
            ]
        )
    return header, rows


def to_markdown(view: ConformanceView, *, heading: str = "##") -> str:
    out = [f"{heading} Conformance: against {view.by} = {view.reference}", "", _NOTE, ""]
    for header, rows in (summary_rows(view), state_rows(view)):
        out.append("| " + " | ".join(header) + " |")
        out.append("|---|---" + "|---:" * (len(header) - 2) + "|")
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
        out.append("")
    return "\n".join(out)


def to_html(view: ConformanceView) -> str:
    parts = [
        '<section class="conformance" id="conformance">',
        f"<h2>Conformance: against {esc(view.by)} = {esc(view.reference)}</h2>",
        f"<p>{esc(_NOTE)}</p>",
    ]
    for header, rows in (summary_rows(view), state_rows(view)):
        parts.append("<table><thead><tr>")
        parts.append("".join(f"<th>{esc(h)}</th>" for h in header))
        parts.append("</tr></thead><tbody>")
        for r in rows:
            parts.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>")
        parts.append("</tbody></table>")
    parts.append("</section>")
    return "\n".join(parts)
