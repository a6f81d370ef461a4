"""Linux's CA states (+ cwnd against ssthresh, app-limited, BBR's gains) as the eight states."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.core.states import CANONICAL_STATES
from quicsm.extract.read import read_transitions
from quicsm.lab.tcpinfo import (
    CA_CWR,
    CA_DISORDER,
    CA_LOSS,
    CA_OPEN,
    CA_RECOVERY,
    FIELDS,
    BbrInfo,
    TcpInfo,
)
from quicsm.lab.tcpqlog import QlogWriter
from quicsm.lab.tcpstates import KernelStateMapper, bbr_phase

BASE = TcpInfo(**{name: 0 for name, _, _ in FIELDS})
OPEN = dataclasses.replace(BASE, state=1, snd_mss=1448, snd_cwnd=10, snd_ssthresh=0x7FFFFFFF)


def sample(**changes: int) -> TcpInfo:
    return dataclasses.replace(OPEN, **changes)


def states(mapper: KernelStateMapper, info: TcpInfo, bbr: BbrInfo | None = None) -> list[str]:
    return [d.state for d in mapper.decide(info, bbr)]


def test_growth_follows_cwnd_against_ssthresh() -> None:
    m = KernelStateMapper()
    assert states(m, sample(snd_cwnd=10, snd_ssthresh=20)) == ["SlowStart"]
    assert states(m, sample(snd_cwnd=20, snd_ssthresh=20)) == ["CongestionAvoidance"]
    # Disorder (dupacks/SACKs, nothing lost yet) still grows the window
    assert states(m, sample(ca_state=CA_DISORDER, snd_cwnd=5, snd_ssthresh=20)) == ["SlowStart"]


def test_ca_states_recovery_cwr_loss() -> None:
    m = KernelStateMapper()
    assert states(m, sample(ca_state=CA_RECOVERY, snd_ssthresh=20)) == ["Recovery"]
    assert states(m, sample(ca_state=CA_CWR, snd_ssthresh=20)) == ["Recovery"]
    assert states(m, sample(ca_state=CA_LOSS, retransmits=1)) == ["RetransmissionTimeout"]


def test_recovery_that_starts_on_the_ack_ending_the_last_one_shows_both() -> None:
    m = KernelStateMapper()
    states(m, sample(ca_state=CA_RECOVERY, snd_cwnd=30, snd_ssthresh=30))
    # same CA state, a new ssthresh: the kernel ended one episode and began the next
    assert states(m, sample(ca_state=CA_RECOVERY, snd_cwnd=21, snd_ssthresh=21)) == [
        "CongestionAvoidance",
        "Recovery",
    ]
    assert states(m, sample(ca_state=CA_RECOVERY, snd_cwnd=20, snd_ssthresh=21)) == ["Recovery"]


def test_tail_loss_probe_until_new_data_is_acknowledged() -> None:
    m = KernelStateMapper()
    states(m, sample(snd_cwnd=30, snd_ssthresh=20, bytes_acked=1000, total_retrans=0))
    # a retransmission while Open, no RTO pending: the probe resent the last segment
    probe = sample(snd_cwnd=30, snd_ssthresh=20, bytes_acked=1000, total_retrans=1)
    assert states(m, probe) == ["TailLossProbe"]
    assert states(m, probe) == ["TailLossProbe"]
    acked = sample(snd_cwnd=30, snd_ssthresh=20, bytes_acked=9000, total_retrans=1)
    assert states(m, acked) == ["CongestionAvoidance"]
    # new data sent after 1.5 smoothed RTTs without an ACK: the probe sent new data
    quiet = sample(
        snd_cwnd=30,
        snd_ssthresh=20,
        bytes_acked=9000,
        total_retrans=1,
        segs_out=5,
        rtt_us=40_000,
        last_ack_recv_ms=60,
    )
    assert states(m, quiet) == ["TailLossProbe"]
    # segments sent sooner than that after the last ACK are ordinary sending
    m2 = KernelStateMapper()
    states(m2, sample(snd_cwnd=30, snd_ssthresh=20, bytes_acked=9000, rtt_us=40_000))
    busy = sample(
        snd_cwnd=30,
        snd_ssthresh=20,
        bytes_acked=9000,
        segs_out=5,
        rtt_us=40_000,
        last_ack_recv_ms=20,
    )
    assert states(m2, busy) == ["CongestionAvoidance"]


def test_application_limited() -> None:
    m = KernelStateMapper()
    assert states(m, sample(flags=1, snd_cwnd=10, snd_ssthresh=20)) == ["ApplicationLimited"]
    states(m, sample(snd_cwnd=10, snd_ssthresh=20, rwnd_limited_us=0))
    # time limited by the receive window since the previous sample
    assert states(m, sample(snd_cwnd=10, snd_ssthresh=20, rwnd_limited_us=500)) == [
        "ApplicationLimited"
    ]
    assert states(m, sample(snd_cwnd=10, snd_ssthresh=20, rwnd_limited_us=500)) == ["SlowStart"]


def test_bbr_phases_from_its_gains() -> None:
    # net/ipv4/tcp_bbr.c's gains in BBR_UNIT = 256
    assert bbr_phase(BbrInfo(bw_bytes_per_s=1, min_rtt_us=1, pacing_gain=739, cwnd_gain=739)) == (
        "Startup"
    )
    assert bbr_phase(BbrInfo(bw_bytes_per_s=1, min_rtt_us=1, pacing_gain=88, cwnd_gain=739)) == (
        "Drain"
    )
    for gain in (320, 192, 256):
        assert (
            bbr_phase(BbrInfo(bw_bytes_per_s=1, min_rtt_us=1, pacing_gain=gain, cwnd_gain=512))
            == "ProbeBW"
        )
    assert bbr_phase(BbrInfo(bw_bytes_per_s=1, min_rtt_us=1, pacing_gain=256, cwnd_gain=256)) == (
        "ProbeRTT"
    )
    m = KernelStateMapper()
    startup = BbrInfo(bw_bytes_per_s=1, min_rtt_us=1, pacing_gain=739, cwnd_gain=739)
    # BBR leaves ssthresh infinite: the phase decides, the paper's loss states still come first
    assert states(m, sample(), startup) == ["Startup"]
    assert states(m, sample(ca_state=CA_RECOVERY), startup) == ["Recovery"]
    assert states(m, sample(ca_state=CA_LOSS), startup) == ["RetransmissionTimeout"]


_samples = st.lists(
    st.builds(
        sample,
        ca_state=st.sampled_from([CA_OPEN, CA_DISORDER, CA_CWR, CA_RECOVERY, CA_LOSS]),
        snd_cwnd=st.integers(1, 100),
        snd_ssthresh=st.sampled_from([2, 10, 50, 0x7FFFFFFF]),
        flags=st.integers(0, 1),
        total_retrans=st.integers(0, 3),
        retransmits=st.integers(0, 2),
        bytes_acked=st.integers(0, 3),
        rwnd_limited_us=st.integers(0, 2),
        unacked=st.integers(0, 50),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=40, deadline=None)
@given(_samples)
def test_what_is_written_is_what_quicsm_reads(
    tmp_path_factory: object, infos: list[TcpInfo]
) -> None:
    """Every sample sequence written as qlog reads back as the states the mapper decided,
    Init first, consecutive repeats merged, every state one of the canonical ones."""
    path = Path(tmp_path_factory.mktemp("q")) / "server.sqlog"  # type: ignore[attr-defined]
    mapper = KernelStateMapper()
    expected = ["Init"]
    with QlogWriter(path, vantage="server", cc="cubic", title="t") as writer:
        for i, info in enumerate(infos):
            decisions = mapper.decide(info)
            writer.sample(1000.0 + i, info, decisions)
            for d in decisions:
                if d.state != expected[-1]:
                    expected.append(d.state)
        writer.summary({"bytes": 0})
    got = read_transitions([str(path)], states="explicit")
    assert got["state"].cast(pl.Utf8).to_list() == expected
    assert set(expected) <= set(CANONICAL_STATES)
    assert "CongestionAvoidanceMaxed" not in expected
