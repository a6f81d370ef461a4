"""Run a scenario plan: relay + server + client per run, qlogs and ``run.json`` per run.

For every scenario, repetition and stack (stacks interleaved within a round, back to back as in
the paper's methodology) the runner

1. starts the stack's server on 127.0.0.1 and waits for ``ready``;
2. starts the relay (``python -m quicsm.lab.relay``) in front of it with the scenario's
   impairments and a seed derived from (plan seed, scenario, repetition) — the same for every
   stack, so stacks meet the same random losses and jitter;
3. runs the client against the relay under the device profile's CPU limit;
4. stops everything (process groups; also on Ctrl-C) and writes
   ``<out>/<stack>/<version>/[<cc_algorithm>/]<scenario>/run-<n>/{server,client}.(s)qlog``
   and ``run.json``.

``run.json`` is one flat JSON object of scalar labels (``stack``, ``version``, ``scenario``,
``device``, ``network.down.loss``, ``relay.down.dropped_loss``, ``status``, ``reason``...):
readers use every field as a label. A failed run is written with ``status = "failed"`` and
its ``reason``; it is never dropped.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from quicsm.core.errors import LabError
from quicsm.lab.device import PACED_READERS, CpuLimiter
from quicsm.lab.ippath import (
    SERVER_ADDRESS,
    PathNames,
    create_namespaces,
    delete_namespaces,
    netns_exec,
    path_names,
)
from quicsm.lab.link import link_config_to_dict
from quicsm.lab.procs import Child, stop_all
from quicsm.lab.scenario import Plan, Scenario
from quicsm.lab.stacks import KERNEL_TCP, Stack, refuse_stale, select_stacks

Labels = dict[str, Any]

LOOPBACK = "127.0.0.1"
SERVER_READY_TIMEOUT_S = 20.0
#: after the client is done, how long to wait for the server's qlog file to appear (some
#: stacks write it only when the connection has finished closing/draining)
SERVER_QLOG_LINGER_S = 10.0
RELAY_READY_TIMEOUT_S = 10.0
#: the server's port on the IP-level path (each run has namespaces of its own)
IP_PATH_PORT = 4433
QLOG_SUFFIXES = (".sqlog", ".qlog")


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """One run to do."""

    stack: Stack
    scenario: Scenario
    run: int
    seed: int
    #: interleaved plans: the place of this run's scenario within its repetition (0-based)
    position: int | None = None

    def directory(self, out_dir: Path) -> Path:
        base = out_dir / self.stack.stack / self.stack.version
        if self.stack.cc_algorithm:
            base = base / self.stack.cc_algorithm
        return base / self.scenario.name / f"run-{self.run}"


def run_seed(plan_seed: int, scenario: str, run: int) -> int:
    """Seed of one run's relay: stable, independent of the stack."""
    return zlib.crc32(f"{plan_seed}:{scenario}:{run}".encode()) & 0x7FFFFFFF


def plan_runs(plan: Plan, stacks: list[Stack], *, only: tuple[str, ...] = ()) -> list[RunSpec]:
    """Every run of the plan, in execution order: (scenario, repetition, stack), or with
    ``order = "interleaved"`` (repetition, scenario, stack), so that repetition n of every
    scenario runs back to back, the scenarios in an order drawn from (plan seed, n) (each
    run's ``position`` in it: which of a pair ran first is a coin flip, not a rule); ``only``
    further restricts the stacks ("quic-go" or "quic-go@v0.48.2")."""
    per_scenario: list[list[list[RunSpec]]] = []
    for scenario in plan.scenarios:
        chosen = select_stacks(stacks, scenario.stacks, where=f"{scenario.source}: {scenario.name}")
        if only:
            # a scenario for every stack runs the kernel's TCP too when --stack names it
            base = chosen if scenario.stacks else stacks
            chosen = [s for s in base if any(s.matches(o) for o in only)]
        refuse_stale(chosen)
        reps: list[list[RunSpec]] = []
        for n in range(1, scenario.repetitions + 1):
            seed = run_seed(plan.seed, scenario.name, n)
            reps.append([RunSpec(stack=s, scenario=scenario, run=n, seed=seed) for s in chosen])
        per_scenario.append(reps)
    if plan.order != "interleaved":
        return [spec for reps in per_scenario for rep in reps for spec in rep]
    most = max((len(reps) for reps in per_scenario), default=0)
    out: list[RunSpec] = []
    for n in range(most):
        order = list(range(len(per_scenario)))
        random.Random(zlib.crc32(f"{plan.seed}:order:{n + 1}".encode())).shuffle(order)
        for position, i in enumerate(order):
            if n < len(per_scenario[i]):
                out.extend(replace(spec, position=position) for spec in per_scenario[i][n])
    return out


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def _collect_qlogs(qlog_dir: Path, run_dir: Path, role: str) -> list[str]:
    """Move the qlog files of one endpoint to ``<role>.<ext>`` (``<role>-2.<ext>``, ...)."""
    if not qlog_dir.is_dir():
        return []
    found = sorted(p for p in qlog_dir.rglob("*") if p.is_file() and p.suffix in QLOG_SUFFIXES)
    names = []
    for i, src in enumerate(found):
        name = f"{role}{src.suffix}" if i == 0 else f"{role}-{i + 1}{src.suffix}"
        shutil.move(str(src), run_dir / name)
        names.append(name)
    shutil.rmtree(qlog_dir, ignore_errors=True)
    return names


def _wait_for_qlog(qlog_dir: Path, *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if qlog_dir.is_dir() and any(
            p.suffix in QLOG_SUFFIXES and p.stat().st_size > 0 for p in qlog_dir.rglob("*")
        ):
            return
        time.sleep(0.02)


def _last_json_line(lines: list[str]) -> dict[str, Any] | None:
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


def _flat(d: dict[str, Any], prefix: str) -> Labels:
    out: Labels = {}
    for key, value in d.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}.{key}"))
        else:
            out[f"{prefix}.{key}"] = value
    return out


def execute(
    spec: RunSpec,
    *,
    out_dir: Path,
    qlog_linger_s: float = SERVER_QLOG_LINGER_S,
    extra: Labels | None = None,
) -> Labels:
    """Do one run and write its directory; returns the run.json labels (never raises for a
    failing stack: the failure is the run's ``status``/``reason``). ``extra`` labels are
    added to run.json (``quicsm lab ab`` records each run's arm, pair and place in it)."""
    scenario, stack = spec.scenario, spec.stack
    run_dir = spec.directory(out_dir)
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    labels: Labels = {
        "stack": stack.stack,
        "version": stack.version,
        "patch": stack.patch,
        **({"cc_algorithm": stack.cc_algorithm} if stack.cc_algorithm else {}),
        **scenario.labels(),
        "run": spec.run,
        "seed": spec.seed,
        **(extra or {}),
        "status": "failed",
        "reason": None,
        # the machine's load when the run began (a CPU-capped device is sensitive to it)
        "host.load_1m": round(os.getloadavg()[0], 2),
        "host.cpus": os.cpu_count() or 0,
    }
    env = {**os.environ, **stack.env, **scenario.env, "PYTHONUNBUFFERED": "1"}
    # the kernel's TCP cannot cross the UDP relay
    ip_path = scenario.path == "ip" or stack.stack == KERNEL_TCP
    labels["path"] = "ip" if ip_path else "udp"
    names: PathNames | None = path_names() if ip_path else None
    children: list[Child] = []
    limiter: CpuLimiter | None = None
    started = time.monotonic()
    relay_stats = run_dir / "relay.json"
    try:
        if scenario.device.read_mbit is not None and stack.stack not in PACED_READERS:
            raise _RunFailed(
                f"device {scenario.device.name!r} paces the client's reads (read_mbit), which "
                f"the {stack.stack} lab client does not implement "
                f"(only {', '.join(sorted(PACED_READERS))})"
            )
        limiter = CpuLimiter(scenario.device, name=f"{os.getpid()}-{spec.seed}-{spec.run}")
        labels["device.mechanism"] = limiter.mechanism
        if names is not None:
            create_namespaces(names)
            server_host, server_port = SERVER_ADDRESS, IP_PATH_PORT
        else:
            server_host, server_port = LOOPBACK, _free_udp_port()

        def in_server_ns(argv: list[str]) -> list[str]:
            return netns_exec(names.server_ns, argv) if names is not None else argv

        def in_client_ns(argv: list[str]) -> list[str]:
            return netns_exec(names.client_ns, argv) if names is not None else argv

        def start_server() -> None:
            server = Child(
                in_server_ns(
                    [
                        *stack.server,
                        "server",
                        "--listen",
                        f"{server_host}:{server_port}",
                        "--qlog-dir",
                        str(run_dir / "server-qlog"),
                    ]
                ),
                env=env,
                stderr_path=run_dir / "server.log",
            )
            children.append(server)
            if (
                server.wait_line(lambda s: s.strip() == "ready", timeout_s=SERVER_READY_TIMEOUT_S)
                is None
            ):
                raise _RunFailed(
                    f"server not ready within {SERVER_READY_TIMEOUT_S:.0f} s"
                    f" (exit {server.proc.poll()}): {server.stderr_tail()}"
                )

        def start_relay() -> str:
            relay_cfg = run_dir / "relay-config.json"
            relay_cfg.write_text(
                json.dumps(
                    {
                        "up": link_config_to_dict(scenario.up),
                        "down": link_config_to_dict(scenario.down),
                    }
                )
            )
            if names is not None:
                relay_argv = [
                    sys.executable,
                    "-m",
                    "quicsm.lab.ippath",
                    "--client-ns",
                    names.client_ns,
                    "--server-ns",
                    names.server_ns,
                    "--client-dev",
                    names.client_dev,
                    "--server-dev",
                    names.server_dev,
                ]
            else:
                relay_argv = [
                    sys.executable,
                    "-m",
                    "quicsm.lab.relay",
                    "--listen",
                    f"{LOOPBACK}:0",
                    "--target",
                    f"{LOOPBACK}:{server_port}",
                ]
            relay = Child(
                [
                    *relay_argv,
                    "--config",
                    str(relay_cfg),
                    "--seed",
                    str(spec.seed),
                    "--stats",
                    str(relay_stats),
                ],
                env=env,
                stderr_path=run_dir / "relay.log",
            )
            children.append(relay)
            ready = relay.wait_line(
                lambda s: s.startswith("ready"), timeout_s=RELAY_READY_TIMEOUT_S
            )
            if ready is None:
                raise _RunFailed(f"relay not ready: {relay.stderr_tail()}")
            # the IP path: the client reaches the server's own address through the TUN relay
            relay_addr = ready.split()[1] if names is None else f"{server_host}:{server_port}"
            return relay_addr

        # the IP path: the relay makes the devices (and addresses) the server binds to
        if names is not None:
            relay_addr = start_relay()
            start_server()
        else:
            start_server()
            relay_addr = start_relay()
        wl = scenario.workload
        client = Child(
            # the CPU limit first: ip netns exec mounts its own /sys, without the cgroups
            limiter.wrap(
                in_client_ns(
                    [
                        *stack.client,
                        "client",
                        "--connect",
                        relay_addr,
                        "--objects",
                        str(wl.objects),
                        "--object-size",
                        str(wl.object_size),
                        "--qlog-dir",
                        str(run_dir / "client-qlog"),
                        "--parallel",
                        str(wl.parallel),
                        *scenario.device.client_args(),
                    ]
                )
            ),
            env=env,
            stderr_path=run_dir / "client.log",
        )
        children.append(client)
        limiter.attach(client.pid)
        code = client.wait(timeout_s=scenario.timeout_s)
        if code is None:
            raise _RunFailed(f"client did not finish within {scenario.timeout_s:g} s")
        result = _last_json_line(client.lines)
        if result is None:
            raise _RunFailed(
                f"client exited with code {code} without a JSON result line: {client.stderr_tail()}"
            )
        completion_ms = result.get("completion_ms")
        nbytes = result.get("bytes")
        labels["bytes"] = nbytes
        labels["completion_ms"] = completion_ms
        if isinstance(completion_ms, int | float) and isinstance(nbytes, int) and completion_ms > 0:
            labels["throughput_mbit"] = round(nbytes * 8 / completion_ms / 1e3, 3)
        if not result.get("ok"):
            raise _RunFailed(f"client reported failure: {result.get('error')}")
        if code != 0:
            raise _RunFailed(f"client exited with code {code}: {client.stderr_tail()}")
        if nbytes != wl.transfer_bytes:
            raise _RunFailed(f"client received {nbytes} bytes, expected {wl.transfer_bytes}")
        labels["status"] = "ok"
        _wait_for_qlog(run_dir / "server-qlog", timeout_s=qlog_linger_s)
    except _RunFailed as exc:
        labels["reason"] = str(exc)
    except (OSError, ValueError, LabError) as exc:
        labels["reason"] = f"{type(exc).__name__}: {exc}"
    except KeyboardInterrupt:
        labels["reason"] = "interrupted"
        raise
    finally:
        # the client first (it may be duty-cycled), then the relay (writes its counters on
        # SIGTERM), then the server (closes its qlog)
        for child in reversed(children):
            child.stop(grace_s=5.0)
        if limiter is not None:
            limiter.close()
        if names is not None:
            delete_namespaces(names)
        labels["wall_s"] = round(time.monotonic() - started, 3)
        _finish(run_dir, labels, relay_stats)
    return labels


class _RunFailed(Exception):
    pass


def _finish(run_dir: Path, labels: Labels, relay_stats: Path) -> None:
    if relay_stats.exists():
        with suppress(ValueError):
            labels.update(_flat(json.loads(relay_stats.read_text()), "relay"))
    server_files = _collect_qlogs(run_dir / "server-qlog", run_dir, "server")
    client_files = _collect_qlogs(run_dir / "client-qlog", run_dir, "client")
    labels["files.server"] = ",".join(server_files)
    labels["files.client"] = ",".join(client_files)
    if labels["status"] == "ok" and not server_files:
        labels["status"], labels["reason"] = "failed", "server wrote no qlog file"
    elif labels["status"] == "ok" and not client_files:
        labels["status"], labels["reason"] = "failed", "client wrote no qlog file"
    (run_dir / "run.json").write_text(json.dumps(labels, indent=1, sort_keys=True) + "\n")


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM like Ctrl-C so every ``finally`` runs and children are stopped."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


#: public name for other orchestrators of runs (``quicsm lab ab``)
sigterm_as_interrupt = _sigterm_as_interrupt


def run_plan(
    plan: Plan,
    stacks: list[Stack],
    *,
    out_dir: Path,
    only: tuple[str, ...] = (),
    qlog_linger_s: float = SERVER_QLOG_LINGER_S,
    on_start: Callable[[RunSpec, int, int], None] | None = None,
    on_done: Callable[[RunSpec, Labels], None] | None = None,
) -> list[Labels]:
    """Execute every run of ``plan``; returns the run.json labels of each, in order.

    ``on_start(spec, index, total)`` / ``on_done(spec, labels)`` report progress;
    ``qlog_linger_s`` is how long to wait for a late server qlog after a successful client.
    On Ctrl-C (or SIGTERM) the current run is recorded as failed ("interrupted"), every
    child is stopped and KeyboardInterrupt propagates.
    """
    specs = plan_runs(plan, stacks, only=only)
    results: list[Labels] = []
    with _sigterm_as_interrupt():
        try:
            for i, spec in enumerate(specs):
                if on_start is not None:
                    on_start(spec, i, len(specs))
                extra = None if spec.position is None else {"order.position": spec.position}
                labels = execute(spec, out_dir=out_dir, qlog_linger_s=qlog_linger_s, extra=extra)
                results.append(labels)
                if on_done is not None:
                    on_done(spec, labels)
        finally:
            stop_all()
    return results
