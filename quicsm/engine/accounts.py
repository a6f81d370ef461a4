"""The connection account of each trace (:mod:`quicsm.extract.account`), kept in the cache
directory like transitions, so that a report or a diff reads a file's packets once, the first
time its traces are counted.

The account of a trace depends only on its file's content (and ``run.json``), how states are
read (strict or lenient, ``--states``) and the code that counts: it is stored per file as
``<cache>/<fingerprint>-<strict|lenient>-<states>/accounts/<key>.parquet`` (the partition
cache's directory, :class:`quicsm.engine.cache.PartitionCache`; ``key`` is
:func:`quicsm.engine.cache.file_key`), one row per trace counted so far with its number in the
file, and renamed to the path the file has now when it is loaded. Traces not counted yet are
counted together, their packets read from their own bytes only when the file's index
(:mod:`quicsm.engine.index`) is kept already and locates them, or a whole read of the file
earlier in the same command found where they lie (:func:`quicsm.qlog.blocks.kept_spans`;
else the file is read whole, once: indexing it would read it whole as well), and added to the
file's rows. Only what was counted without anything to report is kept (a lenient read that
skipped records is counted again).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from quicsm.core.diagnostics import Diagnostics
from quicsm.engine.cache import TABLE_KEY_PREFIX, PartitionCache, default_cache_dir, file_key
from quicsm.engine.index import load_kept, trace_index, write_kept
from quicsm.extract.account import ACCOUNT_SCHEMA, read_account
from quicsm.extract.index import spans_of
from quicsm.extract.packets import read_packet_timelines
from quicsm.qlog.blocks import kept_spans
from quicsm.qlog.paths import PathLike, TraceSpans

__all__ = ["cached_account"]

#: a kept account: the trace's number in its file, then the account's columns
_KEPT_SCHEMA = {"number": pl.Int64(), **ACCOUNT_SCHEMA}


def _number(trace: str, file: str) -> int | None:
    """The trace's number in its qlog file (``<file>#<n>``), else None (a table's own ids)."""
    head, sep, tail = trace.rpartition("#")
    return int(tail) if sep and head == file and tail.isdigit() else None


def cached_account(
    transitions: pl.DataFrame,
    metrics: pl.DataFrame,
    traces: pl.DataFrame,
    *,
    on_error: str = "raise",
    states: str = "hybrid",
    cache_dir: Path | str | None = None,
    cache: bool = True,
    diagnostics: Diagnostics | None = None,
) -> pl.DataFrame:
    """:func:`quicsm.extract.account.read_account` of the traces of ``transitions`` (the same
    rows, in the same order), each file's traces counted before read from the cache in
    ``cache_dir`` (default :func:`quicsm.engine.cache.default_cache_dir`) unless ``cache`` is
    false; ``states`` is how ``transitions`` were read."""
    order = [str(t) for t in transitions.get_column("trace").unique(maintain_order=True)]
    if not order:
        return pl.DataFrame(schema=ACCOUNT_SCHEMA)
    pairs = transitions.select(pl.col("file", "trace").cast(pl.String)).unique(
        "trace", keep="first", maintain_order=True
    )
    by_file: dict[str, list[str]] = {}
    for file, trace in pairs.iter_rows():
        by_file.setdefault(file, []).append(trace)
    root = None
    if cache:
        directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        root = PartitionCache(directory, lenient=on_error == "skip", states=states).root
    found: list[pl.DataFrame] = []
    kept: dict[str, tuple[Path, pl.DataFrame | None]] = {}  # file -> (where, rows kept)
    todo: list[str] = []
    for file, ids in by_file.items():
        numbered = all(_number(t, file) is not None for t in ids)
        key = _key(file) if root is not None and numbered else None
        if key is None or root is None:
            todo.extend(ids)
            continue
        where = root / "accounts" / f"{key}.parquet"
        stored = load_kept(where, file, dict(_KEPT_SCHEMA), ACCOUNT_SCHEMA["trace"])
        have = set() if stored is None else set(stored.get_column("trace").to_list())
        if stored is not None:
            found.append(stored.filter(pl.col("trace").is_in(ids)).drop("number"))
        missing = [t for t in ids if t not in have]
        if missing:
            kept[file] = (where, stored)
            todo.extend(missing)
    if todo:
        counted = _count(
            transitions,
            metrics,
            traces,
            todo,
            on_error=on_error,
            cache_dir=cache_dir,
            cache=cache,
            diagnostics=diagnostics,
        )
        found.append(counted.drop("number"))
        if counted.height and kept:
            for file, (where, stored) in kept.items():
                new = counted.filter(pl.col("file").cast(pl.String) == file)
                _store(where, new if stored is None else pl.concat([stored, new]))
    account = pl.concat(found, how="vertical_relaxed").cast(ACCOUNT_SCHEMA)  # type: ignore[arg-type]
    place = {t: i for i, t in enumerate(order)}
    at = pl.col("trace").cast(pl.String).replace_strict(place, return_dtype=pl.Int64)
    return account.with_columns(at.alias("_at")).sort("_at").drop("_at")


def _key(file: str) -> str | None:
    try:
        key = file_key(file)
    except OSError:  # unreadable: counted without the cache (the reader says why)
        return None
    return None if key.startswith(TABLE_KEY_PREFIX) else key


def _count(
    transitions: pl.DataFrame,
    metrics: pl.DataFrame,
    traces: pl.DataFrame,
    ids: Sequence[str],
    *,
    on_error: str,
    cache_dir: Path | str | None,
    cache: bool,
    diagnostics: Diagnostics | None,
) -> pl.DataFrame:
    """The account of the traces ``ids`` with their numbers (``number``, null for a table's
    traces): their packets read from their own bytes where the kept index locates them. What
    reading reported goes to ``diagnostics``; the rows of a count that reported something are
    not numbered (so not kept)."""
    chosen = pl.Series("_t", list(ids), dtype=pl.String)

    def keep(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.filter(pl.col("trace").cast(pl.String).is_in(chosen.implode()))

    files = [str(f) for f in keep(transitions).get_column("file").unique(maintain_order=True)]
    own = Diagnostics()
    # a file indexed already is read in its chosen traces' spans; another is read whole, once
    # (indexing it first would read it whole too, then the spans again)
    index = trace_index(files, on_error=on_error, cache_dir=cache_dir, cache=cache, build=False)
    located: list[PathLike] = list(
        spans_of(keep(index.with_columns(pl.col("trace").cast(pl.String))))
    )
    indexed = {str(f) for f in index.get_column("file").cast(pl.String).unique()}
    located += [_spans_read(f, ids) for f in files if f not in indexed]
    packets = read_packet_timelines(
        located, ids, on_error=on_error, diagnostics=own, byte_offsets=False
    )
    account = read_account(
        keep(transitions),
        keep(metrics),
        keep(traces),
        on_error=on_error,
        diagnostics=own,
        packets=packets,
    )
    if diagnostics is not None:  # a record it reported already is not counted again
        diagnostics.absorb(own)
    numbers = [
        None if own else _number(t, f)
        for f, t in account.select(pl.col("file", "trace").cast(pl.String)).iter_rows()
    ]
    return account.select(pl.Series("number", numbers, dtype=pl.Int64), pl.all())


def _spans_read(file: str, ids: Sequence[str]) -> PathLike:
    """``file`` to be read for the traces of ``ids`` it holds: in their spans where a whole
    read of its content earlier in this command found them and reported nothing
    (:func:`quicsm.qlog.blocks.kept_spans`: the traces' own bytes hold what is counted, as
    when the index locates them), else whole."""
    known = kept_spans(file)
    numbers = {n for n in (_number(t, file) for t in ids) if n is not None}
    if known is None or not numbers or not numbers <= {index for index, _, _ in known}:
        return file
    return TraceSpans(file, tuple(span for span in known if span[0] in numbers))


def _store(where: Path, rows: pl.DataFrame) -> None:
    """Keep the numbered rows (one per trace number) of a file's account."""
    rows = rows.filter(pl.col("number").is_not_null()).unique(
        "number", keep="first", maintain_order=True
    )
    if rows.height == 0:
        return
    write_kept(where, rows.cast(_KEPT_SCHEMA))  # type: ignore[arg-type]
