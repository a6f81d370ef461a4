"""The native scan resumes after each record it hands back (``native/src/scan.rs``): whatever
the mix of records it decodes, hands back, skips or leaves to the state pass, the rows and
errors are the Python reader's."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from fuzz_oracle import Oracle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quicsm.core import native
from quicsm.testing.hostile import HANDED_BACK


def test_the_native_core_is_built() -> None:
    assert native.installed(), "the native core is built with the package"


_HEADER = orjson.dumps({"qlog_format": "JSON-SEQ", "trace": {"vantage_point": {"type": "client"}}})
_RECORDS = {
    "metrics": b'{"time":%d,"name":"recovery:metrics_updated","data":{"cwnd":%d,"latest_rtt":20}}',
    "lost": b'{"time":%d,"name":"recovery:packet_lost","data":{"header":{"packet_number":%d}}}',
    "timer": b'{"time":%d,"name":"recovery:loss_timer_updated","data":{"event_type":"set","x":%d}}',
    "expired": b'{"time":%d,"name":"recovery:loss_timer_updated",'
    b'"data":{"event_type":"expired","timer_type":"pto","x":%d}}',
    "state": b'{"time":%d,"name":"recovery:congestion_state_updated",'
    b'"data":{"new":"slow_start","x":%d}}',
    "other": b'{"time":%d,"name":"transport:packet_sent","data":{"n":%d}}',
    "invalid": b'{"time":%d,"name":"recovery:metrics_updated","data":{"cwnd":%d',
    "backwards": b'{"time":0,"name":"recovery:metrics_updated","data":{"cwnd":%d%d}}',
    **{f"back{i}": r for i, r in enumerate(HANDED_BACK)},
}


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(st.sampled_from(sorted(_RECORDS)), min_size=1, max_size=60))
def test_any_mix_of_handed_back_records_reads_as_in_python(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[str]
) -> None:
    body = b"".join(
        b"\x1e" + _RECORDS[k] % (10 + i, 12000 + i * 1200) + b"\n" for i, k in enumerate(kinds)
    )
    oracle = Oracle(tmp_path_factory.mktemp("resume"))
    oracle.check(b"\x1e" + _HEADER + b"\n" + body)  # native == Python, strict and lenient


def test_a_region_of_only_handed_back_records_reads_as_in_python(tmp_path: Path) -> None:
    body = b"".join(b"\x1e" + HANDED_BACK[i % 4] % (i, 12000) + b"\n" for i in range(3000))
    Oracle(tmp_path).check(b"\x1e" + _HEADER + b"\n" + body)
