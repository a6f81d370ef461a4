"""Integer-coded, deduplicated event logs: the input of every inference step.

A log of totally ordered traces is kept as flat numpy arrays:

- ``labels``: the event types, ``labels[c]`` is the name of code ``c``;
- ``codes``: the events of every *distinct* trace, concatenated;
- ``offsets``: trace ``t`` is ``codes[offsets[t]:offsets[t + 1]]``;
- ``weights``: how many input traces had exactly that sequence.

Identical traces are merged (this is exact for Synoptic-style inference: two events at the
same position of identical traces always end up in the same partition, see
``docs/synoptic.md``). Distinct traces are sorted lexicographically by their code sequence,
so every later step is independent of the order the traces came in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from quicsm.core.errors import InputError
from quicsm.core.states import CANONICAL_STATES

#: names of the two dummy events every trace starts and ends with (Synoptic's spelling).
INITIAL = "INITIAL"
TERMINAL = "TERMINAL"

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class EventLog:
    """Deduplicated traces of integer-coded events (see the module docstring)."""

    labels: tuple[str, ...]
    codes: npt.NDArray[np.int32]
    offsets: IntArray
    weights: IntArray

    def __post_init__(self) -> None:
        if len(self.offsets) != len(self.weights) + 1:
            raise InputError("offsets must have one entry more than weights")
        if len(self.codes) != (int(self.offsets[-1]) if len(self.offsets) else 0):
            raise InputError("offsets do not cover the codes")
        if INITIAL in self.labels or TERMINAL in self.labels:
            raise InputError(f"event types may not be named {INITIAL} or {TERMINAL}")
        if len(self.weights) and int(np.diff(self.offsets).min()) < 1:
            raise InputError("every trace needs at least one event")

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def from_sequences(
        cls, traces: Iterable[Sequence[str]], *, label_order: Sequence[str] | None = None
    ) -> EventLog:
        """Build a log from traces given as sequences of event-type names.

        ``label_order`` fixes the order of the codes (default: alphabetical); it must name
        every event type that occurs.
        """
        seqs = [list(t) for t in traces]
        for i, seq in enumerate(seqs):
            if not seq:
                raise InputError(f"trace {i} is empty: every trace needs at least one event")
        present = {e for seq in seqs for e in seq}
        labels = _order_labels(present, label_order)
        index = {name: code for code, name in enumerate(labels)}
        flat = np.fromiter((index[e] for seq in seqs for e in seq), dtype=np.int32)
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
        return cls.from_codes(labels, flat, lengths)

    @classmethod
    def from_codes(
        cls,
        labels: Sequence[str],
        codes: npt.ArrayLike,
        lengths: npt.ArrayLike,
        *,
        weights: npt.ArrayLike | None = None,
    ) -> EventLog:
        """Build a log from flat codes and per-trace lengths, merging identical traces."""
        flat = np.asarray(codes, dtype=np.int32)
        lens = np.asarray(lengths, dtype=np.int64)
        w = (
            np.ones(len(lens), dtype=np.int64)
            if weights is None
            else np.asarray(weights, dtype=np.int64)
        )
        if len(w) != len(lens):
            raise InputError("one weight per trace is needed")
        if int(lens.sum()) != len(flat):
            raise InputError("trace lengths do not add up to the number of events")
        if len(lens) and int(lens.min()) < 1:
            raise InputError("every trace needs at least one event")
        if len(flat) and (int(flat.min()) < 0 or int(flat.max()) >= len(labels)):
            raise InputError("event codes out of range of the labels")
        return _dedupe(tuple(labels), flat, lens, w)

    @classmethod
    def from_transitions(cls, df: pl.DataFrame) -> EventLog:
        """Build a log from a transitions frame: one trace per ``trace`` value, its events the
        ``state`` column ordered by ``time_ms`` (input order breaks ties)."""
        missing = {"trace", "time_ms", "state"} - set(df.columns)
        if missing:
            raise InputError(
                f"transitions need columns trace, time_ms, state; missing {sorted(missing)}"
            )
        if df.height == 0:
            return cls.from_codes((), [], [])
        nulls = df.select(pl.col("trace", "time_ms", "state").null_count()).row(0)
        if any(nulls):
            raise InputError(
                "transitions have nulls in trace/time_ms/state: "
                + ", ".join(
                    f"{c}={n}" for c, n in zip(("trace", "time_ms", "state"), nulls, strict=True)
                )
            )
        state = df.get_column("state")
        if isinstance(state.dtype, pl.Enum):
            # physical codes index the enum's categories: no string work on every row
            categories = state.dtype.categories.to_list()
            physical = state.to_physical().to_numpy().astype(np.int64)
            used = np.flatnonzero(np.bincount(physical, minlength=len(categories)))
            labels = _order_labels({categories[i] for i in used}, None)
            lookup = np.full(len(categories), -1, dtype=np.int64)
            lookup[[categories.index(name) for name in labels]] = np.arange(len(labels))
            codes = lookup[physical]
        else:
            names = state.cast(pl.String)
            labels = _order_labels(set(names.unique().to_list()), None)
            codes = names.replace_strict(
                {name: i for i, name in enumerate(labels)}, return_dtype=pl.Int64
            ).to_numpy()
        trace = df.get_column("trace").cast(pl.String)
        time_ms = df.get_column("time_ms").cast(pl.Float64)
        frame = pl.DataFrame({"trace": trace, "time_ms": time_ms, "code": codes})
        if not _grouped_in_time_order(frame):
            frame = frame.with_row_index("_order").sort(["trace", "time_ms", "_order"])
        lengths = frame.select(pl.col("trace").rle().struct.field("len")).to_series()
        return cls.from_codes(labels, frame.get_column("code").to_numpy(), lengths.to_numpy())

    # -- views -------------------------------------------------------------------------------

    @property
    def n_traces(self) -> int:
        """Number of input traces (weights included)."""
        return int(self.weights.sum())

    @property
    def n_unique(self) -> int:
        return len(self.weights)

    @property
    def n_events(self) -> int:
        """Number of input events (weights included)."""
        return int((np.diff(self.offsets) * self.weights).sum())

    def trace(self, t: int) -> list[str]:
        return [self.labels[c] for c in self.codes[self.offsets[t] : self.offsets[t + 1]]]

    def sequences(self) -> list[list[str]]:
        """The distinct traces (each once, in canonical order) as lists of names."""
        return [self.trace(t) for t in range(self.n_unique)]

    def event_trace(self) -> IntArray:
        """Index of the distinct trace of every event in ``codes``."""
        return np.repeat(np.arange(self.n_unique, dtype=np.int64), np.diff(self.offsets))

    def event_weights(self) -> IntArray:
        """Weight of every event in ``codes`` (the weight of its trace)."""
        return np.repeat(self.weights, np.diff(self.offsets))


def _grouped_in_time_order(frame: pl.DataFrame) -> bool:
    """Whether each trace's rows are contiguous, traces sorted, and times non-decreasing."""
    if not frame.get_column("trace").is_sorted():
        return False
    same = pl.col("trace") == pl.col("trace").shift(1)
    backwards = frame.select((same & (pl.col("time_ms") < pl.col("time_ms").shift(1))).any())
    return not bool(backwards.item())


def _order_labels(present: set[str], label_order: Sequence[str] | None) -> tuple[str, ...]:
    if label_order is not None:
        missing = present - set(label_order)
        if missing:
            raise InputError(f"label_order misses event types {sorted(missing)}")
        return tuple(e for e in dict.fromkeys(label_order) if e in present)
    canonical = [s for s in CANONICAL_STATES if s in present]
    if len(canonical) == len(present):
        return tuple(canonical)
    return tuple(sorted(present))


def _dedupe(
    labels: tuple[str, ...], flat: npt.NDArray[np.int32], lens: IntArray, w: IntArray
) -> EventLog:
    if len(lens) == 0:
        return EventLog(labels, flat[:0], np.zeros(1, dtype=np.int64), w[:0])
    # Exact deduplication: group by the whole code sequence (a list column), then sort the
    # distinct sequences lexicographically (a prefix sorts before its extensions).
    seqs = (
        pl.DataFrame({"t": np.repeat(np.arange(len(lens), dtype=np.int64), lens), "c": flat})
        .group_by("t", maintain_order=True)
        .agg(pl.col("c").alias("seq"))
        .with_columns(pl.Series("w", w))
    )
    uniq = seqs.group_by("seq").agg(pl.col("w").sum()).sort("seq")
    seq = uniq.get_column("seq")
    ulens = seq.list.len().cast(pl.Int64).to_numpy()
    uoffsets = np.zeros(len(ulens) + 1, dtype=np.int64)
    np.cumsum(ulens, out=uoffsets[1:])
    codes = seq.explode().cast(pl.Int32).to_numpy()
    weights = uniq.get_column("w").to_numpy().astype(np.int64)
    return EventLog(labels, np.ascontiguousarray(codes), uoffsets, weights)
