"""Words for an A/B experiment (:mod:`quicsm.compare.ab`): the live progress line of a
scenario and the final markdown report. Deterministic text from the result table."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import polars as pl

from quicsm.compare.ab import COMPLETION, ScenarioProgress
from quicsm.stats.sequential import QuantityState, nearest_change


def _value(name: str, x: float) -> str:
    """A difference as read: completion time as a ratio in %, shares in points."""
    if not math.isfinite(x):
        return "-∞" if x < 0 else "∞" if x > 0 else "?"
    if name == COMPLETION:
        return f"{100 * math.expm1(x):+.1f}%"
    return f"{100 * x:+.1f} pt"


def effect(q: QuantityState | Mapping[str, Any]) -> str:
    """``+3.2 pt [−0.5, +6.9]`` (estimate and the confidence sequence's interval)."""
    if isinstance(q, QuantityState):
        name, est, lo, hi = q.name, q.estimate, q.ci_low, q.ci_high
    else:
        name = str(q["quantity"])
        est, lo, hi = (
            math.nan if q[k] is None else float(q[k]) for k in ("estimate", "ci_low", "ci_high")
        )
        lo = -math.inf if math.isnan(lo) else lo  # an unbounded end is stored as null
        hi = math.inf if math.isnan(hi) else hi
    if not math.isfinite(est):
        return "-"
    return f"{_value(name, est)} [{_value(name, lo)}, {_value(name, hi)}]"


def progress_line(p: ScenarioProgress, *, max_pairs: int) -> str:
    """One line per scenario and pair: runs so far, the leading quantity's effect and
    interval, and the decision or what would stop the scenario."""
    st = p.state
    failed = f", {p.failed} failed" if p.failed else ""
    head = f"{p.scenario}: {len(p.pairs)}/{max_pairs} pairs ({2 * len(p.pairs)} runs{failed})"
    if not st.quantities or st.pairs == 0:
        return f"{head}; no pair yet"
    lead = nearest_change(st.quantities)
    comp = next(q for q in st.quantities if q.name == COMPLETION)
    if lead.e_change > 1:
        parts = [f"{lead.name} {effect(lead)} e(change)={lead.e_change:.3g}"]
    else:
        # no e-value above its start: naming one quantity would say it is nearer a change
        parts = ["no quantity nearer a change than at the start (every e(change) ≤ 1)"]
    if lead is not comp:
        parts.append(f"{COMPLETION} {effect(comp)} e(change)={comp.e_change:.3g}")
    verdict = st.verdict.upper() if st.verdict != "continue" else "running"
    return f"{head}; {'; '.join(parts)} | {verdict}: {st.reason()}"


def report_markdown(settings: Mapping[str, Any], table: pl.DataFrame) -> str:
    """The experiment's report: settings, one decision per scenario with its stopping reason,
    then every quantity's effect, interval and e-values."""
    s = settings
    lines = [
        f"# A/B: {s['a']} (A) vs {s['b']} (B)",
        "",
        f"Sequential tests per scenario after each pair (B − A), family-wise α = {s['alpha']} "
        f"over {s['hypotheses']} quantities (a claim needs e ≥ {s['hypotheses'] / s['alpha']:g}); "
        f"equivalence margins ±{100 * s['share_margin']:g} points of time share and "
        f"±{100 * s['time_margin']:g}% completion time; budget {s['max_pairs']} pairs per "
        f"scenario; pair orders drawn with seed {s['seed']}.",
        "",
        "| scenario | decision | pairs | why it stopped |",
        "|---|---|---:|---|",
    ]
    if table.height == 0:
        return "\n".join([*lines, "", "(no scenario)", ""])
    per = table.unique("scenario", keep="first", maintain_order=True)
    for r in per.iter_rows(named=True):
        failed = f" ({r['failed_pairs']} failed)" if r["failed_pairs"] else ""
        lines.append(f"| {r['scenario']} | {r['verdict']} | {r['pairs']}{failed} | {r['reason']} |")
    lines += [
        "",
        "| scenario | quantity | B − A [interval] | e (change) | e (equivalent) | shown |",
        "|---|---|---|---:|---:|---|",
    ]
    for r in table.iter_rows(named=True):
        t = r["threshold"]
        shown = (
            "change"
            if r["changed"]
            else "equivalent"
            if r["e_equivalent"] is not None and r["e_equivalent"] >= t
            else ""
        )
        lines.append(
            f"| {r['scenario']} | {r['quantity']} | {effect(r)} | {r['e_change']:.3g} | "
            f"{r['e_equivalent']:.3g} | {shown} |"
        )
    lines.append("")
    return "\n".join(lines)
