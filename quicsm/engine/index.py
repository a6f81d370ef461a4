"""The index of each file's traces (:mod:`quicsm.extract.index`), kept in the cache directory.

``FILE#N`` and ``--where`` choose traces by number and labels; with the index they reach their
traces' bytes without decoding the others (:class:`quicsm.qlog.paths.TraceSpans`). A file is
indexed once per content: the index is stored as
``<cache>/<fingerprint>-<strict|lenient>-index/<key>.parquet`` under the file's key
(:func:`quicsm.engine.cache.file_key`: its bytes and its ``run.json``), with the trace ids of
the path it had then, and renamed to the path it has now when it is loaded. Only an index whose
reading reported nothing is kept (what a lenient read skipped is reported again when the file is
indexed again); transitions tables are indexed every time (they are never cached).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from quicsm.core.diagnostics import Diagnostics
from quicsm.engine.cache import (
    TABLE_KEY_PREFIX,
    default_cache_dir,
    extractor_fingerprint,
    file_key,
)
from quicsm.engine.task import merge_diagnostics
from quicsm.extract.index import INDEX_SCHEMA, read_trace_index
from quicsm.qlog.paths import PathLike, expand_paths


def index_dir(cache_dir: Path | str | None, *, lenient: bool) -> Path:
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    mode = "lenient" if lenient else "strict"
    return root / f"{extractor_fingerprint()}-{mode}-index"


def trace_index(
    paths: PathLike | Iterable[PathLike],
    *,
    on_error: str = "raise",
    cache_dir: Path | str | None = None,
    cache: bool = True,
    build: bool = True,
) -> pl.DataFrame:
    """:func:`quicsm.extract.index.read_trace_index` of ``paths``, each file's part read from
    the cache in ``cache_dir`` (default :func:`quicsm.engine.cache.default_cache_dir`) when it
    holds it (and stored there when it did not); ``cache=False`` neither reads nor writes the
    cache. What reading reports is warned about as :func:`quicsm.extract.read.read_traces`
    does. ``build=False``: only the files whose index is kept already (no file is read)."""
    lenient = on_error == "skip"
    reports: list[Diagnostics] = []
    parts: list[pl.DataFrame] = []
    for path in expand_paths(paths):
        file = str(path)
        try:
            key = file_key(file) if cache else TABLE_KEY_PREFIX
        except OSError:  # unreadable: the reader says so (or skips it)
            key = TABLE_KEY_PREFIX
        kept = index_dir(cache_dir, lenient=lenient) / f"{key}.parquet"
        if not key.startswith(TABLE_KEY_PREFIX):
            loaded = load_kept(kept, file, dict(INDEX_SCHEMA), INDEX_SCHEMA["file"])
            if loaded is not None:
                parts.append(loaded)
                continue
        if not build:
            continue
        own = Diagnostics()
        part = read_trace_index([file], on_error=on_error, diagnostics=own)
        parts.append(part)
        if own:
            reports.append(own)
        elif not key.startswith(TABLE_KEY_PREFIX):
            _store(kept, part)
    merge_diagnostics(reports).warn()
    if not parts:
        return pl.DataFrame(schema=INDEX_SCHEMA)
    return pl.concat(parts)


def load_kept(
    kept: Path, file: str, schema: dict[str, pl.DataType], trace_dtype: pl.DataType
) -> pl.DataFrame | None:
    """A per-file table kept in the cache (the index, the connection account), its ids renamed
    to ``file`` (``trace`` = ``file#number``); ``None`` if there is none, or it cannot be read
    or has other columns than ``schema`` (then it is made again)."""
    try:
        frame = pl.read_parquet(kept)
    except Exception:  # noqa: BLE001 - a damaged or missing copy only costs making it again
        return None
    if list(frame.columns) != list(schema):
        return None
    return frame.with_columns(
        pl.lit(file).cast(schema["file"]).alias("file"),
        pl.format("{}#{}", pl.lit(file), pl.col("number").cast(pl.String).str.zfill(4))
        .cast(trace_dtype)
        .alias("trace"),
    )


def write_kept(kept: Path, frame: pl.DataFrame) -> None:
    """Write ``frame`` to ``kept`` atomically (a temporary file renamed over it); a read-only
    or full cache only means it is made again next time."""
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        tmp = kept.with_name(f".{kept.name}.{uuid.uuid4().hex}.tmp")
        frame.write_parquet(tmp)
        os.replace(tmp, kept)
    except OSError:
        return


def _store(kept: Path, frame: pl.DataFrame) -> None:
    if frame.get_column("number").null_count():
        return  # not a qlog file's traces (ids of its own): not kept
    write_kept(kept, frame)
