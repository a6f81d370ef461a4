"""expand_paths: files, recursive directories, ** patterns; missing inputs are named errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from quicsm.core.errors import InputError
from quicsm.qlog.paths import expand_paths, is_trace_name


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    for rel in [
        "a/run-1/client.sqlog",
        "a/run-1/server.sqlog",
        "a/run-1/run.json",
        "a/run-2/client.qlog.gz",
        "b/x.sqlog.zst",
        "b/notes.txt",
        "c.csv",
        "d.parquet",
    ]:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x")
    return tmp_path


def test_directory_is_recursive_and_skips_non_traces(tree: Path) -> None:
    got = expand_paths(tree)
    assert [p.relative_to(tree).as_posix() for p in got] == [
        "a/run-1/client.sqlog",
        "a/run-1/server.sqlog",
        "a/run-2/client.qlog.gz",
        "b/x.sqlog.zst",
        "c.csv",
        "d.parquet",
    ]


def test_globs_with_double_star(tree: Path) -> None:
    got = expand_paths([str(tree / "**" / "client.*")])
    assert [p.relative_to(tree).as_posix() for p in got] == [
        "a/run-1/client.sqlog",
        "a/run-2/client.qlog.gz",
    ]
    assert expand_paths([str(tree / "*.csv")]) == [tree / "c.csv"]


def test_order_of_arguments_is_kept_and_duplicates_dropped(tree: Path) -> None:
    got = expand_paths([tree / "c.csv", tree / "a", str(tree / "c.csv")])
    assert got[0] == tree / "c.csv" and len(got) == 4


def test_files_are_taken_whatever_their_name(tree: Path) -> None:
    assert expand_paths(tree / "b" / "notes.txt") == [tree / "b" / "notes.txt"]


def test_missing_inputs_are_named(tree: Path) -> None:
    with pytest.raises(InputError, match="no such file or directory: '.*nope.sqlog'"):
        expand_paths([tree / "nope.sqlog"])
    with pytest.raises(InputError, match="no files match the pattern '.*zzz"):
        expand_paths([str(tree / "**" / "*.zzz")])
    (tree / "empty").mkdir()
    with pytest.raises(InputError, match="contains no trace files"):
        expand_paths([tree / "empty"])
    with pytest.raises(InputError, match="no input paths given"):
        expand_paths([])


def test_relative_paths_stay_relative(tree: Path) -> None:
    cwd = os.getcwd()
    os.chdir(tree)
    try:
        assert expand_paths(["a/run-1/client.sqlog"]) == [Path("a/run-1/client.sqlog")]
        assert [p.as_posix() for p in expand_paths(["b"])] == ["b/x.sqlog.zst"]
    finally:
        os.chdir(cwd)


def test_trace_names() -> None:
    assert is_trace_name("x.SQLOG") and is_trace_name("y.qlog.zstd") and is_trace_name("t.csv.gz")
    assert not is_trace_name("run.json") and not is_trace_name("x.json")
