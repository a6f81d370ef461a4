"""The client's own receive drops: relay deliveries minus packets its qlog processed."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quicsm.core.errors import InputError
from quicsm.lab.receiver import receive_drops

REAL = Path(__file__).resolve().parent / "fixtures" / "real"
CLIENTS = sorted(REAL.glob("*/client.*"))


def _received_by_hand(path: Path) -> int:
    """packet_received events counted with the standard library, independently of the module."""
    text = gzip.decompress(path.read_bytes()).decode()
    if path.name.startswith("client.qlog"):  # one JSON document (aioquic)
        doc = json.loads(text)
        names = [e["name"] for t in doc["traces"] for e in t["events"]]
    else:  # JSON-SEQ
        records = [json.loads(r) for r in text.split("\x1e") if r.strip()]
        names = [r["name"] for r in records if "name" in r]
    return sum(1 for n in names if n.endswith("packet_received"))


def _run(tmp: Path, client: Path, **labels: object) -> Path:
    run = tmp / client.parent.name
    run.mkdir(parents=True, exist_ok=True)
    shutil.copy(client, run / client.name)
    run.joinpath("run.json").write_text(
        json.dumps({"status": "ok", "files.client": client.name, **labels})
    )
    return run


def test_fixtures_exist() -> None:
    assert len(CLIENTS) == 3


@pytest.mark.parametrize("client", CLIENTS, ids=lambda p: p.parent.name)
@settings(
    max_examples=5,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(extra=st.integers(min_value=0, max_value=5000))
def test_dropped_is_delivered_minus_received(client: Path, tmp_path: Path, extra: int) -> None:
    received = _received_by_hand(client)
    assert received > 100
    drops = receive_drops(_run(tmp_path, client, **{"relay.down.delivered": received + extra}))
    assert drops is not None
    assert (drops.received, drops.dropped) == (received, extra)
    assert drops.share == pytest.approx(extra / (received + extra))


def test_never_negative(tmp_path: Path) -> None:
    drops = receive_drops(_run(tmp_path, CLIENTS[0], **{"relay.down.delivered": 1}))
    assert drops is not None and drops.dropped == 0


def test_failed_run_or_missing_client_trace_is_none(tmp_path: Path) -> None:
    run = _run(tmp_path, CLIENTS[0], **{"relay.down.delivered": 10})
    (run / CLIENTS[0].name).unlink()
    assert receive_drops(run) is None
    run.joinpath("run.json").write_text(json.dumps({"status": "failed"}))
    assert receive_drops(run) is None


def test_bad_run_dirs_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no run.json"):
        receive_drops(tmp_path)
    run = _run(tmp_path, CLIENTS[0])
    with pytest.raises(InputError, match="relay.down.delivered"):
        receive_drops(run)
    run.joinpath("run.json").write_text("[1]")
    with pytest.raises(InputError, match="expected a JSON object"):
        receive_drops(run)
