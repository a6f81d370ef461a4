"""The Methods section (shared by HTML and Markdown): tests, thresholds, group sizes, version."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from quicsm.core.version import __version__
from quicsm.stats import significance as sig

if TYPE_CHECKING:
    from quicsm.report.sections import ComparisonView


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def methods_items(
    views: Sequence[ComparisonView],
    *,
    alpha: float,
    generated_at: str | None,
    command: str | None,
) -> list[tuple[str, str]]:
    settings = views[0].result.settings if views else {}
    policy = settings.get("policy", "")
    items = [
        (
            "Outcomes",
            "per scenario (or stratum), the mean over traces of each run's completion time and "
            "throughput; Welch's t-test, or an exact permutation test over traces when they can "
            "be split between the groups in few ways",
        ),
        (
            "Time in state",
            "per trace, the share of the trace's duration spent in each state (the last state "
            "lasts until the trace's last event); group value = mean of per-trace shares with a "
            "95% t interval; Welch's t-test (exact permutation test when the splits are few)",
        ),
        (
            "Transitions",
            "per transition, the beta-binomial z-test on every transition of every trace, with "
            "the intra-trace correlation pooled over all transitions of both groups (and shrunk "
            "per transition, never below the pool); Fisher's exact test on the effective counts "
            "(counts over the design effect) when a group would expect fewer than 5 events; "
            "a permutation test over traces "
            f"({settings.get('permutations', '?')} random splits, or all when fewer; seed "
            f"{settings.get('seed', '?')}) when even those are too few. The outgoing "
            "distribution of a state is described, and tested transition by transition",
        ),
        (
            "Dwell time",
            "random-effects test of the mean log dwell per state: within-trace variance from "
            "the visits, between-trace variance pooled over every state of both groups, "
            "Student's t with the traces less two degrees of freedom (Mann-Whitney U on the "
            "per-trace medians when no trace visits the state twice)",
        ),
        (
            "Invariants",
            "AlwaysFollowedBy / NeverFollowedBy / AlwaysPrecedes mined in each group (Synoptic), "
            "INITIAL and TERMINAL included; listed when they hold in one group and not the "
            "other, over states both visit; Fisher's exact test on the traces breaking them",
        ),
        (
            "Within strata",
            "when the groups ran different mixes of a condition (or with --within), every test "
            "compares each trace only with traces of its own stratum: the stratified shift "
            "(Cochran-Mantel-Haenszel weights; van Elteren for dwell times)",
        ),
        (
            "Error control",
            f"{policy}; primary family: {', '.join(settings.get('primary', []))}; every "
            "p-value quoted is adjusted within its family (and labelled so); significant when "
            f"the adjusted p < α = {alpha:g}; every row that is not significant carries its "
            "minimum detectable effect (power 0.8); no test when a group "
            f"has fewer than {settings.get('min_n', sig.MIN_N)} traces "
            '(said as "n=2 < 3: no test")',
        ),
        (
            "Evidence",
            "per explained change, indicators read from the events (spurious losses, loss "
            "triggers, PTOs, episodes, cap hits, application-limited time) ranked by Cliff's "
            "delta between the groups' traces; descriptive, not tested",
        ),
        (
            "Scenario matrix",
            "an outcome over the scenarios uses the comparison's own outcome tests (primary, "
            "the same Holm-adjusted p-values as everywhere in the report); other "
            "matrices test each cell on its own (server traces only when a group has them) with "
            "Holm over the cells of the matrix",
        ),
    ]
    for v in views:
        a, b = v.groups
        items.append(
            (
                f"Groups of {v.title}",
                f"{a.name}: {_count(a.n_traces, 'trace')} in {_count(len(a.files), 'file')}; "
                f"{b.name}: {_count(b.n_traces, 'trace')} in {_count(len(b.files), 'file')}",
            )
        )
    items.append(("quicsm version", __version__))
    if generated_at:
        items.append(("Generated", generated_at))
    if command:
        items.append(("Command", command))
    return items
