"""The result of ``quicsm diff``: one frame per family (:mod:`quicsm.compare.families`) and
the ranked significant findings read from them (their words are views, in
:mod:`quicsm.render`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from quicsm.compare.families import outcomes as _outcomes

__all__ = ["DiffResult", "Finding", "outcome_name"]


@dataclass(frozen=True)
class Finding:
    """One significant result, with a score in [0, 1] used for ranking and the table row it
    comes from (its words are a view: :func:`quicsm.render.findings.finding_sentence`)."""

    kind: str  # outcome | state | edge | source | dwell | invariant
    subject: str
    score: float
    p_value: float | None = None
    #: "primary" (Holm) or "exploratory" (Benjamini-Hochberg)
    family: str = "exploratory"
    row: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass
class DiffResult:
    """Everything ``quicsm diff`` reports about group B relative to group A (``b - a``).

    A result holds frames; its views (JSON, Markdown, the terminal table) are the functions of
    :mod:`quicsm.render.diff_format`.
    """

    states: pl.DataFrame
    sources: pl.DataFrame
    edges: pl.DataFrame
    dwell: pl.DataFrame
    invariants: pl.DataFrame  # kind, a, b, holds_in ("a" | "b"), violations_a/_b, p_value, ...
    presence: dict[str, list[str]]
    alpha: float
    names: tuple[str, str]
    n_a: int
    n_b: int
    files_a: list[str] = field(default_factory=list)
    files_b: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    outcomes: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=_outcomes.SCHEMA))
    #: labels the comparison was stratified by (empty: not stratified)
    within: tuple[str, ...] = ()
    #: stratum -> (traces in A, traces in B); strata with none in one group were left out
    strata: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: how the groups were formed and matched (from :class:`quicsm.compare.grouping.Comparison`)
    notes: list[str] = field(default_factory=list)
    #: what the comparison cannot separate, shown above the findings
    caveats: list[str] = field(default_factory=list)

    def frames(self) -> tuple[pl.DataFrame, ...]:
        """The tested frames, in :data:`FAMILIES` order (the outgoing distributions of the
        source states are described, not tested: their transitions are)."""
        return (self.outcomes, self.states, self.edges, self.dwell, self.invariants)

    # -- conclusions ------------------------------------------------------------------------
    @property
    def any_significant(self) -> bool:
        """Anything significant, primary or exploratory."""
        return any(f.height and bool(f["significant"].any()) for f in self.frames())

    @property
    def primary_significant(self) -> bool:
        """Anything of the primary family significant (what ``--fail-on-significant`` acts
        on by default)."""
        return any(
            f.height and bool(f.filter(pl.col("family") == "primary")["significant"].any())
            for f in self.frames()
        )

    @property
    def n_tests(self) -> int:
        """Tests run, in both families."""
        return sum(f.height - f["p_value"].null_count() for f in self.frames())

    def untested(self) -> tuple[int, int]:
        """(tests not run, tests in total) over every family."""
        frames = self.frames()
        total = sum(f.height for f in frames)
        return sum(f["p_value"].null_count() for f in frames), total

    def untested_reasons(self) -> list[str]:
        """The distinct reasons tests were not run, e.g. ``["n=2 < 3: no test"]``."""
        reasons = {
            str(n)
            for f in self.frames()
            for n in f.filter(pl.col("p_value").is_null())["note"].to_list()
        }
        return sorted(reasons)

    def stratified_left_out(self) -> list[str]:
        """Strata with traces in one group only (they take no part in the tests)."""
        return [s for s, (na, nb) in self.strata.items() if not (na and nb)]

    def findings(self) -> list[Finding]:
        """The significant results, ranked: primary before exploratory, then outcomes, time
        in state, transitions, dwell and invariants, by effect size within each kind."""
        return _findings(self)


#: outcome labels as people say them
_OUTCOME_NAMES = {"completion_ms": "completion time", "throughput_mbit": "throughput"}


def outcome_name(metric: str) -> str:
    """``completion_ms`` -> ``completion time`` (other labels as they are)."""
    return _OUTCOME_NAMES.get(metric, metric)


def _findings(d: DiffResult) -> list[Finding]:
    out: list[Finding] = []

    def add(kind: str, subject: str, score: float, r: Mapping[str, Any]) -> None:
        out.append(Finding(kind, subject, score, r["p_value"], r["family"], r))

    for r in d.outcomes.filter(pl.col("significant")).iter_rows(named=True):
        cell = "" if r["cell"] in ("", "all") else f" in {r['cell']}"
        size = min(1.0, abs(r["change"])) if r["change"] == r["change"] else 0.0
        add("outcome", f"{r['metric']}{cell}", size, r)
    for r in d.states.filter(pl.col("significant")).iter_rows(named=True):
        add("state", r["state"], abs(r["difference"]), r)
    sig_sources = set()
    for r in d.edges.filter(pl.col("significant")).iter_rows(named=True):
        sig_sources.add(r["source"])
        add("edge", f"{r['source']} -> {r['target']}", abs(r["difference"]), r)
    for r in d.sources.filter(pl.col("significant")).iter_rows(named=True):
        if r["source"] not in sig_sources:
            add("source", r["source"], r["effect"], r)
    for r in d.dwell.filter(pl.col("significant")).iter_rows(named=True):
        x = r["log2_ratio"]
        # 1 - min(ratio, 1/ratio), written so that extreme ratios cannot overflow
        add("dwell", r["state"], 1.0 - 2.0 ** (-abs(x)) if x == x else 0.0, r)
    for r in d.invariants.filter(pl.col("significant")).iter_rows(named=True):
        add("invariant", f"{r['a']} {r['kind']} {r['b']}", r["effect"], r)
    kinds = {"outcome": 0, "state": 1, "edge": 2, "source": 3, "dwell": 4, "invariant": 5}
    # primary findings first, then exploratory; within each, outcomes first (what users
    # feel), then time in state (the paper's headline quantity), transitions, dwell and
    # invariants; by effect size within each kind
    return sorted(out, key=lambda f: (f.family != "primary", kinds[f.kind], -f.score, f.subject))
