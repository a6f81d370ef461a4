"""Run a formed comparison: the statistics (:func:`quicsm.compare.diff.diff`) with the groups'
strata and outcomes, and the evidence behind the changes (:func:`quicsm.compare.evidence.explain`).
Views (:mod:`quicsm.render.diff_format`, :mod:`quicsm.report`) are handed what this returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from quicsm.compare.diff import DiffResult, diff
from quicsm.compare.evidence import Explanation, explain
from quicsm.compare.grouping import Comparison, outcomes_frame

__all__ = ["Compared", "run_comparison"]


@dataclass
class Compared:
    """One comparison and its results."""

    comparison: Comparison
    result: DiffResult
    explanations: list[Explanation] = field(default_factory=list)


def run_comparison(
    comp: Comparison,
    *,
    alpha: float = 0.05,
    seed: int = 0,
    permutations: int = 4999,
    explanations: bool = True,
    primary: Sequence[str] | None = None,
) -> Compared:
    """Compare ``comp.b`` with ``comp.a`` like with like (within the comparison's strata),
    with the per-trace outcomes the labels carry, and explain what changed."""
    result = diff(
        comp.a.transitions,
        comp.b.transitions,
        alpha=alpha,
        seed=seed,
        permutations=permutations,
        names=(comp.a.name, comp.b.name),
        strata=comp.strata,
        within=comp.within,
        outcomes=outcomes_frame(comp),
        primary=primary,
    )
    result.notes = list(comp.notes)
    result.caveats = list(comp.caveats)
    return Compared(comp, result, explain(comp, result) if explanations else [])
