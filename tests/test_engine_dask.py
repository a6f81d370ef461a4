"""The engine on a real dask.distributed LocalCluster with several worker processes: the same
answers as one local process, also when a worker is killed mid-run, and the same files from
``quicsm infer --engine dask``."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster
from test_engine import CLEAN, _same, assert_stats_match

from quicsm.cli import main
from quicsm.engine import extract
from quicsm.extract.read import read_transitions

ROOT = Path(__file__).parent.parent
TRACES = sorted(str(p) for p in (ROOT / "traces").glob("*.qlog"))


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(
        n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None
    ) as c:
        yield c


def test_dask_gives_the_answers_of_the_local_engine(cluster: LocalCluster) -> None:
    local = extract(CLEAN, workers=1, cache=False, rows=True, batch_files=2)
    remote = extract(
        CLEAN,
        engine="dask",
        scheduler=cluster.scheduler_address,
        cache=False,
        rows=True,
        batch_files=2,
    )
    assert remote.batches > 3  # spread over the workers
    _same(local, remote)
    assert remote.transitions is not None
    assert remote.transitions.equals(read_transitions(CLEAN))
    assert remote.aggregate is not None
    assert_stats_match(remote.aggregate, remote.transitions)


def test_a_worker_killed_mid_run_loses_and_double_counts_no_file(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    # many small batches of distinct files, so that work is in flight when the worker dies
    files = []
    for i in range(40):
        source = Path(CLEAN[i % len(CLEAN)])
        target = tmp_path / f"{i:03d}-{source.name}"
        shutil.copy(source, target)
        files.append(str(target))
    expected = extract(files, workers=1, cache=False, rows=True, batch_files=1)
    killed: list[tuple[int, int]] = []  # (pid, batches it held when killed)
    with Client(cluster) as client:
        pids = client.run(os.getpid)

        def progress(done: int, total: int) -> None:
            # after the first finished batch, kill the worker holding the most unfinished
            # batches: the kill always lands on work in flight, never after the run
            if done and not killed:
                held = {addr: len(keys) for addr, keys in client.processing().items()}
                addr = max(pids, key=lambda a: (held.get(a, 0), a))
                os.kill(pids[addr], signal.SIGKILL)
                killed.append((pids[addr], held.get(addr, 0)))

        got = extract(
            files,
            engine="dask",
            scheduler=cluster.scheduler_address,
            cache_dir=tmp_path / "cache",
            rows=True,
            batch_files=1,
            progress=progress,
        )
    assert len(killed) == 1
    assert killed[0][1] > 0, "the killed worker held no batch: the test would prove nothing"
    # every file once: the same traces, rows and sums as one local process
    assert got.traces.get_column("file").unique().len() == len(files)
    assert got.traces.height == expected.traces.height
    _same(expected, got)
    assert got.transitions is not None and expected.transitions is not None
    assert got.transitions.equals(expected.transitions)


def _infer(tmp_path: Path, name: str, *extra: str) -> Path:
    out = tmp_path / name
    result = CliRunner().invoke(
        main, ["infer", *TRACES, "-o", str(out), "--format", "json", "-q", *extra]
    )
    assert result.exit_code == 0, result.output
    return out


def test_infer_on_dask_writes_byte_identical_csv_files(tmp_path: Path) -> None:
    assert TRACES, "traces/*.qlog are part of the repository"
    local = _infer(tmp_path, "local", "--no-cache")
    dask = _infer(tmp_path, "dask", "--engine", "dask", "--workers", "2", "--no-cache")
    processes = _infer(tmp_path, "processes", "--engine", "processes", "--workers", "2")
    for name in ("stats.csv", "transitions.csv", "model.json", "model.dot"):
        assert (dask / name).read_bytes() == (local / name).read_bytes(), name
        assert (processes / name).read_bytes() == (local / name).read_bytes(), name


def test_states_and_diff_are_the_same_on_every_engine(cluster: LocalCluster) -> None:
    def run(*args: str) -> str:
        result = CliRunner().invoke(main, list(args))
        assert result.exit_code == 0, result.output
        return result.stdout

    dask = ("--engine", "dask", "--scheduler", cluster.scheduler_address)
    states = ["states", *CLEAN[:6], "--format", "csv"]
    assert run(*states, *dask) == run(*states, "--no-cache")
    diff = ["diff", *TRACES[:2], "--vs", *TRACES[2:], "--format", "json"]
    assert run(*diff, *dask) == run(*diff, "--no-cache")


def test_report_is_the_same_on_dask(cluster: LocalCluster, tmp_path: Path) -> None:
    def report(name: str, *extra: str) -> list[str]:
        out = tmp_path / f"{name}.md"
        args = ["report", TRACES[2], "--vs", TRACES[3], "--where", "vantage=server"]
        result = CliRunner().invoke(main, [*args, "-o", str(out), *extra])
        assert result.exit_code == 0, result.output
        # the report names when it was generated and the command: the rest must be equal
        return [
            line
            for line in out.read_text().splitlines()
            if "enerated" not in line and "**Command**" not in line
        ]

    dask = report("dask", "--engine", "dask", "--scheduler", cluster.scheduler_address)
    assert dask == report("local", "--no-cache")


def test_an_unreachable_scheduler_is_a_clear_error() -> None:
    result = CliRunner().invoke(
        main, ["states", CLEAN[0], "--engine", "dask", "--scheduler", "tcp://127.0.0.1:9"]
    )
    assert result.exit_code == 1
    assert "Error: --scheduler tcp://127.0.0.1:9: cannot connect" in result.output


def test_a_dask_run_prints_no_noise(tmp_path: Path) -> None:
    """`--engine dask` on a machine where the dashboard's usual port is taken: no port, socket
    or resource warnings on stderr, only quicsm's own output (warnings shown as Python would
    with -W default)."""
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            taken.bind(("127.0.0.1", 8787))
            taken.listen()
        except OSError:
            pass  # already in use: the situation this test is about
        env = dict(os.environ, PYTHONWARNINGS="default")
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "quicsm",
                "infer",
                *TRACES[:2],
                "-o",
                str(tmp_path / "o"),
                "--engine",
                "dask",
                "--workers",
                "2",
                "--no-cache",
                "-q",
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr
    for noise in ("8787", "unclosed", "ResourceWarning", "already in use", "distributed."):
        assert noise not in proc.stderr, proc.stderr


def test_the_heartbeat_race_of_a_closing_local_cluster_is_not_printed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A worker whose last heartbeat meets the scheduler's shutdown logs an ERROR with a
    traceback (distributed's own race; seen once at the end of a CI run of the test above). The
    local cluster's workers drop that one message (quicsm.engine.executors), and only it: the
    message is the one this version of distributed logs, and any other worker log still shows."""
    import inspect
    import logging

    from distributed import worker

    from quicsm.engine.executors import HEARTBEAT_RACE, HeartbeatRaceFilter, quiet_heartbeat_race

    assert HEARTBEAT_RACE in inspect.getsource(worker.Worker.heartbeat)
    logger = logging.getLogger("distributed.worker")
    try:
        quiet_heartbeat_race()
        quiet_heartbeat_race()  # once only
        assert sum(isinstance(f, HeartbeatRaceFilter) for f in logger.filters) == 1
        with caplog.at_level(logging.WARNING, logger="distributed.worker"):
            try:
                raise OSError("Stream is closed")
            except OSError:
                logger.exception(f"{HEARTBEAT_RACE}.")
            logger.error("Compute Failed")
        assert [r.getMessage() for r in caplog.records] == ["Compute Failed"]
    finally:
        for f in [f for f in logger.filters if isinstance(f, HeartbeatRaceFilter)]:
            logger.removeFilter(f)
