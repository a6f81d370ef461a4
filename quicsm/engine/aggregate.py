"""Mergeable aggregates: the statistics and the trace set of a partition, combined exactly.

A partition's transitions are reduced to sums that add up over disjoint sets of traces (every
trace lives in one file, so in one partition):

- per state: visits, time, summed share of its trace's duration, traces, censored visits;
- per transition pair and per source: the sums behind the cluster-robust intervals of
  :func:`quicsm.stats.descriptive.probabilities_from_sums`;
- the dwell times as *value counts* per state (distinct value, how often): the quantiles
  computed from them are exactly numpy's linear quantiles of the pooled values
  (:func:`quantiles_from_counts`), and the table is as small as the number of distinct values;
- the **deduplicated, weighted trace set**: every distinct state sequence once, with how many
  traces had it (its weight) and the time spent at each of its positions summed over those
  traces. Synoptic-style inference runs on it (it is exact there: identical traces always end
  up in the same partitions), and :meth:`Aggregate.node_times` attributes time to model nodes
  from it.

Counts merge bit for bit whatever the partitioning. Float sums are added in partition order,
so the result is the same for every engine (the batches do not depend on the engine); against
one pass over the whole corpus they differ only in the last bits of a float.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import polars as pl

from quicsm.core.states import CANONICAL_STATES
from quicsm.model.replay import NODE_TIMES_SCHEMA, replay
from quicsm.model.synoptic import EventLog
from quicsm.stats.descriptive import (
    DWELL_SUMMARY_SCHEMA,
    Stats,
    Visits,
    probabilities_from_sums,
    time_in_state_from_sums,
)

_N_STATES: Final[int] = len(CANONICAL_STATES)
#: label codes take 5 bits (INITIAL, the states, TERMINAL: at most 32), pairs 10
_LABEL_BITS: Final[int] = 5
_SOURCES: Final[int] = 1 << _LABEL_BITS
_PAIRS: Final[int] = _SOURCES * _SOURCES
_QUANTILES: Final[tuple[float, float, float]] = (0.1, 0.5, 0.9)
#: the label code of TERMINAL in pairs (INITIAL is 0, the states 1..13)
_TERMINAL: Final[int] = _N_STATES + 1

DWELL_COUNTS_SCHEMA: Final[dict[str, pl.DataType]] = {
    "code": pl.UInt8(),
    "dwell_ms": pl.Float64(),
    "count": pl.Int64(),
}


@dataclass
class DistinctTrace:
    """One distinct state sequence: how many traces had it, and their summed time per position."""

    weight: int
    dwell_ms: np.ndarray  # float64, one entry per position


@dataclass(frozen=True)
class Sequences:
    """Distinct state sequences as flat arrays (no object per sequence): ``codes`` (UInt8, of
    STATE_DTYPE) one sequence after another, ``lengths``, ``weights`` (traces that had each)
    and ``dwell_ms`` (their time at each position, summed; aligned with ``codes``)."""

    codes: np.ndarray
    lengths: np.ndarray
    weights: np.ndarray
    dwell_ms: np.ndarray

    @classmethod
    def empty(cls) -> Sequences:
        return cls(np.zeros(0, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))

    def __len__(self) -> int:
        return len(self.lengths)

    def as_dict(self) -> dict[bytes, DistinctTrace]:
        """Sequence (codes as bytes) -> its weight and summed times, in this order."""
        out: dict[bytes, DistinctTrace] = {}
        start = 0
        for n, w in zip(self.lengths.tolist(), self.weights.tolist(), strict=True):
            out[self.codes[start : start + n].tobytes()] = DistinctTrace(
                w, self.dwell_ms[start : start + n].copy()
            )
            start += n
        return out

    def in_byte_order(self) -> Sequences:
        """The sequences sorted as their codes compare as bytes (a prefix before the
        sequences it starts)."""
        if len(self) < 2:
            return self
        seq = (
            pl.DataFrame({"s": _sequence_ids(self.lengths), "c": self.codes})
            .group_by("s", maintain_order=True)
            .agg("c")
            .get_column("c")
        )
        order = seq.arg_sort().to_numpy()
        rows = _rows_of(self.lengths, order)
        return Sequences(
            self.codes[rows], self.lengths[order], self.weights[order], self.dwell_ms[rows]
        )


def _sequence_ids(lengths: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)


def _rows_of(lengths: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The rows of the sequences ``order`` picks, in that order."""
    starts = np.cumsum(lengths) - lengths
    picked = lengths[order]
    return np.repeat(starts[order] - (np.cumsum(picked) - picked), picked) + np.arange(
        int(picked.sum()), dtype=np.int64
    )


def _zeros(n: int, dtype: type = np.int64) -> np.ndarray:
    return np.zeros(n, dtype=dtype)


@dataclass
class Aggregate:
    """Sums over a set of traces (see the module docstring); :meth:`merge` adds two."""

    traces: int = 0
    visits: int = 0
    positive: int = 0
    duration_ms: float = 0.0
    state_visits: np.ndarray = field(default_factory=lambda: _zeros(_N_STATES))
    state_ms: np.ndarray = field(default_factory=lambda: _zeros(_N_STATES, np.float64))
    state_share: np.ndarray = field(default_factory=lambda: _zeros(_N_STATES, np.float64))
    state_traces: np.ndarray = field(default_factory=lambda: _zeros(_N_STATES))
    state_censored: np.ndarray = field(default_factory=lambda: _zeros(_N_STATES))
    pair_count: np.ndarray = field(default_factory=lambda: _zeros(_PAIRS))
    pair_traces: np.ndarray = field(default_factory=lambda: _zeros(_PAIRS))
    pair_syy: np.ndarray = field(default_factory=lambda: _zeros(_PAIRS, np.float64))
    pair_syn: np.ndarray = field(default_factory=lambda: _zeros(_PAIRS, np.float64))
    source_n: np.ndarray = field(default_factory=lambda: _zeros(_SOURCES, np.float64))
    source_snn: np.ndarray = field(default_factory=lambda: _zeros(_SOURCES, np.float64))
    source_m: np.ndarray = field(default_factory=lambda: _zeros(_SOURCES, np.float64))
    #: code (UInt8, of STATE_DTYPE), dwell_ms, count — sorted by code, then dwell
    dwell_counts: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(schema=DWELL_COUNTS_SCHEMA)
    )
    #: the distinct sequences with their weights and summed times
    distinct_sequences: Sequences = field(default_factory=Sequences.empty)
    #: the distinct sequences in byte order, and the sequences they were sorted from
    _in_order: tuple[Sequences, Sequences] | None = field(default=None, repr=False, compare=False)

    def _byte_order(self) -> Sequences:
        """:meth:`Sequences.in_byte_order` of the distinct sequences, sorted once."""
        seqs = self.distinct_sequences
        if self._in_order is None or self._in_order[0] is not seqs:
            self._in_order = (seqs, seqs.in_byte_order())
        return self._in_order[1]

    @property
    def sequences(self) -> dict[bytes, DistinctTrace]:
        """The distinct sequences as a dict: state codes as bytes -> weight and summed times."""
        return self.distinct_sequences.as_dict()

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def of(cls, transitions: pl.DataFrame) -> Aggregate:
        """The aggregate of a transitions frame (:data:`quicsm.core.frames.TRANSITIONS_SCHEMA`)."""
        if transitions.height == 0:
            return cls()
        v = Visits(transitions)
        f = v.frame
        code = f.get_column("code").to_numpy()
        dwell = f.get_column("dwell_ms").to_numpy()
        total = f.get_column("total_ms").to_numpy()
        first = f.get_column("first").to_numpy()
        last = f.get_column("last").to_numpy()
        c = _chain_sums(f.get_column("tid").to_numpy(), code, first, last, v.n_traces)
        share = np.divide(dwell, total, out=np.zeros_like(dwell), where=total > 0)
        index = code.astype(np.intp)  # what bincount takes (converted once, not per call)
        return cls(
            traces=v.n_traces,
            visits=v.n_visits,
            positive=int(np.count_nonzero(first & (total > 0))),
            duration_ms=float(dwell.sum()),
            state_visits=np.bincount(index, minlength=_N_STATES).astype(np.int64),
            state_ms=np.bincount(index, weights=dwell, minlength=_N_STATES),
            state_share=np.bincount(index, weights=share, minlength=_N_STATES),
            state_traces=c.state_traces,
            state_censored=np.bincount(code[last], minlength=_N_STATES).astype(np.int64),
            pair_count=c.count,
            pair_traces=c.traces,
            pair_syy=c.syy,
            pair_syn=c.syn,
            source_n=c.n,
            source_snn=c.snn,
            source_m=c.m,
            dwell_counts=_value_counts(code, dwell),
            distinct_sequences=_sequences(code, dwell, first),
        )

    def merge(self, other: Aggregate) -> Aggregate:
        """The aggregate of both sets of traces (``self``'s first: floats are added in order)."""
        return merge_all([self, other])

    # -- views ---------------------------------------------------------------------------------

    @property
    def distinct(self) -> int:
        """Number of distinct state sequences (the size of the trace set inference runs on)."""
        return len(self.distinct_sequences)

    def stats(self) -> Stats:
        """The statistics :func:`quicsm.stats.descriptive.compute_stats` gives for the traces."""
        return Stats(
            traces=self.traces,
            visits=self.visits,
            duration_ms=self.duration_ms,
            time_in_state=time_in_state_from_sums(
                visits=self.state_visits,
                total_ms=self.state_ms,
                share_sum=self.state_share,
                traces=self.state_traces,
                grand_ms=self.duration_ms,
                positive=self.positive,
            ),
            transition_probabilities=probabilities_from_sums(
                count=self.pair_count,
                traces=self.pair_traces,
                syy=self.pair_syy,
                syn=self.pair_syn,
                n=self.source_n,
                snn=self.source_snn,
                m=self.source_m,
            ),
            dwell=self._dwell_summary(),
        )

    def _dwell_summary(self) -> pl.DataFrame:
        rows = []
        codes = self.dwell_counts.get_column("code").to_numpy()
        values = self.dwell_counts.get_column("dwell_ms").to_numpy()
        counts = self.dwell_counts.get_column("count").to_numpy()
        bounds = np.searchsorted(codes, np.arange(_N_STATES + 1))
        for state in np.flatnonzero(self.state_visits):
            lo, hi = bounds[state], bounds[state + 1]
            p10, p50, p90 = quantiles_from_counts(values[lo:hi], counts[lo:hi], _QUANTILES)
            n = int(self.state_visits[state])
            rows.append(
                (
                    CANONICAL_STATES[state],
                    n,
                    int(self.state_censored[state]),
                    float(self.state_ms[state]) / n,
                    p50,
                    p10,
                    p90,
                )
            )
        out = pl.DataFrame(rows, schema=list(DWELL_SUMMARY_SCHEMA), orient="row")
        return out.cast(DWELL_SUMMARY_SCHEMA)  # type: ignore[arg-type]

    def event_log(self) -> EventLog:
        """The deduplicated, weighted trace set as an :class:`EventLog` — the same log
        :meth:`EventLog.from_transitions` builds from all the traces."""
        if not len(self.distinct_sequences):
            return EventLog.from_codes((), [], [])
        seqs = self._byte_order()
        present = np.flatnonzero(self.state_visits)
        labels = tuple(CANONICAL_STATES[i] for i in present)
        lookup = np.full(_N_STATES, -1, dtype=np.int32)
        lookup[present] = np.arange(len(present), dtype=np.int32)
        # distinct already, and in the log's order: the codes of the states present keep
        # their order, so byte order is the order of the log's codes
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum(seqs.lengths, out=offsets[1:])
        return EventLog(labels, lookup[seqs.codes], offsets, seqs.weights.astype(np.int64))

    def node_times(self, nodes: pl.DataFrame, edges: pl.DataFrame) -> pl.DataFrame | None:
        """:func:`quicsm.model.replay.node_times` on the weighted trace set: each distinct
        sequence is replayed once and its visits count with their weight and summed time
        (sequences in byte order, so the sums are added in one fixed order)."""
        seqs = self._byte_order()
        if not len(seqs):
            return None
        lengths, codes = seqs.lengths, seqs.codes
        node = replay(Visits.of_sequences(codes, lengths), nodes, edges)
        if node is None:
            return None
        weight = np.repeat(seqs.weights.astype(np.float64), lengths)
        dwell = seqs.dwell_ms
        n_nodes = nodes.height
        counts = np.bincount(node, weights=weight, minlength=n_nodes)
        expected = np.zeros(n_nodes, dtype=np.float64)
        expected[nodes.get_column("id").to_numpy()] = nodes.get_column("events").to_numpy()
        if not np.array_equal(counts[2:], expected[2:]):
            return None  # the model's own assignment differs: do not pretend
        ms = np.bincount(node, weights=dwell, minlength=n_nodes)
        total = self.duration_ms
        out = pl.DataFrame(
            {"id": np.arange(n_nodes, dtype=np.int64), "seconds": ms / 1000.0, "ms": ms}
        ).with_columns(
            pl.when(pl.col("id") >= 2).then(pl.col("seconds")).alias("seconds"),
            pl.when((pl.col("id") >= 2) & pl.lit(total > 0))
            .then(pl.col("ms") / (total if total > 0 else 1.0))
            .alias("fraction"),
        )
        return out.select(list(NODE_TIMES_SCHEMA)).cast(NODE_TIMES_SCHEMA)  # type: ignore[arg-type]


_SUMMED = (
    "traces", "visits", "positive", "duration_ms", "state_visits", "state_ms", "state_share",
    "state_traces", "state_censored", "pair_count", "pair_traces", "pair_syy", "pair_syn",
    "source_n", "source_snn", "source_m",
)  # fmt: skip


class Merger:
    """Adds aggregates one at a time, in order (what :func:`merge_all` does), so a driver can
    fold results in as they arrive and keep none of them (their distinct sequences are merged
    every so often, as one group-by)."""

    def __init__(self) -> None:
        self._out = Aggregate()
        self._sequences: list[Sequences] = []
        self._pending = 0
        self._counts: list[pl.DataFrame] = []

    def add(self, part: Aggregate) -> None:
        out = self._out
        for name in _SUMMED:
            setattr(out, name, getattr(out, name) + getattr(part, name))
        self._sequences.append(part.distinct_sequences)
        self._pending += len(part.distinct_sequences.codes)
        if len(self._sequences) >= 64 and self._pending >= 4 * len(self._sequences[0].codes):
            self._sequences = [_merged(self._sequences)]  # keep the pending sequences small
            self._pending = len(self._sequences[0].codes)
        self._counts.append(part.dwell_counts)
        if len(self._counts) >= 64:  # keep the pending value counts small
            self._counts = [_grouped(self._counts)]

    def result(self) -> Aggregate:
        if len(self._sequences) == 1:  # one part's sequences are distinct already
            self._out.distinct_sequences = self._sequences[0]
        elif self._sequences:
            self._out.distinct_sequences = _merged(self._sequences)
        if len(self._counts) == 1:  # one part's value counts are grouped and sorted already
            self._out.dwell_counts = self._counts[0]
        elif self._counts:
            self._out.dwell_counts = _grouped(self._counts)
        return self._out


def _merged(parts: list[Sequences]) -> Sequences:
    """The distinct sequences of parts taken together, in the order of their first part (and
    place in it), the times of a sequence added in part order."""
    return _distinct(
        np.concatenate([p.codes for p in parts]),
        np.concatenate([p.lengths for p in parts]),
        np.concatenate([p.weights for p in parts]),
        np.concatenate([p.dwell_ms for p in parts]),
    )


def _grouped(counts: list[pl.DataFrame]) -> pl.DataFrame:
    return (
        pl.concat(counts)
        .group_by("code", "dwell_ms")
        .agg(pl.col("count").sum())
        .sort("code", "dwell_ms")
        .cast(DWELL_COUNTS_SCHEMA)  # type: ignore[arg-type]
    )


@dataclass
class _ChainSums:
    """The sums of the observed chain an aggregate keeps (what
    :class:`quicsm.stats.descriptive._Chain` computes, without its per-run tables)."""

    state_traces: np.ndarray
    count: np.ndarray
    traces: np.ndarray
    syy: np.ndarray
    syn: np.ndarray
    n: np.ndarray
    snn: np.ndarray
    m: np.ndarray


def _runs_of(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``keys`` and how often each occurs, by one sort of the keys
    themselves (in place; no permutation of the rows)."""
    keys.sort()
    new = np.empty(len(keys), dtype=bool)
    new[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    del new
    return keys[starts], np.diff(np.append(starts, len(keys)))


def _chain_sums(
    tid: np.ndarray,
    code: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
    n_traces: int,
    *,
    keys64: bool = False,
) -> _ChainSums:
    """Per trace and transition pair (``INITIAL -> first state``, each visit -> its successor
    or ``TERMINAL``) the count ``y``, per trace and state the visits ``n``, summed as the
    cluster-robust intervals need them. Each is grouped by one sort of 32-bit keys (trace,
    then pair or state), not by a stable sort of the rows and their permutation; the sums
    are of integers (exact in any order), so they equal :class:`_Chain`'s. Keys are 64-bit
    from 2**22 traces on (or with ``keys64``): a pair takes 10 bits, a state 5."""
    pair_bits = 2 * _LABEL_BITS
    wide: type[np.unsignedinteger] = (
        np.uint64 if keys64 or n_traces >= 1 << (32 - pair_bits) else np.uint32
    )
    eight, four = np.array(pair_bits, dtype=wide), np.array(_LABEL_BITS, dtype=wide)
    label = code.astype(np.uint16) + np.uint16(1)
    nxt = np.empty_like(label)
    nxt[:-1] = label[1:]
    nxt[last] = _TERMINAL
    steps = label * np.uint16(_SOURCES) + nxt  # the pair leaving each visit
    trace = tid.astype(wide)
    keys = np.concatenate([np.left_shift(trace[first], eight), np.left_shift(trace, eight)])
    keys[:n_traces] |= label[first]  # INITIAL (0) -> first state
    keys[n_traces:] |= steps
    del steps, nxt
    pair_keys, y = _runs_of(keys)
    del keys
    pair = (pair_keys & (_PAIRS - 1)).astype(np.intp)
    states, visits = _runs_of(np.left_shift(trace, four) | code.astype(wide))
    del trace
    state = (states & (_SOURCES - 1)).astype(np.intp)
    # visits of each pair's source state in the pair's trace (INITIAL: once)
    source = pair >> _LABEL_BITS
    n_i = np.ones(len(pair), dtype=np.float64)
    real = source > 0
    at = np.searchsorted(
        states,
        np.left_shift(np.right_shift(pair_keys[real], eight), four)
        | (source[real] - 1).astype(wide),
    )
    n_i[real] = visits[at]
    yf = y.astype(np.float64)
    nv = visits.astype(np.float64)
    n = np.bincount(state + 1, weights=nv, minlength=_SOURCES)
    snn = np.bincount(state + 1, weights=nv * nv, minlength=_SOURCES)
    m = np.bincount(state + 1, minlength=_SOURCES).astype(np.float64)
    n[0] = snn[0] = m[0] = n_traces  # INITIAL: once per trace
    return _ChainSums(
        state_traces=np.bincount(state, minlength=_N_STATES).astype(np.int64),
        count=np.bincount(pair, weights=yf, minlength=_PAIRS).astype(np.int64),
        traces=np.bincount(pair, minlength=_PAIRS).astype(np.int64),
        syy=np.bincount(pair, weights=yf * yf, minlength=_PAIRS),
        syn=np.bincount(pair, weights=yf * n_i, minlength=_PAIRS),
        n=n,
        snn=snn,
        m=m,
    )


def _value_counts(code: np.ndarray, dwell: np.ndarray) -> pl.DataFrame:
    """How often each (state code, dwell time) occurs, sorted by code, then dwell: what a
    group-by and sort of the pairs gives (equal times grouped, -0.0 with 0.0, the first one's
    value kept), by sorting instead of a hash group-by: each state's values are taken out and
    sorted (no permutation of the rows: equal values are alike, unless -0.0 meets 0.0)."""
    if np.any((dwell == 0) & np.signbit(dwell)):  # -0.0 and 0.0: the first one's kept
        order = np.lexsort((dwell, code))  # stable: equal pairs keep their order
        parts = [(code[order], dwell[order])]
    else:
        parts = []
        for state in range(_N_STATES):
            values = dwell[code == state]
            if len(values):
                values.sort()
                parts.append((np.full(len(values), state, dtype=np.uint8), values))
    codes, values, counts = [], [], []
    for c, d in parts:
        n = len(c)
        new = np.ones(n, dtype=bool)
        new[1:] = (c[1:] != c[:-1]) | (d[1:] != d[:-1])
        starts = np.flatnonzero(new)
        codes.append(c[starts])
        values.append(d[starts])
        counts.append(np.diff(np.append(starts, n)).astype(np.int64))
    if not parts:
        return pl.DataFrame(schema=DWELL_COUNTS_SCHEMA)
    return pl.DataFrame(
        {
            "code": np.concatenate(codes),
            "dwell_ms": np.concatenate(values),
            "count": np.concatenate(counts),
        }
    ).cast(DWELL_COUNTS_SCHEMA)  # type: ignore[arg-type]


def merge_all(parts: Iterable[Aggregate]) -> Aggregate:
    """All aggregates merged, in the order given: the same sums, added in the same order, as
    merging them one by one with :meth:`Aggregate.merge`, without copying the trace set at
    every step."""
    merger = Merger()
    for part in parts:
        merger.add(part)
    return merger.result()


#: a short sequence is packed into one integer, 4 bits a state when every code fits (the
#: default states), else 5, and its length in the top 4 bits: compared as integers, exactly
assert _N_STATES <= 32


def _packing(code: np.ndarray) -> tuple[int, int]:
    """(bits a state, states packed) for these codes: (4, 15) or (5, 12), in 60 bits."""
    width = 4 if len(code) == 0 or int(code.max()) < 16 else 5
    return width, 60 // width


def _sequences(code: np.ndarray, dwell: np.ndarray, first: np.ndarray) -> Sequences:
    """Distinct sequences of a Visits frame (rows grouped by trace, in time order), in the
    order of the first trace that has each."""
    starts = np.flatnonzero(first)
    lengths = np.diff(np.append(starts, len(code)))
    return _distinct(code, lengths, np.ones(len(starts), dtype=np.int64), dwell)


def _distinct(
    code: np.ndarray, lengths: np.ndarray, weights: np.ndarray, dwell: np.ndarray
) -> Sequences:
    """The distinct sequences among sequences given flat (``code`` and ``dwell`` one sequence
    after another, ``lengths``, ``weights``): each once, in the order of its first copy, with
    the weights added and the times at each position summed in the order given.

    The work per row is two passes (a gather of the codes of each position, a bincount of the
    times); the rest is per sequence."""
    n = len(code)
    n_traces = len(lengths)
    if n_traces == 0:
        return Sequences.empty()
    starts = np.cumsum(lengths) - lengths
    # each sequence's class: its packed codes (short ones), one position at a time over the
    # sequences that long, or a group of its list of codes (longer ones)
    width, n_packed = _packing(code)
    short = lengths <= n_packed
    packed = lengths.astype(np.uint64) << np.uint64(60)
    for position in range(min(n_packed, int(lengths.max()))):
        at = np.flatnonzero(short & (lengths > position))
        packed[at] |= code[starts[at] + position].astype(np.uint64) << np.uint64(width * position)
    klass = np.empty(n_traces, dtype=np.int64)
    _, inverse = np.unique(packed[short], return_inverse=True)
    klass[short] = inverse.ravel()
    if not short.all():  # longer sequences: grouped as lists of codes
        long = np.flatnonzero(~short)
        groups = (
            pl.DataFrame({"t": _sequence_ids(lengths[long]), "code": code[_rows_of(lengths, long)]})
            .group_by("t", maintain_order=True)
            .agg(pl.col("code").alias("seq"))
            .select(pl.col("seq").rank("dense").cast(pl.Int64))
            .to_series()
            .to_numpy()
        )
        klass[long] = (int(inverse.max()) + 1 if len(inverse) else 0) + groups
    # classes renumbered in the order of their first sequence
    classes, first_trace, seq_of_trace = np.unique(klass, return_index=True, return_inverse=True)
    order = np.argsort(first_trace, kind="stable")
    rank = np.empty(len(classes), dtype=np.int64)
    rank[order] = np.arange(len(classes))
    seq_of_trace = rank[seq_of_trace.ravel()]
    first_trace = first_trace[order]
    out_weights = np.bincount(seq_of_trace, weights=weights, minlength=len(classes))
    # time at each position of each distinct sequence, summed over its copies in the order
    # given (one bincount over every row: it adds in row order); a row's slot is its
    # sequence's start there plus its position
    seq_len = lengths[first_trace]
    seq_start = np.cumsum(seq_len) - seq_len
    slot = np.repeat(seq_start[seq_of_trace] - starts, lengths)
    slot += np.arange(n, dtype=np.int64)
    sums = np.bincount(slot, weights=dwell, minlength=int(seq_len.sum()))
    del slot
    codes = code.astype(np.uint8, copy=False)[_rows_of(lengths, first_trace)]
    return Sequences(codes, seq_len.astype(np.int64), out_weights.astype(np.int64), sums)


def quantiles_from_counts(
    values: np.ndarray, counts: np.ndarray, qs: Sequence[float]
) -> tuple[float, ...]:
    """Linear-interpolation quantiles (numpy's default method) of the multiset where
    ``values[i]`` (sorted ascending, distinct) occurs ``counts[i]`` times — bit for bit what
    ``np.quantile(np.repeat(values, counts), qs)`` returns, without expanding it."""
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    if n == 0:
        raise ValueError("no values")
    cum = np.cumsum(counts)
    q = np.asarray(qs, dtype=np.float64)
    virtual = (n - 1) * q
    previous = np.floor(virtual).astype(np.int64)
    nxt = previous + 1
    above = virtual >= n - 1
    previous[above] = n - 1
    nxt[above] = n - 1
    below = virtual < 0
    previous[below] = 0
    nxt[below] = 0
    nxt = np.minimum(nxt, n - 1)
    gamma = (virtual - previous).astype(np.float64)
    a = np.asarray(values, dtype=np.float64)[np.searchsorted(cum, previous, side="right")]
    b = np.asarray(values, dtype=np.float64)[np.searchsorted(cum, nxt, side="right")]
    diff = b - a
    out = a + diff * gamma
    high = gamma >= 0.5
    out[high] = (b - diff * (1 - gamma))[high]
    return tuple(float(x) for x in out)
