"""The driver: plan batches, run them on an engine, combine what they return.

::

    extract(paths, *, engine="local", workers=None, scheduler=None, on_error="raise",
            cache_dir=None, cache=True, select=None, rows=False, aggregate=True,
            progress=None) -> Corpus
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import polars as pl

from quicsm.core.choices import ENGINES as ENGINES  # valid values of ``engine``
from quicsm.core.diagnostics import Diagnostics
from quicsm.core.errors import InputError
from quicsm.engine.aggregate import Aggregate, Merger
from quicsm.engine.cache import INDEX_SCHEMA, PartitionCache, default_cache_dir
from quicsm.engine.executors import run_dask, run_inline, run_processes
from quicsm.engine.plan import BATCH_BYTES, BATCH_FILES, plan_batches
from quicsm.engine.task import Select, TaskResult, TaskSpec, merge_diagnostics
from quicsm.extract.read import TRACES_SCHEMA
from quicsm.qlog.paths import PathLike, expand_paths

#: ``local`` starts worker processes only for inputs of at least this many bytes ...
POOL_MIN_BYTES: Final[int] = 64 << 20
#: ... or this many files (below both, starting workers costs more than it saves)
POOL_MIN_FILES: Final[int] = 2 * BATCH_FILES

#: progress callback: (bytes done, bytes in total)
Progress = Callable[[int, int], None]


@dataclass
class Corpus:
    """What the engine extracted from a corpus."""

    files: list[str]
    #: one row per trace kept (:data:`quicsm.extract.read.TRACES_SCHEMA`), in file order
    traces: pl.DataFrame
    #: the transitions frame (as :func:`quicsm.extract.read.read_transitions` gives it), when
    #: asked for with ``rows=True``
    transitions: pl.DataFrame | None
    #: the merged aggregate, when asked for with ``aggregate=True``
    aggregate: Aggregate | None
    #: the congestion metrics of the traces kept, when asked for with ``metrics=True``
    metrics: pl.DataFrame | None
    diagnostics: Diagnostics
    engine: str
    workers: int
    batches: int
    read_files: int
    cached_files: int


def default_workers() -> int:
    """Every core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def extract(
    paths: PathLike | Iterable[PathLike],
    *,
    engine: str = "local",
    workers: int | None = None,
    scheduler: str | None = None,
    on_error: str = "raise",
    cache_dir: Path | str | None = None,
    cache: bool = True,
    select: Select | None = None,
    rows: bool = False,
    aggregate: bool = True,
    metrics: bool = False,
    states: str = "hybrid",
    split_app_limited: bool = False,
    progress: Progress | None = None,
    batch_files: int = BATCH_FILES,
    batch_bytes: int = BATCH_BYTES,
) -> Corpus:
    """Read a corpus on an engine (see :mod:`quicsm.engine`).

    ``engine``: ``local`` (this machine, every core: worker processes for inputs of at least
    :data:`POOL_MIN_BYTES` or :data:`POOL_MIN_FILES`, else this process), ``processes``
    (always a pool of ``workers`` processes) or ``dask`` (the cluster at ``scheduler``, or a
    local one of ``workers`` processes).
    ``workers`` defaults to every core. ``cache`` uses the partition cache in ``cache_dir``
    (default :func:`quicsm.engine.cache.default_cache_dir`). ``select`` keeps some traces
    (given the traces frame, returns the kept rows). ``rows`` returns the transitions frame,
    ``aggregate`` the merged :class:`Aggregate`, ``metrics`` the congestion metrics;
    ``states`` is where states come from and ``split_app_limited`` whether ApplicationLimited
    is split by cause (both as in :func:`quicsm.extract.read.read_transitions`).
    ``progress(done, total)`` is called with bytes. Errors are
    :class:`quicsm.core.errors.QuicsmError`: in strict mode (``on_error="raise"``) a bad file
    stops the run and is named; with ``"skip"`` it is reported in
    ``diagnostics``.
    """
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    if on_error not in ("raise", "skip"):
        raise InputError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
    if workers is not None and (isinstance(workers, bool) or workers < 1):
        raise InputError(f"workers must be a positive integer, got {workers!r}")
    from quicsm.extract.derive import check_mode

    check_mode(states)
    if scheduler and engine != "dask":
        raise InputError("--scheduler only applies with --engine dask")
    n_workers = workers or default_workers()
    files = [str(p) for p in expand_paths(paths)]
    sizes = [_size(f) for f in files]
    total = sum(sizes)
    batches = plan_batches(files, sizes, max_files=batch_files, max_bytes=batch_bytes)
    directory = str(Path(cache_dir) if cache_dir is not None else default_cache_dir())
    specs = [
        TaskSpec(
            batch=b,
            on_error=on_error,
            cache_dir=directory if cache else None,
            select=select,
            rows=rows,
            aggregate=aggregate,
            metrics=metrics,
            states=states,
            split_app_limited=split_app_limited,
        )
        for b in batches
    ]
    # results are folded in batch order as soon as the batches before them are in, so the
    # driver keeps only results that arrived early, never all of them
    early: dict[int, TaskResult] = {}
    done: set[int] = set()
    folded = 0
    merger = Merger()
    traces_parts: list[pl.DataFrame] = []
    rows_parts: list[pl.DataFrame] = []
    metrics_parts: list[pl.DataFrame] = []
    diagnostics: list[Diagnostics] = []
    entries: list[pl.DataFrame] = []
    counts = [0, 0]  # files read, files from the cache
    finished = 0  # bytes of finished batches (cached files included)
    live = 0  # bytes read so far inside files, finished or not

    def show() -> None:
        if progress is not None:
            progress(min(total, max(finished, live)), total)

    def on_bytes(n: int) -> None:
        nonlocal live
        live = max(live, n)
        show()

    def fold(result: TaskResult) -> None:
        traces_parts.append(result.traces)
        if result.transitions is not None:
            rows_parts.append(result.transitions)
        if result.metrics is not None:
            metrics_parts.append(result.metrics)
        if result.aggregate is not None:
            merger.add(result.aggregate)
        diagnostics.append(result.diagnostics)
        if result.entries.height:
            entries.append(result.entries)
        counts[0] += result.read_files
        counts[1] += result.cached_files

    def on_result(result: TaskResult) -> None:
        nonlocal finished, folded
        if result.index in done:
            return  # a task that ran twice (a lost worker): its first result stands
        done.add(result.index)
        early[result.index] = result
        while folded in early:
            fold(early.pop(folded))
            folded += 1
        finished += batches[result.index].nbytes
        show()

    if engine == "dask":
        run_dask(
            specs, workers=n_workers, scheduler=scheduler, on_result=on_result, on_bytes=on_bytes
        )
    elif engine == "processes" or (
        n_workers > 1
        and len(specs) > 1
        and (total >= POOL_MIN_BYTES or len(files) >= POOL_MIN_FILES)
    ):
        run_processes(
            specs, workers=min(n_workers, len(specs)) or 1, on_result=on_result, on_bytes=on_bytes
        )
    else:
        n_workers = 1
        run_inline(specs, on_result=on_result, on_bytes=on_bytes)
    if folded != len(specs):  # pragma: no cover - every executor raises or returns every result
        missing = [i for i in range(len(specs)) if i not in done]
        raise InputError(f"batches {missing[:5]} returned no result")
    if cache and entries:
        PartitionCache(directory, lenient=on_error == "skip", states=states).record(
            pl.concat(entries)
        )
    traces = pl.concat(traces_parts) if traces_parts else pl.DataFrame(schema=TRACES_SCHEMA)
    transitions = None
    if rows:
        transitions = pl.concat(rows_parts).sort("trace", maintain_order=True)
    return Corpus(
        files=files,
        traces=traces,
        transitions=transitions,
        aggregate=merger.result() if aggregate else None,
        metrics=pl.concat(metrics_parts) if metrics and metrics_parts else None,
        diagnostics=merge_diagnostics(diagnostics),
        engine=engine,
        workers=n_workers,
        batches=len(specs),
        read_files=counts[0],
        cached_files=counts[1],
    )


__all__ = ["ENGINES", "INDEX_SCHEMA", "Corpus", "default_workers", "extract", "merge_diagnostics"]
