"""The IP-level path with real traffic: the kernel's TCP and a QUIC stack cross the same
impairments; every namespace the runs make is gone afterwards, also when a run fails.

Marked ``lab``: needs root (network namespaces, /dev/net/tun); the QUIC case needs the built
stacks (``build/stacks.json``).
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import polars as pl
import pytest

from quicsm.extract.read import read_transitions
from quicsm.lab.ippath import check_available, existing_namespaces
from quicsm.lab.runner import plan_runs, run_plan
from quicsm.lab.scenario import load_plan
from quicsm.lab.stacks import Stack, kernel_tcp_stacks, load_stacks

ROOT = Path(__file__).resolve().parent.parent
STACKS_FILE = ROOT / "build" / "stacks.json"

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(check_available() is not None, reason=str(check_available())),
]


def _plan(tmp_path: Path, body: str, *, stacks: str = "[]") -> Path:
    path = tmp_path / "s.toml"
    path.write_text(
        f'[run]\nrepetitions = 1\nseed = 3\ntimeout_s = 60\npath = "ip"\nstacks = {stacks}\n' + body
    )
    return path


def _ours() -> set[str]:
    return {ns for ns in existing_namespaces() if ns.startswith("qsm-")}


def _summary(server_qlog: Path) -> dict[str, object]:
    for line in server_qlog.read_bytes().split(b"\x1e"):
        if b"quicsm:tcp_summary" in line:
            data = orjson.loads(line)["data"]
            assert isinstance(data, dict)
            return data
    raise AssertionError(f"{server_qlog}: no summary record")


def _states(path: Path) -> list[str]:
    return read_transitions([str(path)])["state"].cast(pl.Utf8).to_list()


def _stack(cc: str) -> Stack:
    (stack,) = [s for s in kernel_tcp_stacks() if s.cc_algorithm == cc]
    return stack


def test_kernel_tcp_under_loss_and_outage_sees_what_the_kernel_counts(tmp_path: Path) -> None:
    before = _ours()
    plan = load_plan(
        _plan(
            tmp_path,
            """
[defaults]
network = { rate_mbit = 50, delay_ms = 10, queue_packets = 200 }
workload = { objects = 1, object_size = 1_500_000 }

[[scenario]]
name = "loss"
network.loss = 0.02

[[scenario]]
name = "outage"
network.outages = [[0.1, 0.5]]
""",
            stacks='["linux-tcp"]',
        )
    )
    results = run_plan(plan, [_stack("cubic")], out_dir=tmp_path / "out")
    assert [r["status"] for r in results] == ["ok", "ok"], [r["reason"] for r in results]
    assert _ours() == before  # every namespace deleted
    runs = {
        r["scenario"]: tmp_path
        / "out"
        / "linux-tcp"
        / r["version"]
        / "cubic"
        / r["scenario"]
        / "run-1"
        for r in results
    }
    loss = runs["loss"]
    labels = json.loads((loss / "run.json").read_text())
    assert labels["path"] == "ip" and labels["relay.down.dropped_loss"] > 0
    kernel = _summary(loss / "server.sqlog")["kernel_counters"]
    assert isinstance(kernel, dict)
    states = _states(loss / "server.sqlog")
    assert states[0] == "Init" and {"SlowStart", "CongestionAvoidance"} <= set(states)
    # every fast recovery the kernel entered is one Recovery in the trace, but for an episode
    # shorter than the sampling interval (docs/lab.md: 114 of 123 over the 90 corpus runs)
    entered = kernel["TCPSackRecovery"] + kernel["TCPRenoRecovery"]
    assert entered > 0 and entered - 1 <= states.count("Recovery") <= entered
    outage = _states(runs["outage"] / "server.sqlog")
    kernel = _summary(runs["outage"] / "server.sqlog")["kernel_counters"]
    assert isinstance(kernel, dict) and kernel["TCPTimeouts"] >= 1
    assert "RetransmissionTimeout" in outage
    assert abs(outage.count("TailLossProbe") - kernel["TCPLossProbes"]) <= 1


def test_a_failing_run_leaves_no_namespace(tmp_path: Path) -> None:
    before = _ours()
    broken = Stack(stack="broken", version="1", server=("false",), client=("false",))
    plan = load_plan(_plan(tmp_path, '[[scenario]]\nname = "x"\nstacks = ["broken"]\n'))
    (result,) = run_plan(plan, [broken], out_dir=tmp_path / "out")
    assert result["status"] == "failed" and "server not ready" in result["reason"]
    assert result["path"] == "ip"
    assert _ours() == before


@pytest.mark.skipif(not STACKS_FILE.exists(), reason="needs the built stacks")
def test_a_quic_stack_crosses_the_same_path(tmp_path: Path) -> None:
    before = _ours()
    quic = [s for s in load_stacks(STACKS_FILE) if s.key == "quic-go@v0.65.0/cubic"]
    assert quic, "quic-go v0.65.0 with cubic is built by instrumentation-patches/build.sh"
    plan = load_plan(
        _plan(
            tmp_path,
            """
[[scenario]]
name = "loss"
network = { rate_mbit = 50, delay_ms = 10, queue_packets = 200, loss = 0.02 }
workload = { objects = 1, object_size = 1_000_000 }
""",
        )
    )
    (spec,) = plan_runs(plan, quic)
    (result,) = run_plan(plan, quic, out_dir=tmp_path / "out")
    assert result["status"] == "ok", result["reason"]
    assert result["path"] == "ip" and result["relay.down.dropped_loss"] > 0
    run_dir = spec.directory(tmp_path / "out")
    server = next(run_dir.glob("server.*qlog"))
    assert "Recovery" in _states(server)
    assert _ours() == before
