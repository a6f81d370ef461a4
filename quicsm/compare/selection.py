"""Choosing traces: ``FILE#N`` names one trace of a file, ``--where`` filters by label.

Trace ids are ``<file>#<n>`` (:func:`quicsm.extract.read.trace_id`); a command line may name
one trace the same way, with or without the zero padding (``run/server.sqlog#3`` or
``run/server.sqlog#0003``). In a transitions table (CSV/Parquet), whose traces carry their own
ids, ``FILE#N`` is the table's N-th trace in order of appearance. A path that exists as
written is always a path, even with a ``#`` in its name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from quicsm.compare.grouping import OnError, filter_traces, labelled_traces
from quicsm.compare.labels import where_hint
from quicsm.core.errors import InputError
from quicsm.core.frames import KEY_DTYPE
from quicsm.engine.index import trace_index
from quicsm.extract.index import spans_of
from quicsm.qlog.paths import PathLike


def split_trace_spec(text: str) -> tuple[str, int | None]:
    """``"a.qlog#12"`` -> ``("a.qlog", 12)``; a plain path -> ``(path, None)``."""
    path, sep, index = text.rpartition("#")
    if not sep or Path(text).exists():
        return text, None
    if not index.isdigit():
        raise InputError(
            f"{text!r}: expected FILE#N (N = the trace's position in the file, from 0), "
            f"got {index!r} after the #"
        )
    return path, int(index)


@dataclass
class Selection:
    """The paths to read and, when anything was narrowed, the traces to keep."""

    paths: list[str]
    #: file, trace, labels of the chosen traces; None = every trace under ``paths``
    traces: pl.DataFrame | None
    #: what to read for the chosen traces: the files of ``paths`` holding one, each as the
    #: spans of its chosen traces (:class:`quicsm.qlog.paths.TraceSpans`) where the index has
    #: them, else whole; None = ``paths``
    parts: list[PathLike] | None = None

    @property
    def to_read(self) -> list[PathLike]:
        """What a reader is given: :attr:`parts`, else :attr:`paths` (the rows of the chosen
        traces are the same either way; :meth:`keep` drops the others')."""
        return list(self.paths) if self.parts is None else self.parts

    def keep(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The rows of a frame with ``file`` and ``trace`` columns that belong to the
        selection."""
        if self.traces is None:
            return frame
        keys = self.traces.select("file", "trace")
        return frame.join(
            keys, left_on=[pl.col("file").cast(KEY_DTYPE), pl.col("trace").cast(KEY_DTYPE)],
            right_on=["file", "trace"], how="semi",
        )  # fmt: skip


def select_traces(
    specs: Sequence[str],
    *,
    where: Mapping[str, str],
    on_error: OnError = "raise",
    cache_dir: Path | str | None = None,
    cache: bool = True,
) -> Selection:
    """Resolve paths and ``FILE#N`` specs, then apply ``where`` (see the module docstring);
    the files' index is kept in the cache in ``cache_dir`` (default
    :func:`quicsm.engine.cache.default_cache_dir`; none with ``cache=False``).

    Raises :class:`InputError` when a named trace does not exist (saying how many the file has)
    or when nothing is left."""
    from quicsm.extract.read import trace_id
    from quicsm.qlog.paths import expand_paths

    split = [split_trace_spec(s) for s in specs]
    paths = list(dict.fromkeys(p for p, _ in split))
    if not paths:
        raise InputError("no input paths given")
    if not where and all(i is None for _, i in split):
        return Selection(paths, None)
    indexed = trace_index(paths, on_error=on_error, cache_dir=cache_dir, cache=cache)
    traces = labelled_traces(indexed, where={})
    whole: set[str] = set()
    wanted: dict[str, str] = {}  # trace id -> spec
    for (path, index), spec in zip(split, specs, strict=True):
        files = [str(f) for f in expand_paths([path])]
        if index is None:
            whole.update(files)
            continue
        if len(files) != 1:
            raise InputError(f"{spec!r}: FILE#N needs one file, but {path!r} names {len(files)}")
        # qlog trace ids are "<file>#<n>"; a transitions table's are its own, taken in order
        ids = traces.filter(pl.col("file") == files[0])["trace"].to_list()
        qlog = any(i.startswith(files[0] + "#") for i in ids)
        tid = trace_id(files[0], index) if qlog else (ids[index] if index < len(ids) else "")
        if tid not in ids:
            n = len(ids)
            raise InputError(
                f"{spec!r}: no such trace; {files[0]} holds {n} trace{'s' * (n != 1)}"
                + (f" (#0 to #{n - 1})" if n else "")
            )
        wanted[tid] = spec
    chosen = traces.filter(pl.col("file").is_in(list(whole)) | pl.col("trace").is_in(list(wanted)))
    if where:
        narrowed = filter_traces(chosen, where)
        if narrowed.height == 0:
            text = ", ".join(f"{k}={v}" for k, v in where.items())
            hint = where_hint(chosen, where)
            raise InputError(
                f"no traces match --where {text} under {', '.join(specs)}"
                + (f" ({hint})" if hint else "")
            )
        chosen = narrowed
    keys = chosen.select(pl.col("file", "trace").cast(pl.String))
    picked = indexed.with_columns(pl.col("file", "trace").cast(pl.String)).join(
        keys, on=["file", "trace"], how="semi", maintain_order="left"
    )
    return Selection(paths, chosen, spans_of(picked))
