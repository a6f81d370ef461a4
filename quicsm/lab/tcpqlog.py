"""qlog (JSON-SEQ, qlog 0.3) for kernel TCP connections sampled through ``TCP_INFO``.

One file per connection: a header record (vantage point ``linux-tcp`` as ``server`` or
``client``, the labels ``stack = linux-tcp``, ``cc_algorithm``, ``vantage`` in
``trace.quicsm_labels``), then, in time order,

* ``recovery:congestion_state_updated`` with ``old``/``new`` (the paper's state names, as the
  quicsm instrumentation writes them), ``trigger`` and ``linux_ca_state`` (the kernel's own
  state behind it, e.g. ``disorder+cwnd<ssthresh``), whenever the state changes;
* ``recovery:metrics_updated`` with the fields that changed since the last one:
  ``congestion_window``, ``ssthresh`` and ``bytes_in_flight`` in bytes (segments ×
  ``tcpi_snd_mss``; an infinite ``snd_ssthresh`` is left out), ``smoothed_rtt``,
  ``rtt_variance`` and ``min_rtt`` in ms, ``pacing_rate`` in bits/s, and the extra fields
  ``delivery_rate`` (bits/s), ``app_limited``, ``retransmits``, ``lost_packets``,
  ``total_retransmits`` and ``bytes_acked``;
* ``quicsm:tcp_summary`` at the end: what was served and the namespace's kernel counters.

Kernel TCP traces have no packet events (``TCP_INFO`` sees no packets): ``quicsm plot``'s
packet panels stay empty and derived states have nothing to derive from.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import orjson

from quicsm.lab.tcpinfo import TcpInfo
from quicsm.lab.tcpstates import Decision

RS = b"\x1e"
#: ``TCP_INFINITE_SSTHRESH`` (include/net/tcp.h)
INFINITE_SSTHRESH = 0x7FFFFFFF


def metrics_of(info: TcpInfo) -> dict[str, Any]:
    """The qlog metrics of one sample (see the module docstring for units)."""
    out: dict[str, Any] = {
        "congestion_window": info.cwnd_bytes,
        "bytes_in_flight": info.bytes_in_flight,
        "smoothed_rtt": info.rtt_us / 1e3,
        "rtt_variance": info.rttvar_us / 1e3,
        "min_rtt": info.min_rtt_us / 1e3,
        "pacing_rate": info.pacing_rate * 8,
        "delivery_rate": info.delivery_rate * 8,
        "app_limited": info.app_limited,
        "retransmits": info.retransmits,
        "lost_packets": info.lost,
        "total_retransmits": info.total_retrans,
    }
    if info.snd_ssthresh < INFINITE_SSTHRESH:
        out["ssthresh"] = info.snd_ssthresh * info.snd_mss
    return out


#: fields whose change alone does not make a new metrics record (they change on every ack)
_QUIET = frozenset({"delivery_rate", "pacing_rate", "rtt_variance"})


class QlogWriter:
    """Write one connection's qlog as samples come (a context manager closing the file)."""

    def __init__(self, path: Path, *, vantage: str, cc: str, title: str) -> None:
        self.path = path
        self._file: IO[bytes] = path.open("wb")
        self._state: str | None = None
        self._metrics: dict[str, Any] = {}
        self._last_time_ms = 0.0
        self.samples = 0
        self.records = 0
        self._write(
            {
                "qlog_format": "JSON-SEQ",
                "qlog_version": "0.3",
                "title": title,
                "trace": {
                    "vantage_point": {"name": "linux-tcp", "type": vantage},
                    "quicsm_labels": {"stack": "linux-tcp", "cc_algorithm": cc, "vantage": vantage},
                },
            }
        )

    def _write(self, record: dict[str, Any]) -> None:
        self._file.write(RS + orjson.dumps(record) + b"\n")
        self.records += 1

    def _event(self, time_ms: float, name: str, data: dict[str, Any]) -> None:
        self._last_time_ms = time_ms
        self._write({"time": round(time_ms, 3), "name": name, "data": data})

    def sample(self, time_ms: float, info: TcpInfo, decisions: list[Decision]) -> None:
        """Record one sample: a state change and/or the metrics that changed."""
        self.samples += 1
        if self._state is None:
            self._event(
                time_ms, "recovery:congestion_state_updated", {"new": "Init", "trigger": "init"}
            )
            self._state = "Init"
        metrics = metrics_of(info)
        changed = {k: v for k, v in metrics.items() if self._metrics.get(k) != v}
        if any(k not in _QUIET for k in changed):
            self._event(time_ms, "recovery:metrics_updated", changed)
            self._metrics.update(changed)
        for decision in decisions:
            if decision.state == self._state:
                continue
            self._event(
                time_ms,
                "recovery:congestion_state_updated",
                {
                    "old": self._state,
                    "new": decision.state,
                    "trigger": decision.trigger,
                    "linux_ca_state": decision.raw_state,
                },
            )
            self._state = decision.state

    def summary(self, data: dict[str, Any]) -> None:
        self._event(
            self._last_time_ms or time.time() * 1e3,
            "quicsm:tcp_summary",
            {"samples": self.samples, **data},
        )

    def __enter__(self) -> QlogWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._file.close()
