"""Reading takes time linear in the input on every reproducer family of the hostile campaign
(:mod:`quicsm.testing.hostile`): a read of ``16n`` costs less than :data:`LIMIT` times a read of
``n``, both measured in the same test (a ratio, never an absolute time). Linear work gives 16x
(up to ~27x where objects outgrow the CPU's caches), a quadratic path 256x; the limit is their
geometric midpoint, so a machine busy enough to slow one read by 2.4x against the other does
not fail the test, and a path whose quadratic part is a fifth of the small read does. Where
the work can be counted (calls of a real function, at n and 4n) the guard counts it instead: a
count does not depend on how busy the machine is. Speed itself is measured in benchmarks/, not
here."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from quicsm.core import native
from quicsm.core.diagnostics import Diagnostics
from quicsm.extract.read import read_metrics, read_transitions
from quicsm.qlog.inspect import inspect_file
from quicsm.testing import hostile

#: how much larger the large input is than the small one
GROWTH = 16
#: the largest ratio of CPU times accepted: sqrt(16 * 256), between linear and quadratic growth
LIMIT = 64.0

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


#: a timing shorter than this is repeated until it is not (a read of a few milliseconds is
#: mostly timer and scheduler noise on a busy machine)
_MIN_BATCH_S = 0.05


def _cpu(read: Callable[[], object]) -> float:
    """The least CPU time per read over three batches (the first may pay for imports and
    caches; the machine may be busy during one), each batch repeating the read until it has
    taken at least :data:`_MIN_BATCH_S`."""
    best = float("inf")
    for _ in range(3):
        count = 0
        start = time.process_time()
        while True:
            read()
            count += 1
            spent = time.process_time() - start
            if spent >= _MIN_BATCH_S:
                break
        best = min(best, spent / count)
    return best


def _scales(
    tmp_path: Path, make: Callable[[Path, int], Path], read: Callable[[Path], object], n: int
) -> None:
    small = make(tmp_path / f"n{n}", n)
    large = make(tmp_path / f"n{GROWTH * n}", GROWTH * n)
    t1, t16 = _cpu(lambda: read(small)), _cpu(lambda: read(large))
    assert t16 < LIMIT * t1, f"at n={n}: {t1:.4f} s, at {GROWTH}n: {t16:.4f} s ({t16 / t1:.1f}x)"


@pytest.fixture(params=["native", "python"])
def reader_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "native":
        assert native.installed(), "the native core is built with the package"
        monkeypatch.delenv(native.NATIVE_ENV, raising=False)
    else:
        monkeypatch.setenv(native.NATIVE_ENV, "0")
    return str(request.param)


def test_records_handed_back_by_the_native_decoder_read_in_linear_time(
    tmp_path: Path, reader_impl: str
) -> None:
    """Every record the native decoder hands back used to make the scan search the rest of
    its block again (100k records: 27 s against 0.6 s in Python)."""
    _scales(tmp_path, hostile.handed_back_metrics, read_transitions, 2_500)


def test_invalid_records_in_a_lenient_read_take_linear_time(
    tmp_path: Path, reader_impl: str
) -> None:
    def make(path: Path, n: int) -> Path:
        return hostile.handed_back_metrics(path, n, invalid=True)

    def read(path: Path) -> object:
        diag = Diagnostics()
        with pytest.warns(UserWarning):
            frame = read_transitions(path, on_error="skip", diagnostics=diag)
        return frame

    _scales(tmp_path, make, read, 2_500)


def test_handed_back_records_read_the_same_natively_and_in_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert native.installed(), "the native core is built with the package"
    path = hostile.handed_back_metrics(tmp_path / "h.sqlog", 2_000)
    frames: list[pl.DataFrame] = []
    for flag in ("1", "0"):
        monkeypatch.setenv(native.NATIVE_ENV, flag)
        frames.append(read_transitions(path))
    assert_frame_equal(frames[0], frames[1])
    assert read_metrics(path).height == 2_000


def test_a_quoted_csv_field_holding_many_line_feeds_reads_in_linear_time(tmp_path: Path) -> None:
    """The chunker searched the whole pending text again for a line end outside quotes at each
    block (70 MiB: 35 s)."""
    _scales(tmp_path, hostile.csv_quoted_line_feeds, read_transitions, 1 << 20)


@pytest.mark.parametrize("sep", [b"\x1e", b"\n"], ids=["json-seq", "ndjson"])
@pytest.mark.parametrize("reader", [read_transitions, inspect_file], ids=["read", "inspect"])
def test_runs_of_empty_records_read_in_linear_time(
    tmp_path: Path, sep: bytes, reader: Callable[[Path], object]
) -> None:
    """Runs of empty records were walked one record at a time in Python."""

    def make(path: Path, n: int) -> Path:
        return hostile.empty_records(path, n, sep=sep)

    _scales(tmp_path, make, reader, 1 << 20)


def test_a_large_top_level_member_of_contained_json_reads_in_linear_time(
    tmp_path: Path,
) -> None:
    """Its structural characters went one at a time through the Python state machine. The
    member is kept as a value (a header's metadata), and orjson's building of its many small
    objects costs more per byte as they outgrow the caches: 4x costs 2.9x from 128 KiB, 3.5x
    from 256 KiB, 4.3x from 512 KiB and 5.5x from 1 MiB (steady state, one process), so 64 KiB
    to 1 MiB costs well under the limit, where a quadratic path gives 256x at any size."""
    _scales(tmp_path, hostile.contained_member, read_transitions, 1 << 16)


def test_one_wide_record_under_the_value_budget_reads_in_linear_time(
    tmp_path: Path, reader_impl: str
) -> None:
    """Within the budget (tests/test_read_budget.py holds the record over it), a record of
    many empty objects costs time in proportion to its values. Sizes where the record's
    objects stay near the CPU's caches: from 2^16 values on, one record alone makes each value
    cost ~1.3x more per 4x (memory, not the algorithm: 4x costs 5.0-5.4x on a loaded 2-core
    machine, so 16x about 27x), where a quadratic path gives 256x at any size."""
    _scales(tmp_path, hostile.wide_record, read_metrics, 1 << 12)


def _table(path: Path, traces: int) -> Path:
    from quicsm.testing.synthetic import generate_transitions

    path.mkdir()
    out = path / "transitions.csv"
    generate_transitions(traces, seed=1).select("trace", "time_ms", "state").write_csv(out)
    return out


@pytest.mark.slow
def test_a_transitions_table_reads_and_aggregates_in_linear_time(tmp_path: Path) -> None:
    """What ``quicsm infer`` does with a CSV before inference (read, normalise, one aggregate):
    no step is per trace in Python or grouped by hashing the ids (a nested window over the
    traces took 44 s at a million of them). Sorts of keys make it n log n: about 4.4x per 4x."""
    from quicsm.engine.aggregate import Aggregate
    from quicsm.extract.read import read_batch

    _scales(tmp_path, _table, lambda p: Aggregate.of(read_batch([p]).transitions), 2_500)


class _Counted:
    """A function that still runs, with its calls counted: complexity guards count work (calls
    at n and at 4n), which a busy machine does not change."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.function(*args, **kwargs)


@pytest.mark.parametrize("contained", [False, True], ids=["json-seq", "contained"])
def test_many_tiny_packets_only_traces_read_their_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader_impl: str, contained: bool
) -> None:
    """Every packets-only trace needs its file's packets (the wire derivation): the file is
    read in full once however many traces need it, and each packet record is decoded once, at
    n and at 4n traces (the campaign's family of many tiny traces, each a packets-only one)."""
    from quicsm.extract import wire

    for n in (150, 600):
        path = hostile.many_tiny_traces(tmp_path / f"t{n}", n, contained=contained, packets=True)
        reads, decoded = _Counted(wire.read_qlog), _Counted(wire.packet_of)
        monkeypatch.setattr(wire, "read_qlog", reads)
        monkeypatch.setattr(wire, "packet_of", decoded)
        frame = read_transitions(path, states="derived")
        assert frame.height == 2 * n  # Init and one derived state per trace
        assert (reads.calls, decoded.calls) == (1, 2 * n)


def test_out_of_range_packet_numbers_are_decoded_once_in_a_lenient_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lenient read skips the bad records and decodes every other packet record once."""
    from quicsm.extract import wire

    for n in (500, 2000):
        path = hostile.out_of_range_packets(tmp_path / f"p{n}.sqlog", n, number=-2, where="ack")
        decoded = _Counted(wire.packet_of)
        monkeypatch.setattr(wire, "packet_of", decoded)
        diag = Diagnostics()
        with pytest.warns(UserWarning, match="skipped 2 records"):
            read_transitions(path, states="derived", on_error="skip", diagnostics=diag)
        assert decoded.calls == 2 * n + 2  # the two bad records raise and are skipped
