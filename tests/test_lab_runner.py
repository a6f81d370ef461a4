"""The runner: run.json for good and failing runs, cleanup of every child (also on Ctrl-C).

Stack programs that misbehave on purpose (a server that never gets ready, a client that
hangs) are small scripts written here; the real instrumented stacks are exercised by the
``lab``-marked tests when ``build/stacks.json`` exists (CI builds them in scripts/setup).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quicsm.core.aliases import canonical_state
from quicsm.core.errors import InputError
from quicsm.lab.pack import read_qlog_traces
from quicsm.lab.runner import plan_runs, run_plan, run_seed
from quicsm.lab.scenario import load_plan
from quicsm.lab.stacks import Stack, load_stacks

ROOT = Path(__file__).resolve().parent.parent
STACKS_FILE = ROOT / "build" / "stacks.json"

# A stand-in stack speaking the lab's command line over plain UDP: the server answers every
# datagram with the requested number of bytes; behaviour is switched by environment variables.
FAKE_STACK = r"""
import json, os, socket, sys, time
role, args = sys.argv[1], sys.argv[2:]
opts = dict(zip(args[::2], args[1::2]))
qdir = opts["--qlog-dir"]
os.makedirs(qdir, exist_ok=True)
open(os.path.join(os.path.dirname(qdir), f"{role}.pid"), "w").write(str(os.getpid()))
if role == "server":
    if os.environ.get("FAKE_SERVER") == "crash":
        print("cannot bind", file=sys.stderr); sys.exit(3)
    host, port = opts["--listen"].rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((host, int(port)))
    if os.environ.get("FAKE_SERVER") != "no-qlog":
        with open(os.path.join(qdir, "x_server.sqlog"), "w") as f:
            f.write('\x1e{"qlog_version":"0.3","trace":{}}\n')
    print("ready", flush=True)
    while True:
        data, addr = s.recvfrom(2000)
        s.sendto(b"y" * 1000, addr)
else:
    if os.environ.get("FAKE_CLIENT") == "hang":
        time.sleep(3600)
    host, port = opts["--connect"].rsplit(":", 1)
    want = int(opts["--objects"]) * int(opts["--object-size"])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(30)
    t0 = time.monotonic(); got = 0
    while got < want:
        s.sendto(b"get", (host, int(port)))
        got += len(s.recv(2000))
    with open(os.path.join(qdir, "x_client.sqlog"), "w") as f:
        f.write('\x1e{"qlog_version":"0.3","trace":{}}\n')
    print(json.dumps({"ok": True, "bytes": got, "completion_ms": (time.monotonic() - t0) * 1e3,
                      "error": None}))
"""


@pytest.fixture
def fake_stack(tmp_path: Path) -> Stack:
    script = tmp_path / "fake_stack.py"
    script.write_text(FAKE_STACK)
    argv = (sys.executable, str(script))
    return Stack(stack="fake", version="0", server=argv, client=argv, patch="none")


def _scenario_file(tmp_path: Path, body: str = "") -> Path:
    path = tmp_path / "s.toml"
    path.write_text(f"""
[run]
repetitions = 1
timeout_s = 120
[[scenario]]
name = "t"
network = {{ delay_ms = 5, loss = 0.0 }}
workload = {{ objects = 2, object_size = 5000 }}
{body}
""")
    return path


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def _pids(run_dir: Path) -> list[int]:
    return [int(p.read_text()) for p in sorted(run_dir.rglob("*.pid"))]


def test_good_run_writes_qlogs_and_flat_labels(tmp_path: Path, fake_stack: Stack) -> None:
    plan = load_plan(_scenario_file(tmp_path))
    (labels,) = run_plan(plan, [fake_stack], out_dir=tmp_path / "out")
    run_dir = tmp_path / "out" / "fake" / "0" / "t" / "run-1"
    assert labels["status"] == "ok", labels["reason"]
    assert json.loads((run_dir / "run.json").read_text()) == labels
    assert (run_dir / "server.sqlog").is_file() and (run_dir / "client.sqlog").is_file()
    assert labels["stack"] == "fake" and labels["patch"] == "none"
    assert labels["seed"] == run_seed(plan.seed, "t", 1)
    assert labels["bytes"] == labels["transfer_bytes"] == 10_000
    assert labels["relay.up.packets_in"] == labels["relay.down.packets_in"] == 10
    assert labels["network.up.delay_ms"] == 5
    assert all(not isinstance(v, dict | list) for v in labels.values())


def test_a_paced_profile_on_a_client_without_paced_reads_is_a_recorded_failure(
    tmp_path: Path, fake_stack: Stack
) -> None:
    plan = load_plan(_scenario_file(tmp_path, 'device = { profile = "motog" }'))
    (labels,) = run_plan(plan, [fake_stack], out_dir=tmp_path / "out")
    assert labels["status"] == "failed"
    assert "the fake lab client does not implement" in str(labels["reason"])
    assert labels["device.read_mbit"] == 21.0 and labels["host.cpus"] >= 1


def test_server_that_never_gets_ready_is_a_recorded_failure(
    tmp_path: Path, fake_stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SERVER", "crash")
    (labels,) = run_plan(
        load_plan(_scenario_file(tmp_path)), [fake_stack], out_dir=tmp_path / "out"
    )
    assert labels["status"] == "failed"
    assert "server not ready" in labels["reason"] and "cannot bind" in labels["reason"]
    assert json.loads((tmp_path / "out/fake/0/t/run-1/run.json").read_text())["status"] == "failed"


def test_missing_server_qlog_is_a_recorded_failure(
    tmp_path: Path, fake_stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SERVER", "no-qlog")
    (labels,) = run_plan(
        load_plan(_scenario_file(tmp_path)),
        [fake_stack],
        out_dir=tmp_path / "out",
        qlog_linger_s=0.3,
    )
    assert (labels["status"], labels["reason"]) == ("failed", "server wrote no qlog file")


def test_hanging_client_times_out_and_leaves_no_process(
    tmp_path: Path, fake_stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CLIENT", "hang")
    plan = load_plan(_scenario_file(tmp_path, "timeout_s = 1"))
    (labels,) = run_plan(plan, [fake_stack], out_dir=tmp_path / "out")
    assert labels["status"] == "failed"
    assert labels["reason"] == "client did not finish within 1 s"
    pids = _pids(tmp_path / "out")
    assert len(pids) == 2 and all(_gone(p) for p in pids)


def test_ctrl_c_stops_every_child_and_records_the_run(tmp_path: Path, fake_stack: Stack) -> None:
    stacks_file = tmp_path / "stacks.json"
    stacks_file.write_text(
        json.dumps(
            [
                {
                    "stack": "fake",
                    "version": "0",
                    "server": list(fake_stack.server),
                    "client": list(fake_stack.client),
                }
            ]
        )
    )
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "quicsm",
            "lab",
            "run",
            str(_scenario_file(tmp_path, "timeout_s = 60")),
            "-o",
            str(out),
            "--stacks",
            str(stacks_file),
        ],
        env={**os.environ, "FAKE_CLIENT": "hang"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while len(_pids(out)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_pids(out)) == 2
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGINT, err
    assert "interrupted" in err
    labels = json.loads((out / "fake/0/t/run-1/run.json").read_text())
    assert (labels["status"], labels["reason"]) == ("failed", "interrupted")
    assert all(_gone(p) for p in _pids(out))


def test_runs_are_ordered_by_scenario_repetition_then_stack(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(
        '[run]\nrepetitions = 2\n[[scenario]]\nname = "a"\n[[scenario]]\n'
        'name = "b"\nstacks = ["y"]\n'
    )
    stacks = [Stack(stack=n, version="1", server=("s",), client=("c",)) for n in ("x", "y")]
    order = [(r.scenario.name, r.run, r.stack.stack) for r in plan_runs(load_plan(path), stacks)]
    assert order == [
        ("a", 1, "x"),
        ("a", 1, "y"),
        ("a", 2, "x"),
        ("a", 2, "y"),
        ("b", 1, "y"),
        ("b", 2, "y"),
    ]
    # the relay seed depends on scenario and repetition, not on the stack
    seeds = {(r.scenario.name, r.run): r.seed for r in plan_runs(load_plan(path), stacks)}
    assert len(set(seeds.values())) == 4


def test_interleaved_runs_put_repetition_n_of_every_scenario_together(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(
        '[run]\nrepetitions = 2\norder = "interleaved"\n[[scenario]]\nname = "a"\n'
        '[[scenario]]\nname = "b"\nstacks = ["y"]\nrepetitions = 3\n'
    )
    stacks = [Stack(stack=n, version="1", server=("s",), client=("c",)) for n in ("x", "y")]
    plan = load_plan(path)
    specs = plan_runs(plan, stacks)
    # repetition n of every scenario before n + 1; within it, each scenario's stacks together
    assert [r.run for r in specs] == [1, 1, 1, 2, 2, 2, 3]
    for n in (1, 2):
        block = [(r.scenario.name, r.stack.stack, r.position) for r in specs if r.run == n]
        a = [x for x in block if x[0] == "a"]
        assert [x[1] for x in a] == ["x", "y"] and len({x[2] for x in a}) == 1
        assert sorted(x[2] for x in block if x[1] == "y") == [0, 1]  # a and b: both places
    assert [r.scenario.name for r in specs if r.run == 3] == ["b"]
    # the same runs as the default order, with the same seeds; the order is the seed's
    assert plan_runs(plan, stacks) == specs
    path.write_text(path.read_text().replace('order = "interleaved"\n', ""))
    default = plan_runs(load_plan(path), stacks)
    assert all(r.position is None for r in default)
    assert sorted((r.scenario.name, r.run, r.stack.stack, r.seed) for r in default) == sorted(
        (r.scenario.name, r.run, r.stack.stack, r.seed) for r in specs
    )


@given(st.integers(min_value=0, max_value=2**31 - 1))
def test_interleaved_order_is_drawn_per_repetition(seed: int) -> None:
    """Which scenario of a repetition runs first is drawn from (seed, repetition): over 40
    repetitions of two scenarios each goes first sometimes (a fixed order would never)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.toml"
        path.write_text(
            f'[run]\nrepetitions = 40\nseed = {seed}\norder = "interleaved"\n'
            '[[scenario]]\nname = "a"\n[[scenario]]\nname = "b"\n'
        )
        stacks = [Stack(stack="x", version="1", server=("s",), client=("c",))]
        specs = plan_runs(load_plan(path), stacks)
    firsts = [r.scenario.name for r in specs if r.position == 0]
    assert len(firsts) == 40 and {"a", "b"} == set(firsts)
    # within each repetition the two places are taken once each, in execution order
    assert [r.position for r in specs] == [p for _ in range(40) for p in (0, 1)]


def test_unknown_order_is_an_error_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[run]\norder = "random"\n[[scenario]]\nname = "a"\n')
    with pytest.raises(InputError, match=r"s.toml: run.order: expected one of scenario, interl"):
        load_plan(path)


def _built_stacks() -> list[Stack]:
    """Every built (stack, controller): built on first use (instrumentation-patches/build.sh);
    a build that fails is a failure, never a skip."""
    if not STACKS_FILE.exists():
        build = STACKS_FILE.parent.parent / "instrumentation-patches" / "build.sh"
        proc = subprocess.run([str(build)], capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not STACKS_FILE.exists():
            pytest.fail(f"instrumentation-patches/build.sh failed:\n{proc.stderr[-4000:]}")
    return load_stacks(STACKS_FILE)


# A state that only the controller's growth rule decides: SlowStart, or a BBR phase under BBR
# (quinn's BBR may spend a short transfer in ProbeRTT and ProbeBW without Startup).
GROWTH_STATES = {"SlowStart", "Startup", "Drain", "ProbeBW", "ProbeRTT"}


@pytest.mark.lab
def test_every_built_stack_completes_a_short_transfer_with_congestion_states(
    tmp_path: Path,
) -> None:
    """A smoke transfer through `quicsm lab` per built stack and congestion controller."""
    stacks = _built_stacks()
    assert {s.stack for s in stacks} >= {"quic-go", "aioquic", "quiche", "quinn"}
    path = tmp_path / "s.toml"
    path.write_text(
        '[run]\nrepetitions = 1\ntimeout_s = 60\n[[scenario]]\nname = "smoke"\n'
        "network = { rate_mbit = 50, delay_ms = 10, loss = 0.01 }\n"
        "workload = { objects = 1, object_size = 300_000 }\n"
    )
    results = run_plan(load_plan(path), stacks, out_dir=tmp_path / "out")
    assert len(results) == len(stacks)
    for stack, labels in zip(stacks, results, strict=True):
        assert labels["status"] == "ok", (stack.key, labels["reason"])
        assert labels.get("cc_algorithm", "") == stack.cc_algorithm
        run_dir = tmp_path / "out" / labels["stack"] / labels["version"]
        if stack.cc_algorithm:
            run_dir = run_dir / stack.cc_algorithm
        server = run_dir / "smoke" / "run-1" / labels["files.server"]
        text = server.read_text(errors="replace")
        assert "congestion_state_updated" in text, stack.key
        # quiche's BBR logs its own phase names (bbr_startup, ...): compared canonically
        logged = set(re.findall(r'"new":"([^"]+)"', text.replace(" ", "")))
        canonical = {canonical_state(s, cc_algorithm=stack.cc_algorithm) for s in logged}
        assert canonical & GROWTH_STATES, (stack.key, sorted(logged))
        assert labels["relay.down.packets_in"] > 200


def test_a_child_leaves_no_unclosed_pipe(tmp_path: Path) -> None:
    """The child's stdout pipe is closed when its output ends (``quicsm lab run`` printed
    "warning: unclosed file <_io.BufferedReader ...>" for every child before)."""
    import gc
    import warnings

    from quicsm.lab.procs import Child

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        child = Child(
            [sys.executable, "-c", "print('ready')"],
            env=dict(os.environ),
            stderr_path=tmp_path / "stderr.log",
        )
        assert child.wait_line(lambda line: line == "ready", timeout_s=30) == "ready"
        assert child.wait(timeout_s=30) == 0
        child.stop()
        del child
        gc.collect()
    leaks = [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert not leaks, [str(w.message) for w in leaks]


def _frames(path: Path, name: str) -> list[dict[str, object]]:
    """Every frame of type ``name`` in the packets of a qlog file (JSON or JSON-SEQ)."""
    found: list[dict[str, object]] = []
    for _, records in read_qlog_traces(path):
        for raw in records:
            if name.encode() not in raw:
                continue
            event = json.loads(raw)
            data = event.get("data") if isinstance(event, dict) else None
            for frame in (data or {}).get("frames") or []:
                if isinstance(frame, dict) and frame.get("frame_type") == name:
                    found.append(frame)
    return found


@pytest.mark.lab
@pytest.mark.parametrize("selector", ["quic-go@v0.65.0/newreno", "aioquic/cubic"])
def test_a_paced_reader_returns_credit_as_it_reads(tmp_path: Path, selector: str) -> None:
    """The phone's application (``read_mbit``): the transfer takes at least as long as reading
    it at that rate, and the client grants stream credit in steps of at most 1 MiB
    (MAX_STREAM_DATA frames in its qlog) as it reads; reading at once is faster."""
    stacks = [s for s in _built_stacks() if s.matches(selector)]
    assert len(stacks) == 1, selector
    size, mbit = 1_500_000, 3.0
    path = tmp_path / "s.toml"
    path.write_text(
        '[run]\nrepetitions = 1\ntimeout_s = 60\norder = "interleaved"\n'
        "[defaults]\nnetwork = { rate_mbit = 50, delay_ms = 5 }\n"
        f"workload = {{ objects = 1, object_size = {size} }}\n"
        '[[scenario]]\nname = "desktop"\n'
        f'[[scenario]]\nname = "phone"\ndevice = {{ profile = "p", read_mbit = {mbit} }}\n'
    )
    desktop, phone = run_plan(load_plan(path), stacks, out_dir=tmp_path / "out")
    for labels in (desktop, phone):
        assert labels["status"] == "ok", labels["reason"]
    assert phone["device.read_mbit"] == mbit
    floor_ms = size * 8 / (mbit * 1e6) * 1e3
    assert phone["completion_ms"] >= 0.95 * floor_ms, (phone["completion_ms"], floor_ms)
    # reading at once is faster (aioquic's own sender makes 5-15 Mbit/s on a busy machine)
    assert desktop["completion_ms"] < 0.75 * phone["completion_ms"], desktop["completion_ms"]
    base = tmp_path / "out" / str(phone["stack"]) / str(phone["version"])
    run_dir = base / str(phone["cc_algorithm"]) / "phone" / "run-1"
    client = run_dir / str(phone["files.client"]).split(",")[0]
    limits = [int(str(f["maximum"])) for f in _frames(client, "max_stream_data")]
    # credit as it reads: every step at most 1 MiB (quic-go starts its stream window at 512 KB
    # and auto-tunes it only for a reader that drains it within a few round trips; aioquic's
    # lab client grants 512 KB beyond what it has read), so several steps up to the object
    steps = [b - a for a, b in zip(limits, limits[1:], strict=False)]
    assert len(limits) >= 2 and max(limits) >= size, limits
    assert max(steps) <= 1 << 20, steps
