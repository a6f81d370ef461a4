"""Parquet transition tables whose columns have the wrong type, and Parquet files the table
library cannot decode: one :class:`QlogError` naming the column, its type and what the column
accepts, before anything is cast; a panic of the Parquet reader as our error with a message
that is the same from call to call, and nothing on stderr (the hostile campaign's typed-table
and corrupt-Parquet families, :mod:`quicsm.testing.hostile`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.core.errors import QlogError
from quicsm.extract.read import read_traces, read_transitions
from quicsm.qlog.inspect import inspect_file
from quicsm.qlog.tabular import quiet_panics
from quicsm.testing import hostile

ROOT = Path(__file__).resolve().parents[1]

#: the kinds of column each role accepts (as ``hostile.typed_tables`` names them)
ACCEPTED = {
    "trace": {"int", "uint", "categorical", "null"},
    "time_ms": {"float", "int", "uint", "categorical", "null"},
    "state": {"categorical", "null"},
    "trigger": {"categorical", "null"},
    "version": {"float", "bool", "int", "uint", "datetime", "categorical", "null"},
}
KINDS = sorted(hostile.typed_tables())


@pytest.mark.parametrize("column", sorted(ACCEPTED))
@pytest.mark.parametrize("kind", KINDS)
def test_a_column_of_another_type_is_named_with_its_type(
    tmp_path: Path, column: str, kind: str
) -> None:
    path = hostile.typed_table(tmp_path / "t.parquet", column, kind)
    dtype = pl.read_parquet_schema(path)[column]
    if kind in ACCEPTED[column]:
        try:
            frame = read_transitions(path)
        except QlogError as error:  # a row's value (a null), named by its record
            assert "record " in str(error) and "unexpected" not in str(error)
        else:
            assert frame.height >= 2
        return
    label = "label column" if column == "version" else "column"
    expected = f'{path}: expected the {label} "{column}" to hold '
    with pytest.raises(QlogError) as caught:
        read_transitions(path)
    message = str(caught.value)
    assert message.startswith(expected) and message.endswith(f", got a column of type {dtype}")
    for reader in (read_traces, inspect_file):
        with pytest.raises(QlogError, match="to hold"):
            reader(path)


def test_integer_trace_ids_are_read_as_text_beside_a_label(tmp_path: Path) -> None:
    path = hostile.typed_table(tmp_path / "t.parquet", "trace", "int")
    frame = read_transitions(path)
    assert frame["trace"].cast(pl.String).unique().sort().to_list() == ["1", "2"]
    traces = read_traces(path)
    labels = traces.filter(pl.col("trace") == "1")["labels"].to_list()
    assert [json.loads(text) for text in labels] == [{"version": "v1"}]


def test_the_message_lists_what_the_column_accepts(tmp_path: Path) -> None:
    path = hostile.typed_table(tmp_path / "t.parquet", "trace", "float")
    with pytest.raises(QlogError) as caught:
        read_transitions(path)
    assert str(caught.value) == (
        f'{path}: expected the column "trace" to hold text or integers, '
        "got a column of type Float64"
    )
    path = hostile.typed_table(tmp_path / "s.parquet", "state", "list")
    with pytest.raises(QlogError) as caught:
        read_transitions(path)
    assert str(caught.value) == (
        f'{path}: expected the column "state" to hold text, got a column of type List(Int64)'
    )


_READ_ALL = """
import sys, warnings
from pathlib import Path
from quicsm.core.errors import QuicsmError
from quicsm.extract.read import read_transitions
warnings.simplefilter("ignore")
for name in sys.argv[1:]:
    for _ in range(2):
        try:
            read_transitions(Path(name))
            print("rows")
        except QuicsmError as error:
            print("error", error)
"""


def _read_in_a_fresh_process(paths: list[Path], backtrace: str) -> tuple[list[str], str]:
    env = {**os.environ, "RUST_BACKTRACE": backtrace, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _READ_ALL, *map(str, paths)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines(), proc.stderr


@pytest.mark.parametrize("backtrace", ["0", "1", "full"])
def test_corrupt_parquet_files_give_our_error_and_nothing_on_stderr(
    tmp_path: Path, backtrace: str
) -> None:
    """Bytes of a valid table changed at random: the Parquet reader fails on some and panics
    on others (Rust's panic hook writes its report, and a backtrace per ``RUST_BACKTRACE``, to
    stderr; the error names a task id that changes between calls). Each read twice in a fresh
    process: rows or the same error both times, and stderr empty."""
    seeds = [*range(40), *hostile.PARQUET_PANIC_SEEDS]
    paths = [hostile.corrupt_parquet(tmp_path / f"c{seed}.parquet", seed) for seed in seeds]
    lines, stderr = _read_in_a_fresh_process(paths, backtrace)
    assert stderr == ""
    assert len(lines) == 2 * len(paths)
    for path, first, second in zip(paths, lines[::2], lines[1::2], strict=True):
        assert first == second, (first, second)
        assert first == "rows" or first.startswith(f"error {path}: "), first
        assert "unexpected" not in first and "Id(" not in first
    # the family reaches the panic (PARQUET_PANIC_SEEDS: if a later polars no longer panics on
    # them, other seeds are needed to keep the path tested)
    assert any("the Parquet reader cannot decode (it panicked: " in line for line in lines)


def test_the_guard_drops_panic_reports_and_keeps_other_output(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """What Rust's default panic hook writes (with and without a backtrace) is dropped; lines
    written to stderr meanwhile are written after the call, in order."""
    reports = (
        b"\nthread 'async-executor-1' (15222) panicked at src/raw_vec/mod.rs:28:5:\n"
        b"capacity overflow\n"
        b"note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
        b"\nthread '<unnamed>' panicked at a.rs:1:1:\nassertion failed\n  left: 0\n right: 3\n"
        b"stack backtrace:\n   0: __rustc::rust_begin_unwind\n             at x.rs:1\n"
        b"   1: core::panicking::panic_fmt\n"
        b"note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose "
        b"backtrace.\n",
        b"\nthread 'tokio-rt-worker' (9) panicked at b.rs:2:2:\nboom\nstack backtrace:\n   0: x\n",
    )
    with quiet_panics():
        os.write(2, b"ours: before\n")
        for report in reports:
            os.write(2, report)
            os.write(2, b"ours: between\n")
    assert capfd.readouterr().err == "ours: before\n" + "ours: between\n" * len(reports)


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["trace", "time_ms", "state", "vantage", "end_ms", "version", "x"]),
        st.sampled_from(KINDS),
        min_size=1,
        max_size=4,
    )
)
def test_any_mix_of_column_types_gives_rows_or_a_named_error(
    tmp_path_factory: pytest.TempPathFactory, columns: dict[str, str]
) -> None:
    path = tmp_path_factory.mktemp("typed") / "t.parquet"
    frame = pl.DataFrame(
        {"trace": ["a", "a"], "time_ms": [0.0, 1.0], "state": ["SlowStart", "Recovery"]}
    )
    tables = hostile.typed_tables()
    frame = frame.with_columns(tables[kind].alias(column) for column, kind in columns.items())
    frame.write_parquet(path)
    try:
        read_transitions(path)
    except QlogError as error:
        message = str(error)
        assert message.startswith(f"{path}: ") and "unexpected" not in message
        assert ": expected " in message


_OURS = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=30
).filter(lambda line: not line.startswith(("note:", "stack", "thread")))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            _OURS.map(lambda line: ("ours", line)),
            st.tuples(
                st.sampled_from(["note", "backtrace", "full"]),
                st.text(alphabet="abc xyz:`=0123", min_size=1, max_size=20),
            ),
        ),
        max_size=12,
    )
)
def test_only_the_panic_reports_are_dropped(parts: list[tuple[str, str]]) -> None:
    """Any mix of our lines and panic reports of every form Rust's default hook writes (its
    note on RUST_BACKTRACE, a backtrace and its note, a full backtrace): our lines are kept,
    in order, and nothing else."""
    from quicsm.qlog.tabular import _without_panic_reports

    text, ours = b"", []
    for kind, line in parts:
        if kind == "ours":
            text += line.encode() + b"\n"
            ours.append(line)
            continue
        text += b"\nthread 'async-executor-0' (7) panicked at src/a.rs:1:2:\n"
        text += line.strip().encode() + b"\n" if line.strip() else b"boom\n"
        if kind == "note":
            text += b"note: run with `RUST_BACKTRACE=1` environment variable to display a "
            text += b"backtrace\n"
        else:
            text += b"stack backtrace:\n   0: std::panicking::begin_panic\n             at a.rs:1\n"
            if kind == "backtrace":
                text += b"note: Some details are omitted, run with `RUST_BACKTRACE=full` for a "
                text += b"verbose backtrace.\n"
    kept = _without_panic_reports(text).decode().splitlines()
    assert kept == ours
