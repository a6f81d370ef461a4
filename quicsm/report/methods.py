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
    items = [
        (
            "Time in state",
            "per trace, the share of the trace's duration spent in each state (the last state "
            "lasts until the trace's last event); group value = mean over traces with a 95% "
            "t interval; Welch's unequal-variance t-test, Holm-corrected across states",
        ),
        (
            "Transitions",
            "per source state, the counts of each outgoing transition (end of trace included): "
            f"G-test on the pooled counts, divided by the mean design effect (Rao-Scott "
            "correction for transitions clustering within traces), when every expected count "
            f"is at least {sig.MIN_EXPECTED:g}; otherwise a permutation test that shuffles whole "
            "traces "
            f"between the groups ({settings.get('permutations', '?')} random splits, or all "
            "splits when there are fewer; seed "
            f"{settings.get('seed', '?')}); per transition the same test on (this transition, "
            "any other exit); Holm-corrected across source states and across transitions",
        ),
        (
            "Dwell time",
            "Mann-Whitney U test on each trace's median dwell per state, Holm-corrected "
            "across states",
        ),
        (
            "Invariants",
            "AlwaysFollowedBy / NeverFollowedBy / AlwaysPrecedes mined in each group (Synoptic); "
            "listed when they hold in one group and not the other, over states both visit; "
            "Fisher's exact test on the number of traces breaking them, Holm-corrected",
        ),
        (
            "Thresholds",
            f"significant when the Holm-corrected p < α = {alpha:g}; no test when a group has "
            f'fewer than {settings.get("min_n", sig.MIN_N)} traces (said as "n=2 < 3: no test")',
        ),
        (
            "Scenario matrix",
            "per cell, Welch's t-test of the metric (server traces only when a group has them: "
            "one value per connection), Holm-corrected across cells",
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
