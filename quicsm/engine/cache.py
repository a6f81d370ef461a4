"""The persistent cache of extracted partitions, keyed by file content.

Layout under the cache directory (default ``$QUICSM_CACHE_DIR``, else
``$XDG_CACHE_HOME/quicsm``, else ``~/.cache/quicsm``)::

    <fingerprint>-<strict|lenient>-<states>/
        index.parquet                  key -> part: where each file's rows are
        parts/<part>.transitions.parquet
        parts/<part>.traces.parquet
        parts/<part>.diagnostics.parquet   key, file, what reading it reported (JSON)
        metrics/<batch>.parquet        key + the metrics of a batch of files (reports, diffs)

A file's *key* hashes its bytes and the bytes of the ``run.json`` beside it
(whose fields become labels): the same content anywhere, under any name, is read once. The
*fingerprint* hashes the source of everything that turns bytes into rows (``quicsm.core``,
``quicsm.qlog``, ``quicsm.extract`` and the partition layout), so a changed reader never serves
stale rows. Rows of a cached file are stored with the path it had when it was read and are
renamed to the path it has now when they are loaded.

What reading a file reported (skipped records, truncation, unknown states, notes, states that
cannot be derived) is stored with its rows and reported again when they are loaded, with the
file's path then, so a run reports the same whether its files came from the cache or not.
Partitions are written under a temporary name and renamed, so a task that is run twice (a
worker lost mid-run) or two runs at once never leave a half-written partition. The index is
rewritten by the driver at the end of a run; when two runs race, one's new entries may be
lost, which only means those files are read again next time.

Clear the cache by deleting the directory (``rm -rf ~/.cache/quicsm``).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from functools import cache
from pathlib import Path
from typing import Final

import polars as pl

from quicsm.core.version import __version__

#: environment variable naming the cache directory
CACHE_ENV: Final[str] = "QUICSM_CACHE_DIR"
#: bump on any change of what a partition holds
PARTITION_FORMAT: Final[str] = "quicsm-partition/2"

INDEX_SCHEMA: Final[dict[str, pl.DataType]] = {"key": pl.String(), "part": pl.String()}


#: index frames read by this process: path -> ((mtime, size, inode), frame)
_INDEXES: dict[Path, tuple[tuple[int, int, int], pl.DataFrame]] = {}


def default_cache_dir() -> Path:
    """``$QUICSM_CACHE_DIR``, else ``$XDG_CACHE_HOME/quicsm``, else ``~/.cache/quicsm``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "quicsm"


@cache
def extractor_fingerprint() -> str:
    """Hash of the source code that turns bytes into rows, and of the partition format."""
    root = Path(__file__).resolve().parent.parent  # the quicsm package
    h = hashlib.blake2b(digest_size=8)
    h.update(PARTITION_FORMAT.encode())
    h.update(__version__.encode())
    for package in ("core", "qlog", "extract"):
        for path in sorted((root / package).rglob("*.py")):
            h.update(path.relative_to(root).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()


#: the key of a transitions table (CSV or Parquet): tables are read whole and never cached, so
#: their bytes are not hashed (hashing a 350 MB table took a tenth of reading it)
TABLE_KEY_PREFIX: Final = "table:"


def file_key(path: str) -> str:
    """The cache key of a file: its bytes and its ``run.json`` sidecar (formats are told by
    content, never by name). An uncompressed transitions table, which is never cached, is told
    from its first block and keyed by its path, size and modification time alone."""
    from quicsm.qlog.source import CSV, PARQUET, detect

    h = hashlib.blake2b(digest_size=16)
    p = Path(path)
    with p.open("rb") as f:
        chunk = f.read(1 << 20)
        if detect(chunk) in (CSV, PARQUET):
            st = os.fstat(f.fileno())
            return f"{TABLE_KEY_PREFIX}{p}:{st.st_size}:{st.st_mtime_ns}"
        while chunk:
            h.update(chunk)
            chunk = f.read(1 << 20)
    sidecar = p.parent / "run.json"
    h.update(b"\0run.json\0")
    if sidecar.is_file():
        h.update(sidecar.read_bytes())
    return h.hexdigest()


class PartitionCache:
    """One cache directory for one reading mode (strict or lenient, and where states come
    from)."""

    def __init__(self, directory: Path | str, *, lenient: bool, states: str = "hybrid") -> None:
        mode = "lenient" if lenient else "strict"
        self.root = Path(directory) / f"{extractor_fingerprint()}-{mode}-{states}"
        self.parts = self.root / "parts"
        self.index_path = self.root / "index.parquet"

    def index(self) -> pl.DataFrame:
        """key -> part of every cached file (empty if nothing is cached yet). A process reads
        the index once per version of the file, not once per task."""
        try:
            stat = self.index_path.stat()
        except OSError:
            return pl.DataFrame(schema=INDEX_SCHEMA)
        version = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        known = _INDEXES.get(self.index_path)
        if known is not None and known[0] == version:
            return known[1]
        try:
            frame = pl.read_parquet(self.index_path).cast(INDEX_SCHEMA)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - a damaged index only costs re-reading
            return pl.DataFrame(schema=INDEX_SCHEMA)
        _INDEXES[self.index_path] = (version, frame)
        return frame

    def lookup(self, keys: list[str]) -> dict[str, str]:
        """The part holding each of ``keys`` that is cached (and whose files still exist)."""
        if not keys:
            return {}
        found = self.index().filter(pl.col("key").is_in(keys))
        out = {}
        for key, part in found.iter_rows():
            if all(p.is_file() for p in self.paths(part)):
                out[key] = part
        return out

    def transitions_path(self, part: str) -> Path:
        return self.parts / f"{part}.transitions.parquet"

    def traces_path(self, part: str) -> Path:
        return self.parts / f"{part}.traces.parquet"

    def diagnostics_path(self, part: str) -> Path:
        return self.parts / f"{part}.diagnostics.parquet"

    def metrics_path(self, keys: list[str]) -> Path:
        """Where the metrics of a batch of files (their keys, in order) are kept: the rows of
        :func:`quicsm.extract.read.read_metrics` with each file's key."""
        name = hashlib.blake2b("\n".join(keys).encode(), digest_size=16).hexdigest()
        return self.root / "metrics" / f"{name}.parquet"

    def write_frame(self, frame: pl.DataFrame, path: Path) -> None:
        """Store a frame at ``path`` whole or not at all (a full or read-only cache only means
        it is read again next time)."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
            frame.write_parquet(tmp, compression="zstd", statistics=True)
            os.replace(tmp, path)
        except OSError:
            return

    def paths(self, part: str) -> tuple[Path, Path, Path]:
        return self.transitions_path(part), self.traces_path(part), self.diagnostics_path(part)

    def write(
        self, transitions: pl.DataFrame, traces: pl.DataFrame, diagnostics: pl.DataFrame
    ) -> str:
        """Store a partition (frames with a ``key`` column; ``diagnostics`` has one row per
        file, files without traces included); returns its name. The name hashes the keys it
        holds, so writing the same files twice writes the same partition."""
        keys = sorted(set(diagnostics.get_column("key").to_list()))
        part = hashlib.blake2b("\n".join(keys).encode(), digest_size=16).hexdigest()
        self.parts.mkdir(parents=True, exist_ok=True)
        for frame, path in zip((transitions, traces, diagnostics), self.paths(part), strict=True):
            if path.is_file():
                continue
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
            frame.write_parquet(tmp, compression="zstd", statistics=True)
            os.replace(tmp, path)
        return part

    def record(self, entries: pl.DataFrame) -> None:
        """Add ``key, part`` entries to the index (rewritten atomically)."""
        if entries.height == 0:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        merged = pl.concat([self.index(), entries.cast(INDEX_SCHEMA)]).unique(  # type: ignore[arg-type]
            "key", keep="first", maintain_order=True
        )
        tmp = self.index_path.with_name(f".index.{uuid.uuid4().hex}.tmp")
        merged.write_parquet(tmp)
        os.replace(tmp, self.index_path)
