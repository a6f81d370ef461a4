"""Where tasks run: in this process, in a pool of worker processes, or on a Dask cluster.

Every executor runs :func:`quicsm.engine.task.run_task` on each spec and hands each result to
``on_result`` as it arrives (any order; the driver orders them by batch). ``on_bytes`` gets the
number of bytes read so far inside files, also inside files not finished yet (not on Dask,
where progress advances per finished batch).
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from quicsm.core.errors import InputError
from quicsm.engine.task import TaskResult, TaskSpec, run_task
from quicsm.qlog.blocks import count_bytes

OnResult = Callable[[TaskResult], None]
OnBytes = Callable[[int], None]


def run_inline(specs: Sequence[TaskSpec], *, on_result: OnResult, on_bytes: OnBytes) -> None:
    """One task after the other in this process."""
    seen = 0

    def add(n: int) -> None:
        nonlocal seen
        seen += n
        on_bytes(seen)

    with count_bytes(add):
        for spec in specs:
            on_result(run_task(spec))


# -- worker processes -------------------------------------------------------------------------

_shared: Any = None  # the byte counter a pool worker adds to


def _init_worker(counter: Any) -> None:
    global _shared
    _shared = counter


def _add_shared(n: int) -> None:
    with _shared.get_lock():
        _shared.value += n


def _pool_task(spec: TaskSpec) -> TaskResult:
    with count_bytes(_add_shared):
        return run_task(spec)


def run_processes(
    specs: Sequence[TaskSpec], *, workers: int, on_result: OnResult, on_bytes: OnBytes
) -> None:
    """A pool of ``workers`` processes (started fresh: no fork of a threaded parent)."""
    context = multiprocessing.get_context("spawn")
    counter = context.Value("q", 0)
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_init_worker, initargs=(counter,)
    ) as pool:
        pending: set[Future[TaskResult]] = {pool.submit(_pool_task, s) for s in specs}
        try:
            while pending:
                done, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
                on_bytes(counter.value)
                for future in done:
                    on_result(future.result())
        except BaseException:
            for future in pending:
                future.cancel()
            raise


# -- Dask -------------------------------------------------------------------------------------

#: what a Dask worker logs (with a traceback) when a heartbeat meets a closed scheduler stream
HEARTBEAT_RACE = "Failed to communicate with scheduler during heartbeat"


class HeartbeatRaceFilter(logging.Filter):
    """Drops the ERROR a worker of the local cluster logs when its last heartbeat is in flight
    as the cluster shuts down: distributed's own race (the scheduler closes the worker's stream
    while the heartbeat waits on it), harmless, and printed with a traceback now and then at the
    end of a run on a busy machine. Only the local cluster quicsm starts and stops itself gets
    it; a user's own cluster keeps its logging."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(HEARTBEAT_RACE)


def quiet_heartbeat_race() -> None:
    """Run on each worker of the local cluster: :class:`HeartbeatRaceFilter` on its worker
    logger (once)."""
    logger = logging.getLogger("distributed.worker")
    if not any(isinstance(f, HeartbeatRaceFilter) for f in logger.filters):
        logger.addFilter(HeartbeatRaceFilter())


def run_dask(
    specs: Sequence[TaskSpec],
    *,
    workers: int,
    scheduler: str | None,
    on_result: OnResult,
    on_bytes: OnBytes,
) -> None:
    """On the Dask cluster at ``scheduler`` (``tcp://host:8786``), or on a local cluster of
    ``workers`` single-threaded worker processes when no scheduler is given."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise InputError(
            "--engine dask needs dask.distributed: install quicsm with its engine extra "
            "(pip install 'quicsm[engine]')"
        ) from None
    import uuid

    cluster = None
    try:
        if scheduler:
            try:
                client = Client(scheduler, timeout="20s")
            except OSError as exc:
                raise InputError(f"--scheduler {scheduler}: cannot connect: {exc}") from None
        else:
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                # any free port: None still tries 8787 first, and warns (twice) when it is taken
                dashboard_address=":0",
            )
            client = Client(cluster)
            client.run(quiet_heartbeat_race)
        run = uuid.uuid4().hex[:12]
        with client:
            keys = [f"quicsm-batch-{run}-{s.batch.index}" for s in specs]
            futures = client.map(run_task, list(specs), key=keys)
            try:
                for _future, result in as_completed(futures, with_results=True):
                    on_result(result)
            except BaseException:
                client.cancel(futures)
                raise
    finally:
        if cluster is not None:
            cluster.close()
    on_bytes(0)
