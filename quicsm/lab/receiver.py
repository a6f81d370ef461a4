"""The client's own packet loss: datagrams the relay delivered that the client never processed.

On a CPU-capped client (the ``slow`` device profile) the receiving process can fall so far
behind that its UDP socket's receive buffer overflows and the kernel drops datagrams. The
sender sees those as ordinary losses, so a finding about the sender under a slow device (more
``Recovery``, say) could be caused by the receiver's buffer and not by the network. This module
measures it per run:

    dropped = relay.down.delivered - (packets the client's qlog logs as received)

``relay.down.delivered`` (``run.json``) counts the datagrams the relay handed to the client's
socket; every stack's client logs one ``packet_received`` (``transport:``, ``quic:`` or draft
category) per QUIC packet it processed. A datagram carrying several coalesced QUIC packets
(during the handshake) counts more than once on the client's side, so ``dropped`` can be a few
packets too low, never too high, and is reported as at least 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from quicsm.core.errors import InputError
from quicsm.lab.pack import read_qlog_traces

_RECEIVED = b"packet_received"


@dataclass(frozen=True, kw_only=True)
class ReceiveDrops:
    """One run's datagrams delivered to the client, packets it processed, and the difference."""

    run_dir: Path
    labels: dict[str, Any]
    delivered: int
    received: int

    @property
    def dropped(self) -> int:
        return max(self.delivered - self.received, 0)

    @property
    def share(self) -> float:
        """Dropped datagrams as a share of those delivered (0 when nothing was delivered)."""
        return self.dropped / self.delivered if self.delivered else 0.0


def _count_received(path: Path) -> int:
    count = 0
    for _, events in read_qlog_traces(path):
        for raw in events:
            if _RECEIVED not in raw:
                continue
            event = orjson.loads(raw)
            name = event.get("name") if isinstance(event, dict) else None
            if isinstance(name, str) and name.endswith("packet_received"):
                count += 1
    return count


def receive_drops(run_dir: str | Path) -> ReceiveDrops | None:
    """The client's receive drops of one run directory; ``None`` when the run kept no client
    qlog file (e.g. only sender traces were kept) or failed."""
    run_dir = Path(run_dir)
    meta = run_dir / "run.json"
    try:
        labels = json.loads(meta.read_text())
    except FileNotFoundError:
        raise InputError(f"{meta}: not a lab run directory (no run.json)") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{meta}: expected a JSON object: {exc}") from None
    if not isinstance(labels, dict):
        raise InputError(f"{meta}: expected a JSON object")
    if labels.get("status") != "ok":
        return None
    delivered = labels.get("relay.down.delivered")
    if not isinstance(delivered, int):
        raise InputError(f"{meta}: expected an integer 'relay.down.delivered', got {delivered!r}")
    names = [n for n in str(labels.get("files.client") or "").split(",") if n]
    files = [run_dir / n for n in names if (run_dir / n).is_file()]
    if not files:
        return None
    return ReceiveDrops(
        run_dir=run_dir,
        labels=labels,
        delivered=delivered,
        received=sum(_count_received(f) for f in files),
    )
