"""``ReadLimits.max_record_bytes`` is exact: a record of that many bytes reads, one byte more is
our error, wherever the record lies against the block boundaries."""

from __future__ import annotations

from pathlib import Path

import pytest

from quicsm.core.errors import QlogError
from quicsm.qlog.blocks import ReadLimits
from quicsm.qlog.source import read_qlog

LIMIT = 4096
_HEADER = b'{"qlog_format":"JSON-SEQ","qlog_version":"0.3","trace":{"vantage_point":{}}}'


def _event(size: int) -> bytes:
    """An event record of exactly ``size`` bytes (without its separators)."""
    head = b'{"time":2,"name":"transport:packet_sent","data":{"p":"'
    tail = b'"}}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def _seq(path: Path, size: int, sep: bytes) -> Path:
    lead = b"\x1e" if sep == b"\x1e" else b""
    first = b'{"time":1,"name":"transport:packet_sent","data":{}}'
    path.write_bytes(
        lead
        + _HEADER
        + b"\n"
        + lead
        + first
        + b"\n"
        + lead
        + _event(size)
        + b"\n"
        + lead
        + first.replace(b'"time":1', b'"time":3')
        + b"\n"
    )
    return path


@pytest.mark.parametrize("sep", [b"\x1e", b"\n"], ids=["json-seq", "ndjson"])
@pytest.mark.parametrize("block_size", [512, 3000, 1 << 20])
def test_a_record_at_the_limit_reads_and_one_byte_more_does_not(
    tmp_path: Path, sep: bytes, block_size: int
) -> None:
    limits = ReadLimits(max_record_bytes=LIMIT)
    # the record's bytes between its separators: RS-framed records end with their LF
    extra = 1 if sep == b"\x1e" else 0
    ok = _seq(tmp_path / "ok.sqlog", LIMIT - extra, sep)
    assert read_qlog(ok, block_size=block_size, limits=limits, count=True).traces[0].n_events == 3
    over = _seq(tmp_path / "over.sqlog", LIMIT - extra + 1, sep)
    with pytest.raises(QlogError, match=r"over\.sqlog: expected records of at most"):
        read_qlog(over, block_size=block_size, limits=limits, count=True)


@pytest.mark.parametrize("block_size", [512, 3000, 1 << 20])
def test_a_contained_json_event_at_the_limit_reads_and_one_byte_more_does_not(
    tmp_path: Path, block_size: int
) -> None:
    limits = ReadLimits(max_record_bytes=LIMIT)

    def doc(size: int) -> bytes:
        return (
            b'{"qlog_version":"0.3","traces":[{"vantage_point":{},"events":['
            b'{"time":1,"name":"transport:packet_sent","data":{}},' + _event(size) + b"]}]}"
        )

    ok = tmp_path / "ok.qlog"
    ok.write_bytes(doc(LIMIT))
    assert read_qlog(ok, block_size=block_size, limits=limits, count=True).traces[0].n_events == 2
    over = tmp_path / "over.qlog"
    over.write_bytes(doc(LIMIT + 1))
    with pytest.raises(QlogError, match=r"over\.qlog: expected records of at most"):
        read_qlog(over, block_size=block_size, limits=limits, count=True)
