"""The native core's metric columns reach polars through the Arrow C data interface
(``quicsm._native.ArrowBlock``, ``native/src/arrow.rs``): the frame holds exactly the events
recorded (NaN as null, the times and codes as they were), blocks joined by ``concat_blocks``
equal the frames of each block stacked, columns taken one by one (``ArrowBlock.take``) equal
the block's, and ``read_metrics`` of a JSON-SEQ file imports no
numpy (polars is the result type; numpy would cost the process about as much again) nor the
modules of the deriving path."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal, assert_series_equal

from quicsm.core import native, tables
from quicsm.qlog.events import METRIC_FIELDS

ROOT = Path(__file__).resolve().parent.parent
ext = native.module()
pytestmark = pytest.mark.skipif(ext is None, reason="the native core is not built")

_VALUE = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False, width=64))
_EVENT = st.tuples(
    st.floats(0, 1e12, allow_nan=False),
    st.integers(0, len(tables.FEED_KINDS) - 1),
    st.lists(_VALUE, min_size=len(METRIC_FIELDS), max_size=len(METRIC_FIELDS)),
    st.one_of(st.none(), st.sampled_from(["a", "rto", "é"])),
)


_COLUMN_NAMES = ["_t", "kind", *METRIC_FIELDS, "trigger"]


def _recorded(events: list[tuple[float, int, list[float | None], str | None]]) -> object:
    recorder = ext.Deriver.recorder()
    for time, kind, values, trigger in events:
        recorder.feed(time, kind, values, None, trigger)
    return recorder


def _expected(events: list[tuple[float, int, list[float | None], str | None]]) -> pl.DataFrame:
    names: list[str] = []
    codes = []
    for *_, trigger in events:
        if trigger is not None and trigger not in names:
            names.append(trigger)
        codes.append(0 if trigger is None else names.index(trigger) + 1)
    columns: dict[str, pl.Series] = {
        "_t": pl.Series([e[0] for e in events], dtype=pl.Float64),
        "kind": pl.Series([e[1] for e in events], dtype=pl.UInt8),
    }
    for i, name in enumerate(METRIC_FIELDS):
        columns[name] = pl.Series([e[2][i] for e in events], dtype=pl.Float64)
    columns["trigger"] = pl.Series(codes, dtype=pl.UInt16)
    return pl.DataFrame(columns)


@settings(max_examples=150, deadline=None)
@given(st.lists(_EVENT, max_size=40), st.integers(0, 40))
def test_a_block_is_the_events_recorded(
    events: list[tuple[float, int, list[float | None], str | None]], cut: int
) -> None:
    recorder = _recorded(events)
    block, names = recorder.take_arrow()
    assert block.length == len(events) and recorder.recorded() == 0
    frame = pl.DataFrame(block)
    assert_frame_equal(frame, _expected(events))
    assert names == list(dict.fromkeys(e[3] for e in events if e[3] is not None))
    times = [e[0] for e in events]
    assert block.ordered == all(a <= b for a, b in zip(times, times[1:], strict=False))
    assert (block.first, block.last) == ((times[0], times[-1]) if times else (None, None))
    with pytest.raises(ValueError, match="exported already"):
        pl.DataFrame(block)
    # joined blocks: the frames of each block, stacked (the trigger names are kept across takes)
    cut = min(cut, len(events))
    recorder = _recorded(events[:cut])
    first, _ = recorder.take_arrow()
    for time, kind, values, trigger in events[cut:]:
        recorder.feed(time, kind, values, None, trigger)
    second, _ = recorder.take_arrow()
    assert_frame_equal(pl.DataFrame(ext.concat_blocks([first, second])), _expected(events))


@settings(max_examples=100, deadline=None)
@given(st.lists(_EVENT, min_size=1, max_size=40), st.permutations(_COLUMN_NAMES))
def test_columns_taken_one_by_one_are_the_blocks_columns(
    events: list[tuple[float, int, list[float | None], str | None]], names: list[str]
) -> None:
    """``ArrowBlock.take``: the columns named, in that order, each a series of its own equal to
    the block's column; a float column of nulls only is left out (``None``)."""
    expected = _expected(events)
    block, _ = _recorded(events).take_arrow()
    taken = block.take(names[:5])
    assert len(taken) == len(names[:5])
    for name, column in zip(names, taken, strict=False):
        values = expected.get_column(name)
        if values.null_count() == len(values):
            assert column is None
            continue
        assert (column.length, column.null_count) == (len(values), values.null_count())
        assert_series_equal(pl.Series(column), values)
        with pytest.raises(ValueError, match="exported already"):
            pl.Series(column)
    with pytest.raises(ValueError, match="exported already"):  # the block is spent
        block.take(["_t"])
    block, _ = _recorded(events).take_arrow()
    with pytest.raises(ValueError, match='the block holds no column "nope"'):
        block.take(["nope"])


def test_a_block_never_exported_frees_its_buffers() -> None:
    recorder = _recorded([(1.0, 0, [math.nan] * len(METRIC_FIELDS), None)] * 1000)
    for _ in range(200):  # made and dropped: the capsules release what they hold
        block, _ = recorder.take_arrow()
        schema, array = block.__arrow_c_array__()
        del schema, array, block


#: what a process that reads metrics does not import: numpy, and the deriving path (the rule
#: table, the derivers, the packet pass), which only the readers of states need
NOT_IMPORTED = (
    "numpy",
    "quicsm.extract.derive",
    "quicsm.extract.deriver",
    "quicsm.extract.rules",
    "quicsm.extract.streaming",
    "quicsm.extract.wire",
)


def test_read_metrics_of_json_seq_imports_no_numpy_nor_the_deriving_path() -> None:
    code = (
        "import sys, warnings\nwarnings.simplefilter('ignore')\n"
        "from quicsm.extract.read import read_metrics\n"
        f"frame = read_metrics({str(ROOT / 'traces' / 'aioquic-1.7.2.qlog')!r})\n"
        "assert frame.height > 0\n"
        f"print('IMPORTED', [m for m in {NOT_IMPORTED!r} if m in sys.modules])\n"
        "from quicsm.extract.read import read_transitions\n"
        f"assert read_transitions({str(ROOT / 'traces' / 'aioquic-1.7.2.qlog')!r}).height\n"
        f"print('THEN', [m for m in {NOT_IMPORTED!r} if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.strip().splitlines()
    assert lines[-2] == "IMPORTED []"
    assert lines[-1].startswith("THEN [") and "quicsm.extract.deriver" in lines[-1]  # the probe


_TIMES = st.lists(
    st.one_of(
        st.floats(-1e13, 1e13, allow_nan=False),
        st.integers(-(10**9), 10**9).map(lambda k: k / 1000 + 0.0005),  # beside a half
        st.integers(0, 10**7).map(lambda k: k / 16),  # exact binary halves of 1/1000ths
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(_TIMES)
def test_times_round_as_python_rounds_them(times: list[float]) -> None:
    """``round_ms`` and the query form the frames use (``round_ms_exprs``) give Python's
    ``round(t, 3)``, bit for bit: polars divides by a literal as a multiplication by its
    reciprocal, so the division is by a column."""
    from quicsm.extract.times import DECIMALS, round_ms, round_ms_exprs

    expected = [round(t, DECIMALS).hex() for t in times]  # bit for bit: -0.0 is not 0.0
    series = pl.Series(times, dtype=pl.Float64)
    assert [x.hex() for x in round_ms(series).to_list()] == expected
    frame = pl.DataFrame({"t": series, "k": pl.Series([1000.0] * len(times))})
    rounded, slow = round_ms_exprs(pl.col("t"), pl.col("k"))
    out = frame.select(rounded.alias("r"), slow.alias("slow"))
    if times and not out.get_column("slow")[0]:  # else the frames take round_ms's values
        assert [x.hex() for x in out.get_column("r").to_list()] == expected
