"""One task: a batch of files in, a partition out (rows, labels, aggregate).

A task hashes its files, loads the rows of those already in the cache, reads the others with
one :func:`quicsm.extract.read.read_batch` call (one normalisation for the whole batch), stores
them as a new cache partition (with what reading each reported), keeps the traces ``select``
chooses and aggregates them. It only reads its inputs and writes content-addressed files, so
running it twice (a worker lost mid-run) gives the same result and changes nothing.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import polars as pl

from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.core.frames import METRICS_SCHEMA, TRANSITIONS_SCHEMA
from quicsm.engine.aggregate import Aggregate
from quicsm.engine.cache import INDEX_SCHEMA, PartitionCache, file_key
from quicsm.engine.plan import Batch
from quicsm.extract.read import TRACES_SCHEMA, read_batch, read_metrics

#: keeps some traces: gets a traces frame (file, trace, labels, ...), returns the kept rows
Select = Callable[[pl.DataFrame], pl.DataFrame]


@dataclass(frozen=True)
class TaskSpec:
    """What a task does; picklable (sent to worker processes and Dask workers)."""

    batch: Batch
    on_error: str = "raise"
    cache_dir: str | None = None
    select: Select | None = None
    rows: bool = False
    aggregate: bool = True
    #: where states come from (``states`` of :func:`quicsm.extract.read.read_transitions`)
    states: str = "hybrid"
    #: also read the congestion metrics (:func:`quicsm.extract.read.read_metrics`; kept in the
    #: cache per batch of files)
    metrics: bool = False
    #: each ApplicationLimited visit split by cause (``split_app_limited`` of
    #: :func:`quicsm.extract.read.read_transitions`; the batch's packets are read for it)
    split_app_limited: bool = False


@dataclass
class TaskResult:
    """What a task returns to the driver."""

    index: int
    traces: pl.DataFrame
    transitions: pl.DataFrame | None
    aggregate: Aggregate | None
    #: what reading the batch's files reported, merged in file order
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    entries: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=INDEX_SCHEMA))
    read_files: int = 0
    cached_files: int = 0
    metrics: pl.DataFrame | None = None


def merge_diagnostics(parts: Iterable[Diagnostics]) -> Diagnostics:
    """Diagnostics of consecutive reads as one read would have reported them (a record two
    reads of its file skipped counted once: :meth:`Diagnostics.absorb`)."""
    out = Diagnostics()
    for d in parts:
        out.absorb(d)
    return out


def _renamed(frame: pl.DataFrame, names: pl.DataFrame) -> pl.DataFrame:
    """Cached rows moved to the paths their files have now (``names``: key, now)."""
    key = TRANSITIONS_SCHEMA["file"]
    file, trace = pl.col("file").cast(pl.String), pl.col("trace").cast(pl.String)
    return (
        frame.join(names, on="key", how="inner", maintain_order="right_left")
        .with_columns(
            pl.when(trace.str.starts_with(file + "#"))
            .then(pl.concat_str(pl.col("now"), trace.str.slice(file.str.len_chars())))
            .otherwise(trace)
            .cast(key)
            .alias("trace"),
            pl.col("now").cast(key).alias("file"),
        )
        .drop("now")
    )


def run_task(spec: TaskSpec) -> TaskResult:
    files = list(spec.batch.files)
    lenient = spec.on_error == "skip"
    cache = (
        PartitionCache(spec.cache_dir, lenient=lenient, states=spec.states)
        if spec.cache_dir
        else None
    )
    keys = [file_key(f) for f in files] if cache is not None else [""] * len(files)
    hits = cache.lookup(keys) if cache is not None else {}
    todo = [f for f, k in zip(files, keys, strict=True) if k not in hits]
    diagnostics = {f: Diagnostics() for f in files}
    transitions: list[pl.DataFrame] = []
    traces: list[pl.DataFrame] = []
    entries = pl.DataFrame(schema=INDEX_SCHEMA)
    if todo:
        got = read_batch(todo, on_error=spec.on_error, states=spec.states)
        diagnostics.update(got.diagnostics)
        transitions.append(got.transitions)
        traces.append(got.traces)
        if cache is not None:
            entries = _store(cache, todo, keys, files, got.transitions, got.traces, got.diagnostics)
    if hits and cache is not None:
        names = pl.DataFrame(
            {
                "key": [k for k in keys if k in hits],
                "now": [f for f, k in zip(files, keys, strict=True) if k in hits],
            },
            schema={"key": pl.String(), "now": pl.String()},
        )
        parts = sorted(set(hits.values()))
        wanted = names.get_column("key").unique().to_list()
        stored_diag = pl.concat(
            [
                pl.read_parquet(cache.diagnostics_path(p)).filter(pl.col("key").is_in(wanted))
                for p in parts
            ]
        )
        reported = {key: (old, text) for key, old, text in stored_diag.iter_rows()}
        for f, k in zip(files, keys, strict=True):
            if k in hits and k in reported:
                old, text = reported[k]
                diagnostics[f] = Diagnostics.from_json(text, rename=(old, f))
        for load, out, schema in (
            (cache.transitions_path, transitions, TRANSITIONS_SCHEMA),
            (cache.traces_path, traces, TRACES_SCHEMA),
        ):
            stored = pl.concat(
                [pl.read_parquet(load(p)).filter(pl.col("key").is_in(wanted)) for p in parts]
            )
            out.append(_renamed(stored, names).select(list(schema)))
    order = {f: i for i, f in enumerate(files)}
    all_traces = (
        pl.concat(traces)
        .with_columns(pl.col("file").replace_strict(order, return_dtype=pl.Int64).alias("_pos"))
        .sort("_pos", maintain_order=True)
        .drop("_pos")
    )
    all_transitions = pl.concat(transitions)
    ids = all_transitions.get_column("trace")
    if not ids.is_sorted():  # one batch read is sorted already
        all_transitions = all_transitions.sort("trace", maintain_order=True)
        ids = all_transitions.get_column("trace")
    if spec.select is not None:
        key = TRANSITIONS_SCHEMA["file"]
        kept = spec.select(all_traces).select(pl.col("file", "trace").cast(key))
        all_traces = all_traces.join(kept, on=["file", "trace"], how="semi", maintain_order="left")
        all_transitions = all_transitions.join(
            kept, on=["file", "trace"], how="semi", maintain_order="left"
        )
    # a trace counts only if it has states (every qlog trace has; a table may list none;
    # a table's rows may name the file they came from, so only the trace id is compared)
    if spec.select is not None:
        ids = all_transitions.get_column("trace")
    # the distinct ids of sorted rows are the values of their runs (no hashing)
    present = ids.rle().struct.field("value").rename("trace")
    if not all_traces.get_column("trace").equals(present):  # else every trace has states
        all_traces = all_traces.join(
            present.to_frame(), on="trace", how="semi", maintain_order="left"
        )
    split_diagnostics = Diagnostics()
    if spec.split_app_limited:
        from quicsm.extract.app_limited_split import read_split

        all_transitions = read_split(
            all_transitions, on_error=spec.on_error, diagnostics=split_diagnostics
        )
    metrics = None
    if spec.metrics:
        metrics = _metrics(cache, files, keys, spec.on_error).join(
            all_traces.select("file", "trace"),
            on=["file", "trace"],
            how="semi",
            maintain_order="left",
        )
    return TaskResult(
        index=spec.batch.index,
        metrics=metrics,
        traces=all_traces,
        transitions=all_transitions if spec.rows else None,
        aggregate=Aggregate.of(all_transitions) if spec.aggregate else None,
        diagnostics=merge_diagnostics([*(diagnostics[f] for f in files), split_diagnostics]),
        entries=entries,
        read_files=len(todo),
        cached_files=len(files) - len(todo),
    )


def _metrics(
    cache: PartitionCache | None, files: list[str], keys: list[str], on_error: str
) -> pl.DataFrame:
    """:func:`read_metrics` of the batch's files, kept in the cache under the keys of the
    batch's contents (a run over the same files reads no file for its metrics again)."""
    kept = cache.metrics_path(keys) if cache is not None else None
    names = pl.DataFrame(
        {"key": keys, "now": files}, schema={"key": pl.String(), "now": pl.String()}
    )
    if kept is not None:
        try:
            stored = pl.read_parquet(kept)
        except Exception:  # noqa: BLE001 - none kept (or a damaged copy): read again
            stored = None
        if stored is not None and stored.columns == ["key", *METRICS_SCHEMA]:
            return _renamed(stored, names).select(list(METRICS_SCHEMA))
    with warnings.catch_warnings():  # what reading reports is in ``diagnostics`` already
        warnings.simplefilter("ignore", QuicsmWarning)
        metrics = read_metrics(files, on_error=on_error)
    if cache is not None and kept is not None:
        key_of: dict[str, str] = {}
        for file, key in zip(files, keys, strict=True):
            if key not in key_of.values():  # the same content twice: kept once
                key_of[file] = key
        stored = metrics.filter(pl.col("file").cast(pl.String).is_in(list(key_of))).select(
            pl.col("file").cast(pl.String).replace_strict(key_of, return_dtype=pl.String)
            .alias("key"),
            pl.all(),
        )  # fmt: skip
        cache.write_frame(stored, kept)
    return metrics


def _store(
    cache: PartitionCache,
    todo: list[str],
    keys: list[str],
    files: list[str],
    transitions: pl.DataFrame,
    traces: pl.DataFrame,
    diagnostics: dict[str, Diagnostics],
) -> pl.DataFrame:
    """Write the files of ``todo`` as one partition, with what reading each reported; its
    index entries."""
    key_of = dict(zip(files, keys, strict=True))
    # transition tables are columnar already, and their rows may name other files: not cached
    tables = set(
        traces.filter(pl.col("format").is_in(["CSV", "Parquet"])).get_column("file").to_list()
    )
    first: dict[str, str] = {}
    for f in todo:
        if f not in tables:
            first.setdefault(key_of[f], f)  # the same content twice: stored once
    if not first:
        return pl.DataFrame(schema=INDEX_SCHEMA)
    stored = pl.DataFrame(
        {"file": list(first.values()), "key": list(first.keys())},
        schema={"file": TRANSITIONS_SCHEMA["file"], "key": pl.String()},
    )
    rows = transitions.join(stored, on="file", how="inner", maintain_order="left")
    labels = traces.join(stored, on="file", how="inner", maintain_order="left")
    reported = stored.select(
        "key",
        "file",
        pl.Series("diagnostics", [diagnostics[f].to_json() for f in first.values()], pl.String()),
    )
    part = cache.write(rows, labels, reported)
    return pl.DataFrame(
        {"key": list(first.keys()), "part": [part] * len(first)}, schema=INDEX_SCHEMA
    )
