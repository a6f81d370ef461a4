"""The state deriver: its rule table, producer profiles, hybrid merge and notices
(docs/derive.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.core.errors import InputError
from quicsm.core.states import PAPER_STATES
from quicsm.extract import profiles, rules
from quicsm.extract.derive import (
    DERIVED,
    EXPLICIT,
    Row,
    derive_states,
    logged_states,
    merge_hybrid,
)
from quicsm.extract.deriver import CompactRows, DerivedState, Deriver, describe_states
from quicsm.extract.profiles import PROFILES, Profile, detect_profile, profile_named
from quicsm.extract.read import read_transitions
from quicsm.extract.rules import RULES, Context, render_markdown
from quicsm.qlog.events import MetricEvent

QUIC_GO = PROFILES["quic-go"]
AIOQUIC = PROFILES["aioquic"]


def m(t: float, **values: float) -> MetricEvent:
    return MetricEvent(t, "metrics", dict(values))


def states(events: list[MetricEvent], profile: Profile = AIOQUIC) -> list[tuple[float, str]]:
    return [(d.time, d.state) for d in derive_states(events, profile=profile).states]


def test_slow_start_recovery_and_its_end_by_the_sent_time_of_the_acked_packet() -> None:
    events = [
        m(0, cwnd_bytes=12000, bytes_in_flight=0),
        m(1, bytes_in_flight=11000),  # sent
        m(10, bytes_in_flight=9000, latest_rtt_ms=9, cwnd_bytes=14000),  # ack: slow start
        MetricEvent(11, "packet_lost", trigger="time_threshold"),
        m(12, cwnd_bytes=9800, ssthresh_bytes=9800, bytes_in_flight=8000),  # cutback
        m(13, bytes_in_flight=9000),
        # acknowledges a packet sent at 20 - 9.5 = 10.5 < 11: still in recovery
        m(20, bytes_in_flight=8500, latest_rtt_ms=9.5),
        # acknowledges a packet sent at 30 - 8 = 22 > 11: recovery is over
        m(30, bytes_in_flight=8200, latest_rtt_ms=8),
    ]
    out = list(derive_states(events, profile=AIOQUIC).states)
    assert [(d.time, d.state) for d in out] == [
        (10, "SlowStart"),
        (11, "Recovery"),  # dated by the loss that caused the cutback
        (30, "CongestionAvoidance"),
    ]
    assert out[1].trigger == "cutback"


def test_quic_go_without_ssthresh_infers_it_from_the_cutback() -> None:
    events = [
        m(0, cwnd_bytes=40000, bytes_in_flight=0),
        m(1, bytes_in_flight=39000),
        m(10, bytes_in_flight=37000, latest_rtt_ms=9, cwnd_bytes=42504),
        MetricEvent(11, "packet_lost"),
        m(11, cwnd_bytes=29752, bytes_in_flight=36000, latest_rtt_ms=9.2),
        m(12, bytes_in_flight=39000),
        m(30, bytes_in_flight=38000, latest_rtt_ms=9.1),
    ]
    assert states(events, QUIC_GO) == [
        (10, "SlowStart"),
        (11, "Recovery"),
        (30, "CongestionAvoidance"),
    ]


def test_pto_count_gives_tlp_then_rto_then_the_ack_decides() -> None:
    events = [
        m(0, cwnd_bytes=40000, bytes_in_flight=0),
        m(1, bytes_in_flight=39000),
        m(2, pto_count=1),
        m(3, pto_count=2),
        m(4, pto_count=0, bytes_in_flight=38000, latest_rtt_ms=3),
    ]
    assert states(events, QUIC_GO) == [
        (2, "TailLossProbe"),
        (3, "RetransmissionTimeout"),
        (4, "SlowStart"),
    ]


def test_pto_timer_and_pto_count_of_the_same_timeout_count_once() -> None:
    events = [
        m(0, cwnd_bytes=40000, bytes_in_flight=39000),
        MetricEvent(2, "pto"),
        m(2, pto_count=1),
        MetricEvent(5, "pto"),
        m(5, pto_count=2),
    ]
    assert states(events, QUIC_GO) == [(2, "TailLossProbe"), (5, "RetransmissionTimeout")]


def test_no_pto_for_the_handshake_anti_deadlock_timer() -> None:
    events = [m(0, cwnd_bytes=40000, bytes_in_flight=0), MetricEvent(2, "pto")]
    assert states(events, QUIC_GO) == []


def test_probe_timeout_seen_from_a_send_after_a_silent_pto_period() -> None:
    # aioquic logs no PTO: srtt 10 + 4 * rttvar 5 + max_ack_delay 25 = 55 ms of silence
    events = [
        m(0, cwnd_bytes=12000, bytes_in_flight=0),
        m(1, bytes_in_flight=1200),
        m(11, bytes_in_flight=2400, latest_rtt_ms=10, smoothed_rtt_ms=10, rtt_variance_ms=5),
        m(12, bytes_in_flight=3600),  # a send 1 ms later: nothing
        m(70, bytes_in_flight=4800),  # 58 ms later: the first PTO's probe
        m(190, bytes_in_flight=6000),  # 120 ms later (backed off 2x): the second
    ]
    assert states(events) == [
        (11, "ApplicationLimited"),
        (70, "TailLossProbe"),
        (190, "RetransmissionTimeout"),
    ]


def test_application_limited_from_bytes_in_flight_and_from_a_flag() -> None:
    events = [
        m(0, cwnd_bytes=40000, bytes_in_flight=0),
        m(1, bytes_in_flight=5000),
        m(10, bytes_in_flight=0, latest_rtt_ms=9),  # 5000 of 40000 in flight: not limited
        m(11, bytes_in_flight=39000),
        # limited, and the window grows a datagram per datagram acknowledged: slow start
        m(20, bytes_in_flight=30000, latest_rtt_ms=9.5, cwnd_bytes=40000 + 9000),
    ]
    assert states(events, QUIC_GO) == [(10, "ApplicationLimited"), (20, "SlowStart")]
    flagged = [
        m(1, cwnd_bytes=5),
        MetricEvent(2, "metrics", {}, True),
        MetricEvent(3, "metrics", {}, False),
    ]
    assert states(flagged) == [(1, "SlowStart"), (2, "ApplicationLimited"), (3, "SlowStart")]


def test_window_at_the_built_in_cap_is_maxed() -> None:
    assert QUIC_GO.max_cwnd_datagrams is not None
    cap = QUIC_GO.max_cwnd_datagrams * QUIC_GO.datagram_bytes
    events = [
        m(0, cwnd_bytes=cap, bytes_in_flight=0),
        m(1, bytes_in_flight=cap),
        m(10, bytes_in_flight=cap - 2000, latest_rtt_ms=9),
    ]
    assert states(events, QUIC_GO) == [(10, "CongestionAvoidanceMaxed")]


def test_a_plateau_in_slow_start_with_ssthresh_logged_is_a_cap() -> None:
    events = [m(0, cwnd_bytes=48000, bytes_in_flight=0), m(1, bytes_in_flight=48000)]
    in_flight = 48000
    for i in range(10):  # cwnd-limited ACKs that do not grow the window
        in_flight -= 1200
        events.append(m(10 + i, bytes_in_flight=in_flight, latest_rtt_ms=9 + i / 100))
        in_flight += 1200
        events.append(m(10.5 + i, bytes_in_flight=in_flight))
    got = states(events)
    assert got[0] == (10, "SlowStart")
    assert got[-1][1] == "CongestionAvoidanceMaxed"


def test_a_plateau_found_late_is_dated_from_the_last_window_change() -> None:
    # congestion avoidance (ssthresh logged) whose window last grew at 10 ms, then stood still
    # while cwnd-limited ACKs acknowledged 1.5 windows: capped since 10 ms
    events = [
        m(0, cwnd_bytes=20000, ssthresh_bytes=10000, bytes_in_flight=0),
        m(1, bytes_in_flight=20000),
        m(10, bytes_in_flight=19000, latest_rtt_ms=9, cwnd_bytes=24000),
        m(10.2, bytes_in_flight=23500),
    ]
    in_flight = 23500.0
    t = 11.0
    for _ in range(40):  # 40 ACKs of 1000 bytes, refilled at once: 40000 >= 1.5 * 24000
        in_flight -= 1000
        events.append(m(t, bytes_in_flight=in_flight, latest_rtt_ms=t / 1000 + 9))
        in_flight += 1000
        events.append(m(t + 0.5, bytes_in_flight=in_flight))
        t += 1
    assert states(events) == [(10, "CongestionAvoidanceMaxed")]


def test_quinn_ssthresh_of_u64_max_means_not_set() -> None:
    quinn = PROFILES["quinn"]
    events = [
        m(0, cwnd_bytes=12000, ssthresh_bytes=float(2**64 - 1), bytes_in_flight=0),
        m(1, bytes_in_flight=12000),
        m(10, bytes_in_flight=10800, latest_rtt_ms=9, cwnd_bytes=13200),
        MetricEvent(11, "packet_lost"),
        m(11, cwnd_bytes=9240, ssthresh_bytes=9240, bytes_in_flight=9600),
        m(12, bytes_in_flight=9600 + 1200),
        m(30, bytes_in_flight=9600, latest_rtt_ms=9.5, cwnd_bytes=9400),
    ]
    assert states(events, quinn) == [
        (10, "SlowStart"),
        (11, "Recovery"),
        (30, "CongestionAvoidance"),
    ]


def test_persistent_congestion_collapses_to_rto() -> None:
    events = [
        m(0, cwnd_bytes=40000, bytes_in_flight=30000),
        MetricEvent(1, "packet_lost"),
        m(1, cwnd_bytes=28000, ssthresh_bytes=28000),
        MetricEvent(2, "packet_lost"),
        m(2, cwnd_bytes=2400, ssthresh_bytes=28000),
    ]
    assert states(events) == [(1, "Recovery"), (2, "RetransmissionTimeout")]


def test_losses_without_any_window_still_mean_recovery() -> None:
    assert states([MetricEvent(3, "packet_lost")]) == [(3, "Recovery")]


def test_notices_name_what_a_trace_cannot_show() -> None:
    assert derive_states([], profile=AIOQUIC).notices == [
        ((), "the trace logs no recovery metrics, losses or timers")
    ]
    notices = dict(derive_states([MetricEvent(1, "packet_lost")], profile=AIOQUIC).notices)
    assert "no congestion window (cwnd) is logged" in notices.values()
    assert notices[("ApplicationLimited",)].startswith("no bytes_in_flight")
    assert describe_states(()) == ""
    assert describe_states(("A", "B", "C")) == "A, B and C"
    full = [m(0, cwnd_bytes=1, bytes_in_flight=0, latest_rtt_ms=1)]
    assert derive_states(full, profile=AIOQUIC).notices == []


def test_hybrid_keeps_logged_states_and_fills_in_the_others() -> None:
    explicit = [
        Row(1, "SlowStart", "slow_start", None, EXPLICIT),
        Row(5, "Recovery", "recovery", None, EXPLICIT),
        Row(9, "CongestionAvoidance", "congestion_avoidance", None, EXPLICIT),
    ]
    derived = [
        DerivedState(1.1, "SlowStart", "ack"),
        DerivedState(6, "TailLossProbe", "pto"),
        DerivedState(8, "Recovery", "ack"),
        DerivedState(9, "CongestionAvoidance", "ack"),
    ]
    logged = logged_states(QUIC_GO, ["SlowStart", "Recovery"])
    got = [(r.time, r.state, r.source) for r in merge_hybrid(explicit, derived, logged=logged)]
    assert got == [
        (1, "Init", DERIVED),  # quic-go logs no Init: derived until the first decision
        (1.1, "SlowStart", EXPLICIT),
        (5, "Recovery", EXPLICIT),
        (6, "TailLossProbe", DERIVED),
        (8, "Recovery", EXPLICIT),
        (9, "CongestionAvoidance", EXPLICIT),
    ]
    # a trace that logs a state no stock stack logs is instrumented: all eight are explicit
    assert logged_states(AIOQUIC, ["TailLossProbe"]) == frozenset(PAPER_STATES)


def test_profiles_detected_from_labels_title_and_code_version() -> None:
    assert detect_profile(title="quic-go qlog", code_version=None, labels={}).name == "quic-go"
    assert detect_profile(title="", code_version="v0.65.0", labels={}).name == "quic-go"
    assert detect_profile(title="", code_version=None, labels={"stack": "aioquic"}).name == (
        "aioquic"
    )
    assert detect_profile(title=None, code_version=None, labels={}).name == "generic"
    with pytest.raises(InputError, match="unknown producer profile 'nope'; known: aioquic"):
        profile_named("nope")


def test_every_rule_cites_its_source_and_leads_to_a_paper_state() -> None:
    table = render_markdown()
    for rule in RULES:
        assert rule.to in PAPER_STATES
        assert (
            "RFC 9002" in rule.cite
            or "quic-go" in rule.cite
            or "aioquic" in rule.cite
            or ("picoquic" in rule.cite)
        )
        assert rule.cite in table


def test_docs_show_the_generated_tables() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "derive.md").read_text()
    for name, text in (
        ("rule table", rules.render_markdown()),
        ("thresholds", rules.render_thresholds_markdown()),
        ("profiles", profiles.render_markdown()),
    ):
        begin, end = f"<!-- BEGIN generated {name} -->\n", f"\n<!-- END generated {name} -->"
        assert doc[doc.index(begin) + len(begin) : doc.index(end)] == text, name


def test_the_open_state_is_a_fixed_set_of_numbers() -> None:
    # memory O(one trace's open state): the context holds scalars only, no growing containers
    ctx = Context(AIOQUIC)
    for f in dataclasses.fields(ctx):
        assert not isinstance(getattr(ctx, f.name), list | dict | set), f.name


def test_modes_on_a_real_quic_go_trace() -> None:
    path = "tests/fixtures/real/quic-go-v0.48.2"
    explicit = read_transitions(path, states="explicit")
    derived = read_transitions(path, states="derived")
    hybrid = read_transitions(path)
    assert set(derived["source"].cast(str)) == {"derived"}
    assert "explicit" in set(explicit["source"].cast(str))
    # the patched stack logs all eight states itself: hybrid is the explicit timeline
    assert hybrid.equals(explicit)
    with pytest.raises(InputError, match="states must be one of hybrid, explicit, derived"):
        read_transitions(path, states="guessed")


def test_cannot_derive_notices_reach_the_diagnostics() -> None:
    diag = Diagnostics()
    with pytest.warns(QuicsmWarning):
        read_transitions("tests/fixtures/qlog/neqo_0.4.sqlog", diagnostics=diag)
    # neqo logs SlowStart, CongestionAvoidance and Recovery; its other states need metrics
    assert diag.derivation_messages() == [
        "CongestionAvoidanceMaxed, ApplicationLimited, RetransmissionTimeout and TailLossProbe "
        "cannot be derived: the trace logs no recovery metrics, losses or timers "
        "(tests/fixtures/qlog/neqo_0.4.sqlog#0000)"
    ]
    diag = Diagnostics()
    with pytest.warns(QuicsmWarning):
        read_transitions("tests/fixtures/qlog/neqo_0.4.sqlog", diagnostics=diag, states="derived")
    assert diag.derivation_messages()[0].startswith("no state can be derived")


event = st.one_of(
    st.builds(
        lambda t, c, s, b, r: MetricEvent(
            t,
            "metrics",
            {
                k: v
                for k, v in (
                    ("cwnd_bytes", c),
                    ("ssthresh_bytes", s),
                    ("bytes_in_flight", b),
                    ("latest_rtt_ms", r),
                )
                if v is not None
            },
        ),
        st.floats(0, 100),
        st.none() | st.floats(0, 1e6),
        st.none() | st.floats(0, 1e6),
        st.none() | st.floats(0, 1e6),
        st.none() | st.floats(0, 200),
    ),
    st.builds(
        lambda t, p: MetricEvent(t, "metrics", {"pto_count": p}),
        st.floats(0, 100),
        st.integers(0, 4),
    ),
    st.builds(lambda t: MetricEvent(t, "packet_lost"), st.floats(0, 100)),
    st.builds(lambda t: MetricEvent(t, "pto"), st.floats(0, 100)),
    st.builds(lambda t: MetricEvent(t, "spurious_loss"), st.floats(0, 100)),
    st.builds(lambda t, a: MetricEvent(t, "metrics", {}, a), st.floats(0, 100), st.booleans()),
)


@given(st.lists(event, max_size=60), st.sampled_from(sorted(PROFILES)))
def test_derived_sequences_are_well_formed(events: list[MetricEvent], name: str) -> None:
    events = sorted(events, key=lambda e: e.time)
    out = list(derive_states(events, profile=PROFILES[name]).states)
    times = [d.time for d in out]
    assert times == sorted(times)
    assert all(a.state != b.state for a, b in zip(out, out[1:], strict=False))
    assert {d.state for d in out} <= set(PAPER_STATES) - {"Init"}
    assert all(d.trigger for d in out)
    # one event at a time gives the same rows as the whole list
    deriver = Deriver(PROFILES[name])
    for e in events:
        deriver.feed(e)
    assert list(deriver.rows) == out
    # the compact form kept while reading gives the same rows back
    compact = CompactRows()
    for row in out:
        compact.append(row)
    assert list(compact) == out and len(compact) == len(out)


@given(
    st.lists(st.tuples(st.floats(0, 100), st.sampled_from(PAPER_STATES)), max_size=20),
    st.lists(  # the deriver never enters Init: it is where every trace starts
        st.tuples(st.floats(0, 100), st.sampled_from(PAPER_STATES[1:])),
        max_size=20,
        unique_by=lambda x: x[0],
    ),
)
def test_hybrid_with_everything_logged_is_explicit_and_with_nothing_is_derived(
    e: list[tuple[float, str]], d: list[tuple[float, str]]
) -> None:
    explicit = [Row(t, s, s, None, EXPLICIT) for t, s in sorted(e)]
    derived = [DerivedState(t, s, "x") for t, s in sorted(d)]
    derived = [x for i, x in enumerate(derived) if i == 0 or x.state != derived[i - 1].state]
    everything = merge_hybrid(explicit, derived, logged=frozenset(PAPER_STATES))
    if explicit:
        after = [r for r in everything if r.time >= explicit[0].time]
        assert all(r.source == EXPLICIT for r in after)
    nothing = merge_hybrid(explicit, derived, logged=frozenset())
    # every derived decision is shown from its time on (until a later explicit change)
    shown = {(r.time, r.state) for r in nothing if r.source == DERIVED}
    assert {(x.time, x.state) for x in derived} <= shown
    for merged in (everything, nothing):
        times = [r.time for r in merged]
        assert times == sorted(times)
        pairs = [(r.state, r.source) for r in merged]
        assert all(a != b for a, b in zip(pairs, pairs[1:], strict=False))


def test_comparisons_carry_the_notices_into_diff_and_report_notes() -> None:
    from quicsm.compare.load import compare_paths

    fix = Path(__file__).resolve().parent / "fixtures" / "qlog"
    with pytest.warns(QuicsmWarning):
        comp = compare_paths([str(fix / "neqo_0.4.sqlog")], [str(fix / "quiche_quic.sqlog")])
    assert any(
        note.startswith(
            "CongestionAvoidanceMaxed, ApplicationLimited, RetransmissionTimeout "
            "and TailLossProbe cannot be derived"
        )
        for note in comp.notes
    )
    explicit = compare_paths(
        [str(fix / "neqo_0.4.sqlog")], [str(fix / "quiche_quic.sqlog")], states="explicit"
    )
    assert not any("cannot be derived" in note for note in explicit.notes)
