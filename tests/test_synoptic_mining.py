"""Invariant mining: Synoptic's own example, and agreement with the definitions."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.model.synoptic import EventLog, mine_invariants

# Synoptic's traces/abstract/shopping-cart-example, one trace per client address.
CART = [
    ["check-out", "get-credit-card"],
    ["check-out", "invalid-coupon", "reduce-price", "check-out", "get-credit-card"],
    ["check-out", "valid-coupon", "reduce-price", "check-out", "get-credit-card"],
]

# The invariants (with support counts) Synoptic prints for that log
# (--outputInvariantsToFile --outputSupportCount); checked by hand against the traces.
CART_INVARIANTS = {
    ("AlwaysFollowedBy", "INITIAL", "check-out", 5),
    ("AlwaysFollowedBy", "INITIAL", "get-credit-card", 3),
    ("AlwaysFollowedBy", "check-out", "get-credit-card", 5),
    ("AlwaysPrecedes", "check-out", "get-credit-card", 3),
    ("AlwaysPrecedes", "check-out", "invalid-coupon", 1),
    ("AlwaysPrecedes", "check-out", "reduce-price", 2),
    ("AlwaysPrecedes", "check-out", "valid-coupon", 1),
    ("NeverFollowedBy", "get-credit-card", "check-out", 3),
    ("NeverFollowedBy", "get-credit-card", "get-credit-card", 3),
    ("NeverFollowedBy", "get-credit-card", "invalid-coupon", 3),
    ("NeverFollowedBy", "get-credit-card", "reduce-price", 3),
    ("NeverFollowedBy", "get-credit-card", "valid-coupon", 3),
    ("AlwaysFollowedBy", "invalid-coupon", "check-out", 1),
    ("AlwaysFollowedBy", "invalid-coupon", "get-credit-card", 1),
    ("AlwaysFollowedBy", "invalid-coupon", "reduce-price", 1),
    ("NeverFollowedBy", "invalid-coupon", "invalid-coupon", 1),
    ("NeverFollowedBy", "invalid-coupon", "valid-coupon", 1),
    ("AlwaysFollowedBy", "reduce-price", "check-out", 2),
    ("AlwaysFollowedBy", "reduce-price", "get-credit-card", 2),
    ("NeverFollowedBy", "reduce-price", "invalid-coupon", 2),
    ("NeverFollowedBy", "reduce-price", "reduce-price", 2),
    ("NeverFollowedBy", "reduce-price", "valid-coupon", 2),
    ("AlwaysFollowedBy", "valid-coupon", "check-out", 1),
    ("AlwaysFollowedBy", "valid-coupon", "get-credit-card", 1),
    ("AlwaysFollowedBy", "valid-coupon", "reduce-price", 1),
    ("NeverFollowedBy", "valid-coupon", "invalid-coupon", 1),
    ("NeverFollowedBy", "valid-coupon", "valid-coupon", 1),
}


def _rows(traces: list[list[str]]) -> set[tuple[str, str, str, int]]:
    df = mine_invariants(EventLog.from_sequences(traces))
    return set(df.select("kind", "a", "b", "support").iter_rows())


def test_shopping_cart_matches_synoptic() -> None:
    assert _rows(CART) == CART_INVARIANTS


def test_duplicate_traces_count_in_support() -> None:
    rows = _rows([["a", "b"], ["a", "b"], ["a"]])
    assert ("AlwaysFollowedBy", "INITIAL", "a", 3) in rows
    assert ("AlwaysPrecedes", "a", "b", 2) in rows
    assert not any(k == "AlwaysFollowedBy" and a == "a" for k, a, _, _ in rows)


def _reference(traces: list[list[str]]) -> set[tuple[str, str, str, int]]:
    """The invariant definitions, evaluated naively event by event."""
    labels = sorted({e for t in traces for e in t})
    count = {x: sum(t.count(x) for t in traces) for x in labels}
    out: set[tuple[str, str, str, int]] = set()
    for a in labels:
        for b in labels:
            followed = sum(1 for t in traces for i, e in enumerate(t) if e == a and b in t[i + 1 :])
            preceded = sum(1 for t in traces for i, e in enumerate(t) if e == b and a in t[:i])
            if followed == count[a]:
                out.add(("AlwaysFollowedBy", a, b, count[a]))
            if followed == 0:
                out.add(("NeverFollowedBy", a, b, count[a]))
            if preceded == count[b]:
                out.add(("AlwaysPrecedes", a, b, count[b]))
    for x in labels:
        if all(x in t for t in traces):
            out.add(("AlwaysFollowedBy", "INITIAL", x, count[x]))
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.sampled_from("abcd"), min_size=1, max_size=7), min_size=1, max_size=8))
def test_mining_matches_the_definitions(traces: list[list[str]]) -> None:
    assert _rows(traces) == _reference(traces)
