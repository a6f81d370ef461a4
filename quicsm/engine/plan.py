"""Cut a file list into batches: the unit of work of every engine.

Batches depend only on the files (their order and sizes), never on the engine or the number of
workers, so every engine computes the same partitions and merges them in the same order — which
is what makes their answers identical.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

#: at most this many files per batch ...
BATCH_FILES: Final[int] = 256
#: ... and at most this many bytes (a larger file is a batch of its own)
BATCH_BYTES: Final[int] = 16 << 20


@dataclass(frozen=True)
class Batch:
    """Files read by one task, in input order; ``index`` is the batch's place in the run."""

    index: int
    files: tuple[str, ...]
    sizes: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return sum(self.sizes)


def plan_batches(
    files: Sequence[str],
    sizes: Sequence[int],
    *,
    max_files: int = BATCH_FILES,
    max_bytes: int = BATCH_BYTES,
) -> list[Batch]:
    """Consecutive runs of ``files`` with at most ``max_files`` files and ``max_bytes`` bytes
    each (a single file larger than ``max_bytes`` forms its own batch)."""
    if len(files) != len(sizes):
        raise ValueError("one size per file is needed")
    if max_files < 1 or max_bytes < 1:
        raise ValueError("batch limits must be positive")
    batches: list[Batch] = []
    current: list[str] = []
    current_sizes: list[int] = []
    total = 0
    for file, size in zip(files, sizes, strict=True):
        if current and (len(current) >= max_files or total + size > max_bytes):
            batches.append(Batch(len(batches), tuple(current), tuple(current_sizes)))
            current, current_sizes, total = [], [], 0
        current.append(file)
        current_sizes.append(size)
        total += size
    if current:
        batches.append(Batch(len(batches), tuple(current), tuple(current_sizes)))
    return batches
