"""A qlog file with its recovery events removed: what a log of packets alone looks like.

Validating the states derived from packets (:mod:`quicsm.extract.wire`) needs logs whose
producer also logged its own states: a stock stack's log, with every recovery event taken out
(``recovery:*``, and the recovery events that qlog's later drafts name under ``quic:``), reads
as a log of packets and ACK frames only, while the original keeps the states to compare with
(``benchmarks/wire_stock.py``, ``tests/test_wire_quicgo.py``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import zstandard

#: recovery events under qlog's ``quic:`` namespace (draft-10 and later)
QUIC_RECOVERY_EVENTS: Final[tuple[str, ...]] = (
    "recovery_parameters_set",
    "recovery_metrics_updated",
    "metrics_updated",
    "congestion_state_updated",
    "loss_timer_updated",
    "packet_lost",
    "marked_for_retransmit",
    "ecn_state_updated",
)
_RECOVERY_NAME: Final = re.compile(
    rb'"name"\s*:\s*"(recovery:[a-z_]*|quic:(' + "|".join(QUIC_RECOVERY_EVENTS).encode() + rb'))"'
)
_ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"


def strip_recovery(raw: bytes) -> tuple[bytes, int]:
    """A JSON-SEQ or NDJSON qlog file's bytes without its recovery events, and how many
    records were removed (a record is removed when its ``name`` is a recovery event's)."""
    sep = b"\x1e" if b"\x1e" in raw[:4096] else b"\n"
    kept: list[bytes] = []
    removed = 0
    for record in raw.split(sep):
        if _RECOVERY_NAME.search(record):
            removed += 1
            continue
        kept.append(record)
    return sep.join(kept), removed


def strip_recovery_file(source: Path, target: Path) -> int:
    """Write ``source`` (JSON-SEQ or NDJSON, zstd-compressed or not) to ``target``
    uncompressed and without its recovery events; how many records were removed."""
    raw = source.read_bytes()
    if raw[:4] == _ZSTD_MAGIC:
        with zstandard.ZstdDecompressor().stream_reader(raw) as reader:
            raw = reader.read()
    stripped, removed = strip_recovery(raw)
    target.write_bytes(stripped)
    return removed
