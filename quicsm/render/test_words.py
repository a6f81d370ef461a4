"""The words for the families and tests a comparison actually used: the significance line of
every view's header, the report's captions and its Methods.

The statistics (:mod:`quicsm.compare.families`) name each row's test (its ``test`` column) and
the primary family it belongs to (``settings["primary"]``); this module says them, so that a
header never lists a family that was not primary and a caption never names a test that no row
used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import polars as pl

from quicsm.compare.diff import FAMILIES, outcome_name
from quicsm.compare.families.policy import PRIMARY_SHARE

__all__ = [
    "TEST_WORDS",
    "length_caution",
    "policy_sentence",
    "primary_words",
    "describe_tests",
    "used_tests",
    "split_words",
]

#: every test a row can name, in words (a row whose test is missing here is a defect: see
#: tests/test_report.py)
TEST_WORDS: dict[str, str] = {
    "welch": "Welch's t-test over traces",
    "permutation (exact)": "an exact permutation test over every split of the traces",
    "permutation": "a permutation test over random splits of the traces",
    "permuted z": (
        "the beta-binomial z (intra-trace correlation pooled over every transition of both "
        "groups) referred to its distribution over random splits of the traces"
    ),
    "permuted z (exact)": (
        "the beta-binomial z (intra-trace correlation pooled over every transition of both "
        "groups) referred to its distribution over every split of the traces"
    ),
    "permuted z within length strata": (
        "the beta-binomial z referred to its distribution over random splits of the traces "
        "that exchange traces only within their length stratum"
    ),
    "permuted z within length strata (exact)": (
        "the beta-binomial z referred to its distribution over every split of the traces "
        "that exchanges traces only within their length stratum"
    ),
    "beta-binomial": (
        "the beta-binomial z-test (intra-trace correlation pooled over every transition of "
        "both groups), referred to Student's t"
    ),
    "beta-binomial (stratified)": (
        "the beta-binomial z within strata, combined with inverse-variance weights"
    ),
    "fisher (effective)": (
        "Fisher's exact test on the effective counts (each group's counts over its design effect)"
    ),
    "fisher": "Fisher's exact test on the traces that visit the invariant's antecedent",
    "random effects": (
        "a random-effects test of the mean log dwell (within-trace variance from the visits, "
        "between-trace variance pooled over the states of both groups)"
    ),
    "mann-whitney": "the Mann-Whitney U test on each trace's median",
    "stratified": "the stratified shift within strata (Cochran-Mantel-Haenszel weights)",
    "stratified (exact)": "the stratified shift within strata, exact over every split",
    "stratified (random splits)": (
        "the stratified shift within strata, referred to random splits of the traces within "
        "their stratum"
    ),
    "g-test": "the G-test on the pooled counts (Rao-Scott corrected)",
    "identical": "no test needed (one outcome in both groups)",
}

#: a whole family named as primary, in words
_FAMILY_WORDS = {
    "outcomes": "outcomes per stratum",
    "states": "time share per state",
    "sources": "the exits of every state",
    "edges": "every transition probability",
    "dwell": "dwell time per state",
    "invariants": "every broken invariant",
}


def _item_words(item: str) -> str:
    family, _, subject = item.partition(":")
    if not subject:
        return _FAMILY_WORDS.get(family, family)
    if family == "outcomes":
        metric, _, cell = subject.partition("@")
        return f"{outcome_name(metric)} in {cell}" if cell else f"{outcome_name(metric)}"
    if family == "states":
        return f"time share of {subject}"
    if family == "dwell":
        return f"dwell time in {subject}"
    if family == "edges":
        return f"transition {subject.replace('->', ' → ')}"
    if family == "sources":
        return f"the exits of {subject}"
    return f"invariant “{subject}”"


def _frames(d: Any) -> Mapping[str, pl.DataFrame]:
    return {name: getattr(d, name) for name in FAMILIES}


def primary_words(d: Any) -> list[str]:
    """The primary family as it was used: each ``--primary`` item that holds at least one
    tested row of this comparison, in words (a family named but empty here is not listed)."""
    frames = _frames(d)
    out = []
    for item in d.settings.get("primary", []):
        family = item.partition(":")[0]
        f = frames.get(family)
        if f is None or f.height == 0:
            continue
        if f.filter((pl.col("family") == "primary") & pl.col("p_unadjusted").is_not_null()).height:
            out.append(_item_words(item))
    return out


def split_words(alpha: float) -> str:
    """How α is split between the two families, in words."""
    first, rest = PRIMARY_SHARE * alpha, (1.0 - PRIMARY_SHARE) * alpha
    return (
        f"α = {alpha:g} split between the families ({first:g} primary, {rest:g} exploratory: "
        "anything significant is a false positive with probability at most α); p-values "
        "adjusted within their family and for its share of α"
    )


def policy_sentence(d: Any) -> str:
    """The error-control policy of one comparison, from the families it used."""
    words = primary_words(d)
    if not words:
        return (
            "no primary test; every test exploratory, under Benjamini-Hochberg at "
            f"{(1.0 - PRIMARY_SHARE) * d.alpha:g} ({split_words(d.alpha)})"
        )
    return (
        f"primary tests ({', '.join(words)}) under Holm, leaving out tests that cannot reach "
        "significance with these traces (Tarone); every other test exploratory, under "
        f"Benjamini-Hochberg; {split_words(d.alpha)}"
    )


def used_tests(frames: Iterable[pl.DataFrame]) -> list[str]:
    """The tests that gave a p-value in any of ``frames``, most used first (then by name)."""
    counts: dict[str, int] = {}
    for f in frames:
        if f.height == 0:
            continue
        for t in f.filter(pl.col("p_unadjusted").is_not_null())["test"].to_list():
            counts[str(t)] = counts.get(str(t), 0) + 1
    return sorted(counts, key=lambda t: (-counts[t], t))


def describe_tests(frames: Sequence[pl.DataFrame], *, none: str = "no test run") -> str:
    """The tests used in ``frames``, in words, joined: ``"Welch's t-test over traces; ..."``."""
    used = [t for t in used_tests(frames) if t != "identical"]
    if not used:
        return none
    return "; ".join(TEST_WORDS.get(t, t) for t in used)


def length_caution(d: Any) -> str | None:
    """The sentence shown above the findings when the groups' traces differ in length by more
    than 2x (``settings["lengths"]``), None otherwise."""
    span = d.settings.get("lengths") or {}
    if not span.get("differ"):
        return None
    a, b = d.names
    return (
        f"the traces of {a} and {b} differ in length (median {span['median_a']:g} vs "
        f"{span['median_b']:g} states visited, {span['ratio']:.1f}x): a difference in length "
        "alone changes time shares, dwell times and the chances to break an invariant, so "
        "these are compared only between traces in the same length stratum (1, 2-3, 4-7, 8-15, "
        "... states visited; no test when no stratum holds traces of both groups), invariants "
        "per chance to break them where a chance has no length (a return to a state), and "
        "transitions per exit of their source, the end of a trace being censoring; a "
        "permutation test exchanges traces only within their length stratum"
    )
