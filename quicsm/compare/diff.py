"""Compare two groups of traces: what changed in time-in-state, transitions, dwell times and
invariants, and is it more than noise?

``diff(a, b)`` takes two transitions frames (:data:`quicsm.core.frames.TRANSITIONS_SCHEMA`) and
returns
a :class:`DiffResult` whose frames are ranked by effect size. The statistics themselves come from
:mod:`quicsm.stats.descriptive` (time in state, transition counts and probabilities, dwell times);
the tests
from :mod:`quicsm.stats.significance`:

- time-in-state fraction per state: mean of per-trace fractions, Welch's t-test
  (:mod:`quicsm.compare.families.states`);
- one transition probability (source -> target), per observed exit of the source: the end of a
  trace is censoring, not a transition, so ``-> TERMINAL`` is never tested
  (:mod:`quicsm.compare.families.transitions`): the beta-binomial z of
  :mod:`quicsm.stats.overdispersion` with the intra-trace correlation pooled over all
  transitions of both groups, referred to its permutations over traces while the traces are
  few (``FEW_TRACES``), else to Student's t; Fisher's test on the effective counts when they
  are too small for the z;
- dwell time per state: random-effects test of the mean log dwell
  (:mod:`quicsm.compare.families.dwell`);
- invariants (AlwaysFollowedBy, NeverFollowedBy, AlwaysPrecedes) mined in each group that do not
  hold in the other, compared per chance to break them ("a NeverFollowedBy b" per return to
  a, the others per trace that visits the antecedent:
  :mod:`quicsm.compare.families.invariants`);
- outcomes (per-trace numbers such as completion time, per cell such as a scenario), when given
  (:mod:`quicsm.compare.families.outcomes`).

Every family returns rows of one schema (:mod:`quicsm.compare.families.schema`); their words
are views (:mod:`quicsm.render.findings`, :mod:`quicsm.render.test_words`).

With ``strata`` (a stratum per trace, e.g. its scenario), every test compares each trace only
with traces of its own stratum, so that groups that ran different mixes of conditions are
compared like with like. Groups whose traces differ in length by more than 2x are compared
within length strata (:func:`quicsm.compare.keys.length_strata`) where a test has no unit
free of length (time shares, dwell times, invariants per trace), and every permutation test
exchanges traces only within their length stratum
(:mod:`quicsm.compare.families.clustered`).

**Two families** (:mod:`quicsm.compare.families.policy`): the *primary* family, fixed before
looking (time share per state and every outcome per stratum; ``primary=`` names others, and a
subject that names nothing is an error), is Holm-adjusted; every other test is *exploratory*,
Benjamini-Hochberg-adjusted. ``p_value`` is the p-value adjusted within the row's ``family``,
``p_unadjusted`` the test's own; "significant" means adjusted p < ``alpha``.
``primary_significant`` is what ``--fail-on-significant`` acts on. Every row carries ``mde``:
the smallest difference (in the row's effect units) its test would detect with 80% power at
the level it faced in its family, from the difference's standard error (``se``) and the degrees
of freedom of the reference its test is decided by (``df``; :func:`quicsm.stats.overdispersion.
power_at` gives the power at any other difference).

Differences are always ``b - a``. A group with fewer than ``min_n`` traces gets no p-value, and
the reason is stated (``"n=2 < 3: no test"``).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from quicsm.compare.families import dwell as _dwell
from quicsm.compare.families import invariants as _invariants
from quicsm.compare.families import outcomes as _outcomes
from quicsm.compare.families import states as _states
from quicsm.compare.families import transitions as _transitions
from quicsm.compare.families.policy import (
    FAMILIES,
    OUTCOME_METRICS,
    adjust,
    check_primary_rows,
    parse_primary,
)
from quicsm.compare.families.schema import frame
from quicsm.compare.families.states import fractions
from quicsm.compare.keys import (
    Strata,
    StrataMap,
    files,
    keyed_transitions,
    length_strata,
    lengths,
    split_key,
)
from quicsm.compare.result import DiffResult, Finding, outcome_name
from quicsm.core.errors import InputError
from quicsm.stats import significance as sig

__all__ = [
    "FAMILIES",
    "DiffResult",
    "Finding",
    "diff",
    "fractions",
    "keyed_transitions",
    "outcome_name",
    "parse_primary",
    "split_key",
]


def diff(
    a_transitions: pl.DataFrame,
    b_transitions: pl.DataFrame,
    *,
    alpha: float = 0.05,
    min_n: int = sig.MIN_N,
    permutations: int = 4999,
    seed: int = 0,
    names: tuple[str, str] = ("A", "B"),
    invariants: bool = True,
    strata: StrataMap | None = None,
    within: Sequence[str] = (),
    outcomes: pl.DataFrame | None = None,
    primary: Sequence[str] | None = None,
) -> DiffResult:
    """Compare group B against group A; see the module docstring for the tests used.

    ``strata`` maps ``(file, trace)`` to the trace's stratum, or ``(group, file, trace)``
    (group ``"a"`` or ``"b"``) where both groups hold the same trace key in different strata
    (``within`` names the labels it was made of, for the record); ``outcomes`` is a frame
    ``file, trace, cell, metric, value`` of per-trace outcomes (e.g. ``completion_ms`` per
    ``scenario`` cell).
    """
    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha must be between 0 and 1, got {alpha}")
    if min_n < 2:
        raise InputError(f"min_n must be at least 2, got {min_n}")
    metrics = OUTCOME_METRICS
    if outcomes is not None and "metric" in outcomes.columns:
        metrics = (*OUTCOME_METRICS, *outcomes["metric"].cast(pl.String).unique().to_list())
    chosen = parse_primary(primary, metrics=metrics)
    a = keyed_transitions(a_transitions)
    b = keyed_transitions(b_transitions)
    n_a, n_b = a["trace"].n_unique(), b["trace"].n_unique()
    for name, n in zip(names, (n_a, n_b), strict=True):
        if n == 0:
            raise InputError(f"group {name} has no traces: nothing to compare")
    st = Strata.make(strata, a, b)
    # groups of different lengths: what grows with a trace's length (its time shares' start-up
    # part, its chances to break an invariant, its visits' dwell) is compared between traces of
    # similar length, and a long trace is not exchanged with a short one
    span = lengths(a, b)
    by_length = length_strata(a, b, st) if span.differ else st
    opts = {"min_n": min_n, "permutations": permutations}
    families = {
        "outcomes": _outcomes.outcomes(outcomes, a, b, st, **opts),
        "states": _states.states(a, b, by_length, **opts),
        **_transitions.transitions(
            a, b, st, seed=seed, lengths=by_length if span.differ else None, **opts
        ),
        "dwell": _dwell.dwell(a, b, by_length, **opts),
        "invariants": _invariants.invariants(a, b, st, by_length, seed=seed, **opts)
        if invariants
        else [],
    }
    check_primary_rows(families, chosen)
    family, exploratory = adjust(families, alpha=alpha, primary=chosen)
    return DiffResult(
        states=frame(families["states"], _states.SCHEMA, "difference", ["state"]),
        sources=frame(families["sources"], _transitions.SOURCES_SCHEMA, "effect", ["source"]),
        edges=frame(families["edges"], _transitions.SCHEMA, "difference", ["source", "target"]),
        dwell=frame(families["dwell"], _dwell.SCHEMA, "log2_ratio", ["state"]),
        invariants=frame(families["invariants"], _invariants.SCHEMA, "effect", ["kind", "a", "b"]),
        outcomes=frame(families["outcomes"], _outcomes.SCHEMA, "change", ["metric", "cell"]),
        presence=_transitions.presence(a, b, families["edges"]),
        alpha=alpha,
        names=names,
        n_a=n_a,
        n_b=n_b,
        files_a=files(a_transitions),
        files_b=files(b_transitions),
        settings={
            "min_n": min_n,
            "permutations": permutations,
            "seed": seed,
            "family": family,
            "exploratory": exploratory,
            "primary": list(chosen),
            "lengths": span.as_dict(),
        },
        within=tuple(within),
        strata=st.counts if st is not None else {},
    )
