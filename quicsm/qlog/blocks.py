"""A file's decompressed content as a sequence of immutable blocks, within a budget.

Every block is a fresh ``bytes`` object: a consumer may keep any block (or slice of one) for as
long as it likes, and joining blocks gives the file's content. (An earlier reader reused one
``bytearray`` for every block, so ``b"".join(blocks)`` silently repeated the last block.)

Decompression is bounded (:class:`ReadLimits`): compressed input is fed in small pieces so that
one call can never inflate more than :data:`FEED_BYTES` times the best ratio zstd or deflate can
reach, the total decompressed size of a file and its expansion ratio are capped, and the parsers
cap the size of one record (:attr:`ReadLimits.max_record_bytes`). Exceeding a limit is a
:class:`quicsm.core.errors.QlogError` naming the file and the limit.

A command that reads the same files several times (``diff`` and ``report`` read each for its
states, its metrics and its packets) opens :func:`keep_decompressed`: while it is open, a
compressed file decompressed to its end is kept (its blocks, within a byte budget) and read
again from memory, so each file is decompressed once per command; and where each trace of a
file lies (:func:`keep_spans`, found by a whole read that reported nothing) is kept, so a
later read of a few of its traces reads their bytes only.
"""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import zstandard

from quicsm.core.errors import InputError, QlogError
from quicsm.qlog.paths import PathLike, Span, check_name, shown

#: decompressed bytes handed to the parser at a time
BLOCK_SIZE = 8 << 20

#: compressed bytes fed to a decompressor per call: zstd inflates a piece at most ~32768x, so
#: one call produces at most ~32 MiB
FEED_BYTES = 1 << 10

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: zstd skippable frames (RFC 8878 section 3.1.2): magic 0x184D2A50 to 0x184D2A5F, little-endian
_SKIPPABLE_TAIL = b"\x2a\x4d\x18"


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


@dataclass(frozen=True)
class ReadLimits:
    """Caps that keep reading a hostile file bounded in memory and time.

    - ``max_decompressed_bytes``: total decompressed bytes of one file (``None``: no cap);
    - ``max_ratio``: decompressed / compressed bytes, checked once ``ratio_after_bytes`` have
      been inflated (real qlog compresses 10-20x; decompression bombs reach thousands);
    - ``max_record_bytes``: one JSON-SEQ/NDJSON record, one contained-JSON event or member,
      one CSV line.
    """

    max_decompressed_bytes: int | None = 64 << 30
    max_ratio: float = 1000.0
    ratio_after_bytes: int = 64 << 20
    max_record_bytes: int = 64 << 20


DEFAULT_LIMITS = ReadLimits()


def record_too_large(path: Path | str, size: int, limits: ReadLimits) -> QlogError:
    return QlogError(
        str(path),
        f"records of at most {_mib(limits.max_record_bytes)} (ReadLimits.max_record_bytes)",
        got=f"a record of more than {_mib(size)}",
    )


def is_zstd(magic: bytes) -> bool:
    return magic == ZSTD_MAGIC or (
        len(magic) == 4 and magic[1:] == _SKIPPABLE_TAIL and magic[0] & 0xF0 == 0x50
    )


#: called with the number of bytes of the file just read (see :func:`count_bytes`)
_byte_counter: Callable[[int], None] | None = None


@contextmanager
def count_bytes(callback: Callable[[int], None]) -> Iterator[None]:
    """Call ``callback(n)`` whenever ``n`` more bytes of a file (as stored, compressed or not)
    were read, while the block is active: how a progress bar advances inside large files."""
    global _byte_counter
    previous, _byte_counter = _byte_counter, callback
    try:
        yield
    finally:
        _byte_counter = previous


def open_input(path: Path) -> BinaryIO:
    """``path`` opened for reading, unbuffered, if it is a regular file with a name quicsm can
    use (:func:`quicsm.qlog.paths.check_name`); anything else is an ``InputError`` naming it.
    Opened without blocking, so a FIFO with no writer is refused instead of waited for."""
    text = check_name(path)
    try:
        fd = os.open(text, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise InputError(f"{shown(path)}: cannot read: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(
                f"{shown(path)}: cannot read: not a regular file (a directory, FIFO, device or "
                "socket is not read)"
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


#: what :func:`keep_decompressed` keeps by default: the decompressed bytes of every file kept at
#: once (a file that would pass it is decompressed again each time it is read, as without it)
KEEP_BYTES = 256 << 20


@dataclass
class _Kept:
    """The decompressed blocks of the files read to their end while :func:`keep_decompressed`
    is open, keyed by what identifies their content and how they were read."""

    budget: int
    held: int = 0
    contents: dict[tuple[object, ...], tuple[list[bytes], int]] = field(default_factory=dict)
    #: each trace's span in a file's decompressed content, by the file's identity
    spans: dict[tuple[object, ...], tuple[Span, ...]] = field(default_factory=dict)


#: the store of the innermost :func:`keep_decompressed` open (None: nothing is kept)
_kept: _Kept | None = None


@contextmanager
def keep_decompressed(max_bytes: int | None = None) -> Iterator[None]:
    """While open, each compressed file decompressed to its end without a problem keeps its
    blocks (at most ``max_bytes``, default :data:`KEEP_BYTES`, decompressed bytes of all files
    together; a file that does not fit is not kept), and a later
    :meth:`DecompressedFile.blocks` of the same content (the same path, device, inode, size and
    modification time, block size and limits) yields them again instead of decompressing it:
    the same blocks, so every reader reads the same bytes. A read stopped before the end of
    its file, a stream that ends early or fails, and a file not compressed keep nothing.
    Everything kept is let go when the block is left."""
    global _kept
    previous, _kept = _kept, _Kept(KEEP_BYTES if max_bytes is None else max_bytes)
    try:
        yield
    finally:
        _kept = previous


def _identity(path: PathLike, st: os.stat_result) -> tuple[object, ...]:
    """What tells one content of a file from another while a command runs."""
    return (os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def keep_spans(path: PathLike, spans: list[Span]) -> None:
    """Where each trace of ``path`` lies in its decompressed content (``(trace index, start,
    end)``, as :attr:`quicsm.qlog.source.FileRead.spans`), as a whole read of the file found it
    without reporting anything, kept while :func:`keep_decompressed` is open (else nothing is
    kept)."""
    if _kept is None:
        return
    try:
        _kept.spans[_identity(path, os.stat(path))] = tuple(spans)
    except OSError:
        return


def kept_spans(path: PathLike) -> tuple[Span, ...] | None:
    """The spans :func:`keep_spans` kept of the content ``path`` has now, else None."""
    if _kept is None:
        return None
    try:
        return _kept.spans.get(_identity(path, os.stat(path)))
    except OSError:
        return None


class DecompressedFile:
    """A file's decompressed content in blocks; notes a compressed stream that ends early.

    :meth:`blocks` may be called again to re-read the file from its start.
    """

    def __init__(
        self, path: Path, *, block_size: int = BLOCK_SIZE, limits: ReadLimits = DEFAULT_LIMITS
    ) -> None:
        self.path = path
        self.block_size = block_size
        self.limits = limits
        self.cut_short = False
        try:
            with open_input(path) as f:
                magic = f.read(4)
        except OSError as exc:
            raise InputError(f"{shown(path)}: cannot read: {exc.strerror or exc}") from None
        self.compression = (
            "gzip" if magic.startswith(GZIP_MAGIC) else "zstd" if is_zstd(magic) else None
        )

    def blocks(self) -> Iterator[bytes]:
        """Fresh ``bytes`` blocks of at most ``block_size`` bytes (never an empty block)."""
        try:
            with open_input(self.path) as raw:
                key = self._kept_key(raw) if self.compression is not None else None
                kept = _kept.contents.get(key) if _kept is not None and key else None
                if kept is not None:  # decompressed before while keep_decompressed is open
                    blocks, stored = kept
                    if _byte_counter is not None:
                        _byte_counter(stored)
                    yield from blocks
                    return
                if self.compression is None:
                    # a small file is read in one call of its own size, not a full block
                    size = os.fstat(raw.fileno()).st_size
                    want = min(self.block_size, max(1 << 16, size + 1))
                    while block := raw.read(want):
                        if _byte_counter is not None:
                            _byte_counter(len(block))
                        yield block
                        del block  # freed before the next read (when the consumer drops it)
                elif key is None or _kept is None:
                    yield from self._decompress(raw)
                else:
                    yield from self._decompress_kept(raw, key, _kept)
        except (OSError, zlib.error, zstandard.ZstdError) as exc:
            if isinstance(exc, OSError):
                raise InputError(
                    f"{shown(self.path)}: cannot read: {exc.strerror or exc}"
                ) from None
            raise QlogError(
                str(self.path), f"a readable {self.compression} stream", got=str(exc)
            ) from None

    def _kept_key(self, raw: BinaryIO) -> tuple[object, ...] | None:
        """What identifies this file's decompressed blocks while :func:`keep_decompressed` is
        open (None: it is not open)."""
        if _kept is None:
            return None
        return (*_identity(self.path, os.fstat(raw.fileno())), self.block_size, self.limits)

    def _decompress_kept(
        self, raw: BinaryIO, key: tuple[object, ...], kept: _Kept
    ) -> Iterator[bytes]:
        """:meth:`_decompress`, its blocks kept in ``kept`` when the stream was read to its end
        whole (not cut short) and they fit in what ``kept`` may still hold."""
        blocks: list[bytes] | None = []
        size = 0
        for block in self._decompress(raw):
            if blocks is not None:
                size += len(block)
                if kept.held + size > kept.budget:
                    blocks = None  # it does not fit: streamed, as without the store
                else:
                    blocks.append(block)
            yield block
            del block
        if blocks is not None and not self.cut_short and key not in kept.contents:
            kept.contents[key] = (blocks, os.fstat(raw.fileno()).st_size)
            kept.held += size

    def _decompressor(self) -> Any:
        if self.compression == "gzip":
            return zlib.decompressobj(wbits=31)
        return zstandard.ZstdDecompressor().decompressobj()

    def _check_budget(self, produced: int, consumed: int) -> None:
        limits = self.limits
        cap = limits.max_decompressed_bytes
        if cap is not None and produced > cap:
            raise QlogError(
                str(self.path),
                f"at most {_mib(cap)} decompressed (ReadLimits.max_decompressed_bytes)",
                got=f"more than {_mib(produced)}",
            )
        if produced >= limits.ratio_after_bytes and produced > limits.max_ratio * max(consumed, 1):
            raise QlogError(
                str(self.path),
                f"a {self.compression} stream expanding at most {limits.max_ratio:g}x "
                "(ReadLimits.max_ratio; a decompression bomb?)",
                got=f"{produced / max(consumed, 1):.0f}x after {_mib(produced)}",
            )

    def _decompress(self, raw: BinaryIO) -> Iterator[bytes]:
        """Decompress frame after frame (concatenated gzip members / zstd frames, zstd skippable
        frames); output already produced is kept when the compressed stream stops mid-frame."""
        d = self._decompressor()
        gzip = self.compression == "gzip"
        started = False
        produced = consumed = 0
        pending: list[bytes] = []
        pending_size = 0
        block_size = self.block_size
        while chunk := raw.read(1 << 16):
            if _byte_counter is not None:
                _byte_counter(len(chunk))
            for i in range(0, len(chunk), FEED_BYTES):
                data = chunk[i : i + FEED_BYTES]
                consumed += len(data)
                while data:
                    started = True
                    if gzip:
                        out = d.decompress(data, block_size)
                        data = d.unconsumed_tail
                    else:
                        out = d.decompress(data)
                        data = b""
                    if out:
                        produced += len(out)
                        self._check_budget(produced, consumed)
                        pending.append(out)
                        pending_size += len(out)
                        if pending_size >= block_size:
                            joined = b"".join(pending)
                            for j in range(0, len(joined) - block_size + 1, block_size):
                                yield joined[j : j + block_size]
                            rest = len(joined) % block_size
                            pending = [joined[len(joined) - rest :]] if rest else []
                            pending_size = rest
                    if d.eof:
                        data = d.unused_data + data
                        d = self._decompressor()
                        started = False
        if pending_size:
            yield b"".join(pending)
        if started and not d.eof:
            self.cut_short = True
