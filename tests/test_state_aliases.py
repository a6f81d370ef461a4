"""The alias table: consistent data, documented verbatim, lookups behave as documented."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from quicsm.core.aliases import (
    ALIASES,
    NUMERIC_STATES,
    canonical_state,
    normalize_name,
    render_markdown,
)
from quicsm.core.states import CANONICAL_STATES, UNKNOWN

DOC = Path(__file__).resolve().parent.parent / "docs" / "states.md"


def test_docs_table_is_generated_from_the_data() -> None:
    text = DOC.read_text()
    match = re.search(
        r"<!-- BEGIN generated alias table -->\n(.*)<!-- END generated alias table -->", text, re.S
    )
    assert match is not None
    assert match.group(1) == render_markdown(), "docs/states.md is stale: regenerate the table"


def test_every_row_maps_to_a_canonical_state_and_back() -> None:
    for alias in ALIASES:
        assert alias.state in CANONICAL_STATES
        assert canonical_state(alias.raw) == alias.state
    for n in NUMERIC_STATES:
        assert canonical_state(str(n.number), cc_algorithm=n.algorithm) == n.state


def test_required_producers_are_covered() -> None:
    producers = {a.producer for a in ALIASES}
    assert {"quic-go", "quiche", "neqo", "mvfst", "quicsm instrumentation"} <= producers
    assert {n.algorithm for n in NUMERIC_STATES} >= {"cubic", "newreno", "bbr"}
    for state in CANONICAL_STATES:
        if state != UNKNOWN:
            assert canonical_state(state) == state
            snake = re.sub(r"(?<!^)(?=[A-Z])", "_", state).lower()
            assert canonical_state(snake) == state, snake


def test_spelling_variants_and_numbers() -> None:
    assert canonical_state("SLOW-START") == "SlowStart"
    assert canonical_state("bbr_probe_bw_up") == "ProbeBW"
    assert canonical_state("ProbeRtt") == "ProbeRTT"
    assert canonical_state("2") == UNKNOWN  # numbers need the controller
    assert canonical_state("1", cc_algorithm="NewReno") == "CongestionAvoidance"
    assert canonical_state("1", cc_algorithm="cubic") == "Recovery"
    # picoquic BBR keeps sub-state flags above the low byte
    assert canonical_state(str(6 | (1 << 16) | (2 << 8)), cc_algorithm="bbr") == "ProbeRTT"
    assert canonical_state("9", cc_algorithm="cubic") == UNKNOWN


@given(st.text(max_size=30), st.none() | st.sampled_from(["cubic", "bbr", "x", "Reno"]))
def test_lookup_is_total_and_normalisation_invariant(raw: str, cc: str | None) -> None:
    state = canonical_state(raw, cc_algorithm=cc)
    assert state in CANONICAL_STATES
    if not raw.isdigit():
        assert canonical_state(raw.upper()) == canonical_state(raw.lower())
        assert canonical_state(normalize_name(raw) or raw) == canonical_state(
            raw
        ) or not normalize_name(raw)
