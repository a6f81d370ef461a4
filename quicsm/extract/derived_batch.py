"""The frame of traces whose rows are all derived, built once for many traces from the
derivers' arrays (:class:`DerivedBatch`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from quicsm.core.frames import TRANSITIONS_SCHEMA
from quicsm.extract.deriver import STATE_CODES, CompactRows
from quicsm.extract.loading import TIME_DECIMALS

if TYPE_CHECKING:  # imported where used: reading a file does not need numpy
    import numpy as np


class DerivedBatch:
    """The derived rows of many traces (traces whose rows are all derived), kept as the
    deriver's arrays and built into ONE frame at the end: no frame, no polars call and no
    Python object per row or per trace, whatever the number of traces (a file of thousands of
    short connections costs what one long connection of the same rows costs). Each column is
    built in its final type; every trace gets its ``Init`` row at its first event."""

    def __init__(self) -> None:
        self.times: list[Any] = []  # float64 buffers, one per trace (absolute times)
        self.states: list[Any] = []  # uint8 buffers (index into STATE_CODES)
        self.triggers: list[Any] = []  # uint16 buffers (index into the trace's own names)
        self.lengths: list[int] = []  # rows per trace, its Init row not counted
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.files: list[str] = []
        self.traces: list[str] = []
        self.vantages: list[str] = []
        #: every trace's trigger names, one after the other (``name_offsets``: where each begins)
        self.names: list[str] = []
        self.name_offsets: list[int] = []

    def __len__(self) -> int:
        return len(self.lengths)

    def add(
        self, file: str, tid: str, vantage: str, start: float, end: float, rows: CompactRows
    ) -> None:
        self.times.append(rows.times)
        self.states.append(rows.states)
        self.triggers.append(rows.triggers)
        self.lengths.append(len(rows))
        self.starts.append(start)
        self.ends.append(end)
        self.files.append(file)
        self.traces.append(tid)
        self.vantages.append(vantage)
        self.name_offsets.append(len(self.names))
        self.names.extend(rows.trigger_names)

    def frame(self) -> pl.DataFrame:
        """Every trace's rows, in the order the traces were added."""
        import numpy as np

        schema = TRANSITIONS_SCHEMA
        lengths = np.asarray(self.lengths, dtype=np.int64)
        k, n = len(lengths), int(lengths.sum())
        total = n + k  # each trace's Init row first
        # the position of each trace's Init row; every other row is a derived one
        firsts = np.zeros(k, dtype=np.int64)
        np.cumsum(lengths[:-1] + 1, out=firsts[1:])
        derived = np.ones(total, dtype=bool)
        derived[firsts] = False
        owner = np.repeat(np.arange(k, dtype=np.int64), lengths + 1)  # each row's trace

        def joined(parts: list[Any], dtype: Any) -> np.ndarray:
            return np.frombuffer(b"".join(parts), dtype=dtype)  # the buffers, one copy

        starts = np.asarray(self.starts, dtype=np.float64)
        times = np.empty(total, dtype=np.float64)
        times[firsts] = starts
        times[derived] = joined(self.times, np.float64)
        time_ms = np.round(times - starts[owner], TIME_DECIMALS)
        del times
        codes = np.zeros(total, dtype=np.uint32)  # Init is code 0
        codes[derived] = joined(self.states, np.uint8)
        # each trace's trigger codes index its own names: mapped to one table of names
        table: dict[str, int] = {}
        lookup = np.asarray(
            [table.setdefault(name, len(table) + 1) for name in self.names] or [0],
            dtype=np.int64,
        )
        trigger = np.zeros(total, dtype=np.int64)  # 0: no trigger (the Init rows)
        offsets = np.asarray(self.name_offsets, dtype=np.int64)
        local = joined(self.triggers, np.uint16).astype(np.int64)
        trigger[derived] = lookup[np.repeat(offsets, lengths) + local]
        del local
        names = pl.Series("trigger", [None, *table], dtype=schema["trigger"])

        def per_trace(values: list[Any], name: str) -> pl.Series:
            # one value per trace, in the column's type, repeated over the trace's rows
            return pl.Series(name, values, dtype=schema[name]).gather(owner)

        def constant(value: str | None, name: str) -> pl.Series:
            return pl.repeat(value, total, dtype=schema[name], eager=True).alias(name)

        return pl.DataFrame(
            [
                per_trace(self.files, "file"),
                per_trace(self.traces, "trace"),
                pl.Series("vantage", self.vantages, dtype=pl.String)
                .cast(schema["vantage"])
                .gather(owner),
                pl.Series("time_ms", time_ms, dtype=pl.Float64),
                pl.Series("state", codes).replace_strict(
                    dict(enumerate(STATE_CODES)), return_dtype=schema["state"]
                ),
                constant(None, "raw_state"),
                names.gather(trigger),
                constant("derived", "source"),
                pl.Series("end_ms", np.asarray(self.ends, dtype=np.float64)[owner]),
            ]
        )
