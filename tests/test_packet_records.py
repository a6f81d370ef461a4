"""Reading packets decodes only the records that name a packet event or the transport
parameters (``quicsm.qlog.seq``'s packet needles) and checks the others for framing: what it
hands the packet, loss and parameters hooks is what a read that decodes every record hands
them, however the bytes arrive, for every producer shipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quicsm.qlog.blocks import DecompressedFile
from quicsm.qlog.seq import PACKET_NEEDLES
from quicsm.qlog.source import read_qlog
from quicsm.qlog.trace import PACKET_EVENTS, PARAMETERS_EVENT, TraceBuilder

ROOT = Path(__file__).parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "qlog"
#: one-trace files of several producers and qlog versions, and two shipped multi-trace files
FILES = (
    FIXTURES / "quicgo_0.3.sqlog",
    FIXTURES / "quiche_quic.sqlog",
    FIXTURES / "neqo_0.4.sqlog",
    FIXTURES / "draft02.ndjson",
    FIXTURES / "draft01_delta.qlog",
    FIXTURES / "aioquic_0.3.qlog",
)


class _Hooked:
    """Records every packet and loss event handed to a trace's hooks (a ``metric_sink``)."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str, float, Any]] = []

    def __call__(self, builder: TraceBuilder) -> _Hooked:
        def packet(time: float, short: str, data: object, scale: float) -> None:
            self.seen.append((builder.index, short, time, data))

        builder.packet_hook = packet
        builder.loss_hook = packet
        builder.parameters_hook = packet
        return self

    def wanted(self) -> bool:
        return False


def _hooked(path: Path, *, full: bool, block_size: int = 1 << 20) -> list[Any]:
    sink = _Hooked()
    read_qlog(path, full=full, metric_sink=sink, block_size=block_size)
    return sorted(sink.seen, key=lambda s: (s[0], s[2], s[1], repr(s[3])))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_packet_records_are_those_a_full_read_finds(path: Path) -> None:
    assert _hooked(path, full=False) == _hooked(path, full=True)


@pytest.fixture(scope="module")
def stacks_part(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 600 kB of the shipped stacks file's content (aioquic's traces), cut at a
    record: real packets, losses and ACKs."""
    data = b"".join(DecompressedFile(ROOT / "traces" / "stacks" / "stacks.qlog").blocks())
    cut = data.rfind(b"\x1e", 0, 600_000)
    path = tmp_path_factory.mktemp("packets") / "part.sqlog"
    path.write_bytes(data[:cut])
    return path


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(block_size=st.sampled_from([97, 4096, 65_537, 1 << 20]))
def test_in_any_blocks_a_real_file_gives_every_packet_of_a_full_read(
    stacks_part: Path, block_size: int
) -> None:
    got = _hooked(stacks_part, full=False, block_size=block_size)
    assert got == _hooked(stacks_part, full=True)
    assert {s[1] for s in got} >= {"packet_sent", "packet_received"}


def test_every_packet_event_name_holds_a_needle() -> None:
    """The needles find every name the hooks take, as logged (lower case; packet events in
    qlog 0.1's upper case too)."""
    names = [*PACKET_EVENTS, "packet_lost", PARAMETERS_EVENT]
    names += [n.upper() for n in (*PACKET_EVENTS, "packet_lost")]
    for logged in names:
        assert any(n in f'"transport:{logged}"'.encode() for n in PACKET_NEEDLES), logged
