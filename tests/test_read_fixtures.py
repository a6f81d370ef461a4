"""read_transitions gives the right canonical sequences for every serialization we support."""

from __future__ import annotations

import warnings
from pathlib import Path

import orjson
import polars as pl
import pytest

from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.core.frames import TRANSITIONS_SCHEMA
from quicsm.extract.read import read_metrics, read_traces, read_transitions, scan_transitions

FIX = Path(__file__).parent / "fixtures" / "qlog"


def states_of(path: Path | str, **kw: object) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        df = read_transitions(path, **kw)  # type: ignore[arg-type]
    return df["state"].cast(pl.String).to_list()


EXPECTED = {
    # quic-go, 0.3 header; the repeated congestion_avoidance is not a transition
    "quicgo_0.3.sqlog": [
        "Init",
        "SlowStart",
        "Recovery",
        "CongestionAvoidance",
        "ApplicationLimited",
        "CongestionAvoidance",
    ],
    # recent quic-go: hybrid file_schema + qlog_version header
    "quicgo_file_schema.sqlog": ["Init", "SlowStart", "CongestionAvoidance"],
    # quiche, quic:* names; conservative_slow_start is SlowStart (no repeat)
    "quiche_quic.sqlog": [
        "Init",
        "SlowStart",
        "CongestionAvoidance",
        "Recovery",
        "CongestionAvoidance",
    ],
    "quiche_bbr.sqlog": ["Init", "Startup", "Drain", "ProbeBW", "ProbeRTT", "ProbeBW"],
    "neqo_0.4.sqlog": ["Init", "SlowStart", "Recovery", "CongestionAvoidance", "SlowStart"],
    "draft02.ndjson": ["Init", "SlowStart", "CongestionAvoidance"],
    # picoquic draft-00 arrays, numeric states, cc algorithm from run.json
    "picoquic_cubic/server.qlog": [
        "Init",
        "CongestionAvoidance",
        "Recovery",
        "CongestionAvoidance",
    ],
    "picoquic_no_cc.qlog": ["Init", "Unknown"],
    "mvfst_draft00.qlog": ["Init", "SlowStart", "Recovery", "CongestionAvoidance"],
    "draft01_delta.qlog": [
        "Init",
        "SlowStart",
        "TailLossProbe",
        "RetransmissionTimeout",
        "SlowStart",
        "CongestionAvoidanceMaxed",
    ],
    # truncated files keep every complete event
    "quicgo_truncated.sqlog": ["Init", "SlowStart"],
    "quiche_truncated.qlog": ["Init", "SlowStart", "Recovery"],
}

#: aioquic logs no states: derived from metrics, losses and PTO counts (docs/derive.md): the
#: first ACK finds 1280 of 13440 bytes in flight (not cwnd-limited), the cutback at 60 ms
#: starts recovery, two probe timeouts follow, and the ACK at 200 ms ends both
AIOQUIC_DERIVED = [
    "Init",
    "ApplicationLimited",
    "Recovery",
    "TailLossProbe",
    "RetransmissionTimeout",
    "ApplicationLimited",
]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_canonical_sequence(name: str) -> None:
    # the formats' own states; hybrid mode (the default) is tested in test_read_derive.py
    assert states_of(FIX / name, states="explicit") == EXPECTED[name]


def test_a_trace_without_states_gets_derived_ones() -> None:
    assert states_of(FIX / "aioquic_0.3.qlog") == AIOQUIC_DERIVED
    assert states_of(FIX / "aioquic_0.3.qlog", states="derived") == AIOQUIC_DERIVED
    assert states_of(FIX / "aioquic_0.3.qlog", states="explicit") == ["Init"]


def test_schema_and_init_at_first_event() -> None:
    df = read_transitions(FIX / "quicgo_0.3.sqlog", states="explicit")
    assert dict(df.schema) == TRANSITIONS_SCHEMA
    first = df.row(0, named=True)
    assert first["state"] == "Init" and first["time_ms"] == 0.0 and first["source"] == "derived"
    # times count from the first event (0.041 ms in the file)
    assert df["time_ms"].to_list() == [0.0, 0.169, 31.159, 41.959, 55.459, 59.959]
    assert set(df["end_ms"].to_list()) == {72.209}
    assert df["vantage"].cast(pl.String).unique().to_list() == ["server"]
    assert df["raw_state"].to_list()[1:3] == ["slow_start", "recovery"]
    assert set(df["source"].cast(pl.String).to_list()[1:]) == {"explicit"}


def test_triggers_are_kept() -> None:
    df = read_transitions(FIX / "neqo_0.4.sqlog")
    assert df["trigger"].to_list() == [
        None,
        None,
        "loss",
        "recovery_finished",
        "persistent_congestion",
    ]


def test_microseconds_are_converted() -> None:
    df = read_transitions(FIX / "picoquic_cubic" / "server.qlog", states="explicit")
    assert df["time_ms"].to_list() == [0.0, 45.3, 90.0, 130.0]
    assert df["end_ms"][0] == 150.5


def test_derived_rows_say_so() -> None:
    df = read_transitions(FIX / "aioquic_0.3.qlog")
    assert set(df["source"].cast(pl.String)) == {"derived"}
    assert df["trigger"].to_list()[2] == "cutback"


def test_packed_corpus_gives_one_trace_per_header_with_stable_ids() -> None:
    for name in ("packed.sqlog.zst", "packed.sqlog.gz"):
        df = read_transitions(FIX / name)
        traces = df["trace"].unique(maintain_order=True).to_list()
        assert traces == [f"{FIX / name}#{i:04d}" for i in range(3)]
        again = read_transitions(FIX / name)
        assert df.equals(again)
        last = df.filter(pl.col("trace") == traces[2])["state"].cast(pl.String).to_list()
        assert last == [
            "Init",
            "SlowStart",
            "TailLossProbe",
            "RetransmissionTimeout",
            "SlowStart",
            "CongestionAvoidanceMaxed",
        ]


def test_read_traces_labels_and_formats() -> None:
    df = read_traces(FIX / "packed.sqlog.zst")
    assert df.height == 3
    labels = [orjson.loads(x) for x in df["labels"]]
    assert [lab["run"] for lab in labels] == [1, 2, 3]
    assert labels[0] == {
        "code_version": "v0.50.0",
        "device": "desktop",
        "run": 1,
        "scenario": "loss-1pct",
        "stack": "quic-go",
        "title": "quic-go qlog",
        "vantage": "server",
    }
    assert df["n_events"].to_list() == [5, 4, 7]
    assert df["format"].unique().to_list() == ["JSON-SEQ 0.3"]
    hybrid = read_traces(FIX / "quicgo_file_schema.sqlog").row(0, named=True)
    assert hybrid["format"] == "JSON-SEQ file_schema+0.3"
    assert hybrid["code_version"] == "v0.57.1"
    assert hybrid["n_events"] == 12
    pico = read_traces(FIX / "picoquic_cubic").row(0, named=True)
    assert orjson.loads(pico["labels"])["cc_algorithm"] == "cubic"  # from run.json
    assert pico["format"] == "JSON draft-00" and pico["duration_ms"] == 150.5


def test_truncation_is_reported_not_raised() -> None:
    diag = Diagnostics()
    with pytest.warns(QuicsmWarning, match="cut mid-write"):
        read_transitions(FIX / "quicgo_truncated.sqlog", diagnostics=diag)
    assert diag.truncated == [
        f"{FIX / 'quicgo_truncated.sqlog'}: record 9 (line 9) is incomplete: the file was cut "
        "mid-write; every complete record before it was kept"
    ]
    diag = Diagnostics()
    with pytest.warns(QuicsmWarning):
        read_transitions(FIX / "quiche_truncated.qlog", diagnostics=diag)
    assert diag.truncated == [
        f"{FIX / 'quiche_truncated.qlog'}: the JSON document ends early (line 33): "
        "kept 3 complete events"
    ]


def test_unknown_and_numeric_states_warn_and_keep_raw() -> None:
    diag = Diagnostics()
    with pytest.warns(QuicsmWarning, match="numeric congestion states"):
        df = read_transitions(FIX / "picoquic_no_cc.qlog", diagnostics=diag, states="explicit")
    assert df["raw_state"].to_list() == [None, "2"]
    assert diag.unknown_states == {"2": 2, "1": 1}


def test_numeric_states_without_a_controller_leave_the_derived_states_in_hybrid_mode() -> None:
    """picoquic's numbers mean a state only per controller: without one (picoquic's own test
    references from 2026 log one such event), hybrid reading leaves them out, so a single
    number cannot stand for the rest of the trace where the metrics show the states, and
    says so; explicit reading keeps them raw (above)."""
    diag = Diagnostics()
    with pytest.warns(QuicsmWarning, match="without it they are left out"):
        df = read_transitions(FIX / "picoquic_no_cc.qlog", diagnostics=diag)
    assert df["state"].to_list() == ["Init", "ApplicationLimited"]
    assert set(df["source"].to_list()) == {"derived"} and not diag.unknown_states


def test_metrics_carry_forward_and_renames() -> None:
    m = read_metrics(FIX / "aioquic_0.3.qlog")
    assert m["event"].to_list()[:5] == ["metrics", "metrics", "metrics", "packet_lost", "metrics"]
    # the third update carries only cwnd: bytes in flight and RTTs are carried forward
    third = m.row(2, named=True)
    assert third["cwnd_bytes"] == 17280 and third["bytes_in_flight"] == 0
    assert third["smoothed_rtt_ms"] == 20.0 and third["min_rtt_ms"] == 20.0
    assert m["pto_count"].to_list()[-3:] == [1, 2, 0]
    pico = read_metrics(FIX / "picoquic_cubic" / "server.qlog")
    # picoquic logs RTTs in microseconds (time_units us)
    assert pico["smoothed_rtt_ms"].to_list() == [None, 46.151]
    assert pico["cwnd_bytes"].to_list() == [None, 12154]
    mv = read_metrics(FIX / "mvfst_draft00.qlog")
    assert mv["cwnd_bytes"].to_list() == [12320, 20000, 14000, 14500, 14500]
    assert mv["event"].to_list()[-1] == "packet_lost"
    go = read_metrics(FIX / "quicgo_file_schema.sqlog")
    assert "pto" in go["event"].to_list() and "spurious_loss" in go["event"].to_list()


def test_scan_is_read_lazily_collected() -> None:
    lazy = scan_transitions([FIX / "quiche_quic.sqlog", FIX / "neqo_0.4.sqlog"])
    assert isinstance(lazy, pl.LazyFrame)
    assert lazy.collect().equals(
        read_transitions([FIX / "quiche_quic.sqlog", FIX / "neqo_0.4.sqlog"])
    )


def test_directory_reads_everything_and_order_of_arguments_does_not_matter() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        a = read_transitions([FIX])
        files = sorted(p for p in FIX.rglob("*") if p.is_file() and p.name != "run.json")
        b = read_transitions(list(reversed(files)))
    assert a.equals(b)
    assert a["trace"].n_unique() == 21
