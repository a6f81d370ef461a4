"""The words for the families and tests a comparison actually used: the significance line of
every view's header, the report's captions and its Methods.

The statistics (:mod:`quicsm.compare.families`) name each row's test (its ``test`` column) and
the primary family it belongs to (``settings["primary"]``); this module says them, so that a
header never lists a family that was not primary and a caption never names a test that no row
used.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import polars as pl

from quicsm.compare.diff import FAMILIES, outcome_name
from quicsm.compare.families.policy import PRIMARY_SHARE

__all__ = [
    "TEST_WORDS",
    "length_caution",
    "plan_length_words",
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


#: what the notes of the tests say when length strata cost them (quicsm.compare.keys,
#: quicsm.compare.families.clustered)
_NO_STRATUM = ("no stratum with traces in both groups", "no length stratum holds traces of both")
_WITHIN = re.compile(r"permuted within (\d+) length strat")
_HELD = re.compile(r"(\d+) traces held in their group")


def plan_length_words(d: Any) -> str | None:
    """What testing within length strata costs a plan (``quicsm diff --plan``), when the
    groups' traces differ in length by more than 2x (as :func:`length_caution`); None
    otherwise: the tests it leaves without a test or unpermuted, and the degrees of freedom
    and traces the permuted ones lose, as the pilot's rows say."""
    span = d.settings.get("lengths") or {}
    if not span.get("differ"):
        return None
    untested = unpermuted = 0
    kept: set[tuple[int, int, int, int]] = set()  # (df, df unstratified, strata, held)
    for frame in d.frames():
        if "note" not in frame.columns:
            continue
        dfs = frame["df"] if "df" in frame.columns else pl.Series([None] * frame.height)
        for p, note, df in zip(frame["p_unadjusted"], frame["note"], dfs, strict=True):
            note = note or ""
            if _NO_STRATUM[0] in note and p is None:
                untested += 1
            elif _NO_STRATUM[1] in note:
                unpermuted += 1
            found = _WITHIN.search(note)
            if found and df is not None and df == df:
                strata = int(found.group(1))
                got = _HELD.search(note)
                held = int(got.group(1)) if got else 0
                # the reference has the traces used less two per stratum; unstratified, all
                # the traces less two
                kept.add((round(df), round(df) + 2 * strata + held - 2, strata, held))
    a, b = d.names
    words = (
        f"The traces of {a} and {b} differ in length (median {span['median_a']:g} vs "
        f"{span['median_b']:g} states visited, {span['ratio']:.1f}x), so time shares, dwell "
        "times and the invariants compared per trace are tested within length strata (1, 2-3, "
        "4-7, 8-15, ... states visited), and a permutation test exchanges traces only within "
        "their length stratum. That costs power: each stratum's two means cost the test a "
        "degree of freedom each, and a trace whose stratum holds traces of one group only is "
        "not compared."
    )
    if kept:
        parts = [
            f"{df} of the {full} degrees of freedom ({strata} strat"
            f"{'um' if strata == 1 else 'a'}, {held} trace{'s' * (held != 1)} held in "
            f"{'its' if held == 1 else 'their'} group)"
            for df, full, strata, held in sorted(kept, key=lambda k: (k[0] / max(1, k[1]), k))
        ]
        shown = parts if len(parts) <= 2 else [parts[0], parts[-1]]
        words += (
            " In this pilot the tests permuted within length strata kept "
            + (" to ".join(shown) if len(parts) > 2 else " and ".join(shown))
            + " that their traces would give unstratified."
        )
    if unpermuted:
        words += (
            f" {unpermuted} test{'s' * (unpermuted != 1)} had no length stratum holding both "
            "groups and were referred to Student's t instead of permuted."
        )
    if untested:
        words += (
            f" {untested} test{'s' * (untested != 1)} had no stratum holding both groups and "
            "ran no test: not planned, since more runs decide them only if their lengths "
            "overlap."
        )
    return (
        words + " The traces per group assume the runs to come fall into the strata as the "
        "pilot's did."
    )
