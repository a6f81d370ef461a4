"""The Methods section (shared by HTML and Markdown): tests, thresholds, group sizes, version."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from quicsm.core.diagnostics import Diagnostics
from quicsm.core.version import __version__
from quicsm.render.skipped import anything_skipped, skipped_summary
from quicsm.render.test_words import describe_tests, primary_words, split_words
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
    skipped: Diagnostics | None = None,
) -> list[tuple[str, str]]:
    """The Methods items; ``skipped``: what lenient reading skipped, an item of its own when
    it skipped anything (nothing changes otherwise)."""
    settings = views[0].result.settings if views else {}
    results = [v.result for v in views]

    def used(family: str) -> str:
        return describe_tests([getattr(r, family) for r in results])

    primary = sorted({w for r in results for w in primary_words(r)})
    items = [
        (
            "Outcomes",
            "per scenario (or stratum), the mean over traces of each run's completion time and "
            f"throughput; {used('outcomes')}",
        ),
        (
            "Time in state",
            "per trace, the share of the trace's duration spent in each state (the last state "
            "lasts until the trace's last event); group value = mean of per-trace shares with a "
            f"95% t interval; {used('states')}",
        ),
        (
            "Transitions",
            "per observed exit of the source state: the end of a trace is censoring, not a "
            "transition (its last visit was cut short by the end of the recording), so no "
            f"transition to TERMINAL is tested; {used('edges')} (permutations: "
            f"{settings.get('permutations', '?')} random splits, or all when fewer; seed "
            f"{settings.get('seed', '?')}). The outgoing distribution of a state is described, "
            "and tested transition by transition",
        ),
        ("Dwell time", f"per state, log(1 + ms) of each visit; {used('dwell')}"),
        (
            "Invariants",
            "AlwaysFollowedBy / NeverFollowedBy / AlwaysPrecedes mined in each group (Synoptic), "
            "INITIAL and TERMINAL included; listed when they hold in one group and not the "
            "other, over states both visit; compared per chance to break them, so that a longer "
            "trace does not break more by construction: “a NeverFollowedBy b” per return to a "
            "(from a visit of a to the next; the last visit's stretch, cut short by the end of "
            "the recording, is censoring and not counted; per trace that visits a when too few "
            "traces return to a), every other invariant per trace that "
            "visits its antecedent (a; b for AlwaysPrecedes); "
            f"{used('invariants')}",
        ),
    ]
    if any((r.settings.get("lengths") or {}).get("differ") for r in results):
        items.append(
            (
                "Lengths",
                "the groups' traces differ in length by more than a factor of 2 (median states "
                "visited): time shares, dwell times and the invariants compared per trace are "
                "compared within length strata (1, 2-3, 4-7, 8-15, ... states visited, within "
                "any given stratum); a permutation test exchanges traces only within their "
                "length stratum, traces in a stratum of one group only staying in their group "
                "(the notes say how many; when no stratum holds both groups, the z is referred "
                "to Student's t)",
            )
        )
    if any(r.within for r in results):
        items.append(
            (
                "Within strata",
                "every test compares each trace only with traces of its own stratum (the "
                "tests above name their stratified forms)",
            )
        )
    items += [
        (
            "Error control",
            f"primary family: {', '.join(primary) or 'none'}, under Holm, leaving out tests "
            "that cannot reach significance with these traces (Tarone); every other test "
            f"exploratory, under Benjamini-Hochberg; {split_words(alpha)}; every "
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
    if skipped is not None and anything_skipped(skipped):
        items.append(("Skipped input", skipped_summary(skipped)))
    items.append(("quicsm version", __version__))
    if generated_at:
        items.append(("Generated", generated_at))
    if command:
        items.append(("Command", command))
    return items
