"""Packet numbers outside 0..2^62-1 (RFC 9000 section 12.3), and ACK ranges that name them, in
packets-only traces (the hostile campaign's family, :func:`quicsm.testing.hostile.
out_of_range_packets`: a packet -2 acknowledged by ``[[-2,-2]]`` once ended in a ``KeyError``
from the deriver). A strict read rejects the record, naming the file, the record and what was
expected; a lenient read skips the record and counts it; the native core and the Python readers
alike (the native core never decodes packet records: both hand them to the same decoding)."""

from __future__ import annotations

import warnings
from pathlib import Path

import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from quicsm.core import native
from quicsm.core.diagnostics import Diagnostics, QuicsmWarning, RecordProblem
from quicsm.core.errors import QlogError
from quicsm.core.states import PAPER_STATES
from quicsm.extract.packets import read_packet_timelines
from quicsm.extract.read import read_transitions
from quicsm.extract.wire import (
    MAX_PACKET_NUMBER,
    PACKET_NUMBER_EXPECTED,
    Packet,
    packet_of,
    wire_states,
)
from quicsm.testing import hostile

N = 5  # valid data packets before the bad one: records 2 .. 2N+1


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-(2**70), max_value=2**70))
def test_a_packet_number_is_kept_in_range_and_rejected_outside(number: int) -> None:
    data = {"header": {"packet_type": "1RTT", "packet_number": number}, "frames": []}
    if 0 <= number <= MAX_PACKET_NUMBER:
        packet = packet_of(1.0, "packet_sent", data, 1.0)
        assert packet is not None and packet.number == number
        return
    with pytest.raises(RecordProblem) as caught:
        packet_of(1.0, "packet_sent", data, 1.0)
    assert caught.value.expected == f"{PACKET_NUMBER_EXPECTED} in packet_number"
    assert caught.value.got == repr(number)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=-(2**64), max_value=2**64), min_size=1, max_size=4))
def test_an_ack_range_naming_a_number_out_of_range_is_rejected(bounds: list[int]) -> None:
    frame = {"frame_type": "ack", "acked_ranges": [bounds]}
    data = {"header": {"packet_type": "1RTT", "packet_number": 7}, "frames": [frame]}
    ends = (bounds[0], bounds[-1])
    if all(0 <= b <= MAX_PACKET_NUMBER for b in ends):
        packet = packet_of(1.0, "packet_received", data, 1.0)
        assert packet is not None and packet.acks == ((min(ends), max(ends)),)
        return
    with pytest.raises(RecordProblem) as caught:
        packet_of(1.0, "packet_received", data, 1.0)
    assert caught.value.expected == f"{PACKET_NUMBER_EXPECTED} in an ACK range"


_NUMBERS = st.integers(min_value=-5, max_value=40)


@settings(max_examples=200, deadline=None)
@example(  # a handshake packet below -1, unacknowledged, then an ACK in another space
    [
        (True, "handshake", -2, []),
        (True, "initial", 0, []),
        (False, "initial", 0, [(0, 0)]),
        (True, "initial", 0, []),
    ]
)
@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.sampled_from(["initial", "handshake", "application"]),
            _NUMBERS,
            st.lists(st.tuples(_NUMBERS, _NUMBERS), max_size=3),
        ),
        max_size=30,
    )
)
def test_the_wire_deriver_takes_any_packets(
    rows: list[tuple[bool, str, int, list[tuple[int, int]]]],
) -> None:
    """Packets built directly (not decoded, so not range-checked), negative numbers and ACKs
    of packets never sent included: states, never an exception (the ``KeyError`` came from
    an ACK whose largest number was below -1)."""
    packets = [
        Packet(float(i), sent, space, number, 1200, tuple((min(a), max(a)) for a in acks))
        for i, (sent, space, number, acks) in enumerate(rows)
    ]
    result = wire_states(packets)
    assert {state for _, state, _ in result.rows} <= set(PAPER_STATES)


def _read(path: Path, lenient: bool) -> tuple[pl.DataFrame | str, Diagnostics]:
    diag = Diagnostics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        try:
            frame = read_transitions(
                path, states="derived", on_error="skip" if lenient else "raise", diagnostics=diag
            )
        except QlogError as error:
            return str(error), diag
    return frame, diag


@pytest.mark.parametrize("where", ["packet", "ack", "range"])
@pytest.mark.parametrize("number", hostile.OUT_OF_RANGE_NUMBERS, ids=repr)
def test_a_packets_only_trace_rejects_the_record_or_skips_and_counts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, number: float, where: str
) -> None:
    path = hostile.out_of_range_packets(tmp_path / "p.sqlog", N, number=number, where=where)
    record = 2 * N + 2 + (where == "range")
    what = "an ACK range" if where == "range" else "packet_number"
    got = f"{number:.6g}" if isinstance(number, float) else None
    outcomes = {}
    for flag in ("1", "0") if native.installed() else ("0",):
        monkeypatch.setenv(native.NATIVE_ENV, flag)
        error, _ = _read(path, lenient=False)
        assert isinstance(error, str)
        prefix = f"{path}: record {record} (line {record}): expected {PACKET_NUMBER_EXPECTED} in "
        assert error.startswith(prefix + what + ", got "), error
        if got is not None:
            assert error.endswith(f", got {got}")
        frame, diag = _read(path, lenient=True)
        assert isinstance(frame, pl.DataFrame)
        assert diag.skipped_records == (2 if where == "ack" else 1)
        assert any(r.startswith(f"{path}: record {record} (line {record})") for r in diag.reasons)
        # the valid packets before it still give their states
        assert frame["source"].cast(pl.String).to_list()[1:] and set(
            frame["state"].cast(pl.String).to_list()
        ) > {"Init"}
        outcomes[flag] = (error, frame)
    if len(outcomes) == 2:
        assert outcomes["1"][0] == outcomes["0"][0]
        assert_frame_equal(outcomes["1"][1], outcomes["0"][1])


def test_the_largest_packet_number_is_read(tmp_path: Path) -> None:
    path = hostile.out_of_range_packets(
        tmp_path / "p.sqlog", N, number=MAX_PACKET_NUMBER, where="ack"
    )
    frame, diag = _read(path, lenient=False)
    assert isinstance(frame, pl.DataFrame) and not diag.skipped_records


def test_the_campaign_reproducer_shape_gives_our_error(tmp_path: Path) -> None:
    """One packet -2 and an ACK ``[[-2,-2]]``, nothing else: default and derived states,
    strict and lenient."""
    path = hostile.out_of_range_packets(tmp_path / "p.sqlog", 0, number=-2, where="ack")
    for states in ("derived", "hybrid"):
        with pytest.raises(QlogError, match=r"record 2 \(line 2\): expected a packet number"):
            read_transitions(path, states=states)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", QuicsmWarning)
            frame = read_transitions(path, states=states, on_error="skip")
        assert frame["state"].cast(pl.String).to_list() == ["Init"]


@pytest.mark.parametrize("where", ["packet", "ack", "range"])
def test_the_packets_panel_rejects_or_skips_the_record(tmp_path: Path, where: str) -> None:
    path = hostile.out_of_range_packets(tmp_path / "p.sqlog", N, number=1 << 64, where=where)
    trace = f"{path}#0000"
    with pytest.raises(QlogError, match="expected a packet number from 0 to 2\\^62-1"):
        read_packet_timelines(path, [trace])
    diag = Diagnostics()
    timelines = read_packet_timelines(path, [trace], on_error="skip", diagnostics=diag)
    assert len(timelines[trace].sent[0]) == N + (where == "range")
    assert diag.skipped_records == (2 if where == "ack" else 1) == len(diag.reasons)
    assert all(r.endswith(f"(trace {trace})") for r in diag.reasons)
