"""The alias table: consistent data, documented verbatim, lookups behave as documented."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
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
from quicsm.extract.read import read_transitions

DOC = Path(__file__).resolve().parent.parent / "docs" / "states.md"


def test_docs_table_is_generated_from_the_data() -> None:
    text = DOC.read_text()
    match = re.search(
        r"<!-- BEGIN generated alias table -->\n(.*)<!-- END generated alias table -->", text, re.S
    )
    assert match is not None
    assert match.group(1) == render_markdown(), "docs/states.md is stale: regenerate the table"


FIXTURES = Path(__file__).resolve().parent / "fixtures" / "qlog"

#: What each real producer's state strings mean, written from the producers' sources (not from
#: the alias table): quic-go ``logging.CongestionState``, quiche ``recovery`` and ``bbr2`` state
#: names, neqo ``CongestionControlState``, mvfst's ``CongestionControlState`` names, picoquic's
#: cubic ``picoquic_cubic_alg_*`` enum (0 slow start, 1 recovery, 2 congestion avoidance), and the
#: paper's own names (draft-01 fixture).
PRODUCER_STRINGS: dict[str, dict[str, str]] = {
    "quicgo_0.3.sqlog": {
        "slow_start": "SlowStart", "congestion_avoidance": "CongestionAvoidance",
        "recovery": "Recovery", "application_limited": "ApplicationLimited",
    },
    "quiche_quic.sqlog": {
        "slow_start": "SlowStart", "congestion_avoidance": "CongestionAvoidance",
        "recovery": "Recovery",
    },
    "quiche_bbr.sqlog": {
        "bbr_startup": "Startup", "bbr_drain": "Drain", "bbr_probe_bw_down": "ProbeBW",
        "bbr_probe_bw_refill": "ProbeBW", "bbr_probe_rtt": "ProbeRTT",
    },
    "neqo_0.4.sqlog": {
        "slow_start": "SlowStart", "congestion_avoidance": "CongestionAvoidance",
        "recovery": "Recovery",
    },
    "mvfst_draft00.qlog": {
        "Hystart": "SlowStart", "Steady": "CongestionAvoidance", "FastRecovery": "Recovery",
    },
    "picoquic_cubic/server.qlog": {"1": "Recovery", "2": "CongestionAvoidance"},
    "draft01_delta.qlog": {
        "SlowStart": "SlowStart", "TailLossProbe": "TailLossProbe",
        "RetransmissionTimeout": "RetransmissionTimeout",
        "CongestionAvoidanceMaxed": "CongestionAvoidanceMaxed",
    },
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PRODUCER_STRINGS))
def test_real_producer_strings_map_as_their_sources_mean(name: str) -> None:
    frame = read_transitions([FIXTURES / name], states="explicit").filter(
        pl.col("source") == "explicit"
    )
    found = set(frame["raw_state"].to_list())
    expected = PRODUCER_STRINGS[name]
    assert found == set(expected), "the fixture's strings and this table must list the same names"
    cc = "cubic" if name.startswith("picoquic_cubic/") else None  # its run.json says so
    for raw, state in expected.items():
        assert canonical_state(raw, cc_algorithm=cc) == state, raw
    assert dict(zip(frame["raw_state"], frame["state"].cast(pl.String), strict=True)) == expected


def test_numeric_states_need_their_controller() -> None:
    for n in NUMERIC_STATES:
        assert canonical_state(str(n.number)) == UNKNOWN


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
