"""Large files read right and hostile ones stop with our error, in bounded memory.

The files are generated into a temporary directory at test time from the real fixtures (nothing
large is committed): a contained-JSON qlog of at least 30 MB and a CSV table of at least 12 MB,
each next to its gzip copy, and compressed files that inflate to 1 GB. Memory is measured in a
child process (its peak resident set size), so one test's allocations do not hide another's.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import orjson
import polars as pl
import pytest
import zstandard
from child_rss import run_child
from polars.testing import assert_frame_equal

from quicsm.core.diagnostics import Diagnostics
from quicsm.core.errors import QlogError
from quicsm.extract.read import read_metrics, read_traces, read_transitions
from quicsm.qlog.blocks import ReadLimits
from quicsm.testing.large import big_contained

FIXTURES = Path(__file__).parent / "fixtures"
RSS_LIMIT_MB = 600


def _gzip_copy(path: Path) -> Path:
    copy = path.with_name(path.name + ".gz")
    copy.write_bytes(gzip.compress(path.read_bytes(), compresslevel=1))
    return copy


def _same(a: pl.DataFrame, b: pl.DataFrame) -> None:
    """Equal but for the file name (in ``file`` and in the trace ids of qlog files)."""

    def local(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.drop("file").with_columns(
            pl.col("trace").cast(pl.String).str.replace(r"^.*#", "#")
        )

    assert_frame_equal(local(a), local(b))


def test_a_30mb_contained_json_reads_like_its_gzip_copy(tmp_path: Path) -> None:
    plain = tmp_path / "big.qlog"
    n_events = big_contained(plain, 30 << 20)
    packed = _gzip_copy(plain)
    for reader in (read_transitions, read_metrics, read_traces):
        _same(reader(plain), reader(packed))
    frame = read_transitions(plain)
    assert frame.height > 100
    assert read_traces(plain).row(0, named=True)["n_events"] == n_events


def test_a_12mb_csv_reads_like_its_gzip_copy(tmp_path: Path) -> None:
    plain = tmp_path / "big.csv"
    states = ["SlowStart", "CongestionAvoidance", "Recovery", "ApplicationLimited"]
    with plain.open("w") as f:
        f.write("trace,time_ms,state,vantage,raw_state,trigger\n")
        n = 0
        while f.tell() < 12 << 20:
            for i in range(1000):
                # a quoted trigger holding a comma and a line feed crosses chunk boundaries
                trigger = '"loss,\nburst"' if i % 97 == 0 else "ack"
                f.write(f"run-{n // 500},{n % 500 * 1.5},{states[i % 4]},client,x,{trigger}\n")
                n += 1
    packed = _gzip_copy(plain)
    a, b = read_transitions(plain), read_transitions(packed)
    _same(a, b)
    assert a.filter(pl.col("trigger") == "loss,\nburst").height > 0
    assert a["trace"].n_unique() == n // 500 + (n % 500 > 0)


def _run_child(code: str) -> tuple[int, str, float]:
    """Run ``code`` in a fresh interpreter; (exit code, output, peak RSS in MB)."""
    run = run_child(code)
    return run.returncode, run.stdout + run.stderr, run.peak_mb


def _bomb(path: Path, *, compression: str, total: int = 1 << 30) -> None:
    """A valid JSON-SEQ qlog that inflates to ``total`` bytes: a header, then the same block
    of events repeated (zstd), or events padded with 1 MiB of spaces (gzip: deflate inflates
    at most about 1030x, and only runs like that get there)."""
    header = {"qlog_format": "JSON-SEQ", "qlog_version": "0.3", "trace": {"vantage_point": {}}}
    if compression == "zstd":
        events = b"".join(
            b"\x1e"
            + orjson.dumps({"time": 1.0, "name": "transport:packet_sent", "data": {"n": i}})
            + b"\n"
            for i in range(20000)
        )
    else:
        events = b'\x1e{"time": 1.0, "name": "transport:packet_sent", "data": {}' + (
            b" " * (1 << 20) + b"}\n"
        )
    with path.open("wb") as raw:
        if compression == "zstd":
            writer = zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=False)
        else:
            writer = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6)
        with writer:
            writer.write(b"\x1e" + json.dumps(header).encode() + b"\n")
            written = 0
            while written < total:
                writer.write(events)
                written += len(events)


@pytest.mark.parametrize("compression", ["zstd", "gzip"])
def test_a_1gb_bomb_stops_with_our_error_in_bounded_memory(
    tmp_path: Path, compression: str
) -> None:
    """zstd inflates the file over 1000x: stopped by the ratio cap after 64 MiB. Deflate
    cannot exceed about 1030x, so the gzip file is read to its end (1 GiB), in bounded memory."""
    bomb = tmp_path / f"bomb.sqlog.{compression}"
    _bomb(bomb, compression=compression)
    assert bomb.stat().st_size < 4 << 20
    code, output, peak = _run_child(
        f"""
        from quicsm.core.errors import QlogError
        from quicsm.extract.read import read_transitions
        try:
            print("ROWS", read_transitions({str(bomb)!r}).height)
        except QlogError as exc:
            print("ERROR", exc)
        """
    )
    assert code == 0, output
    if compression == "zstd":
        assert f"ERROR {bomb}: expected a zstd stream expanding at most 1000x" in output
        assert "ReadLimits.max_ratio" in output
    else:
        assert "ROWS 1" in output
    assert peak <= RSS_LIMIT_MB, output


def test_a_1gb_stream_read_without_the_ratio_cap_finishes_in_bounded_memory(
    tmp_path: Path,
) -> None:
    bomb = tmp_path / "big.sqlog.zst"
    _bomb(bomb, compression="zstd")
    code, output, peak = _run_child(
        f"""
        from quicsm.extract.read import read_traces
        from quicsm.qlog.blocks import ReadLimits
        frame = read_traces({str(bomb)!r}, limits=ReadLimits(max_ratio=float("inf")))
        print("EVENTS", frame["n_events"][0])
        """
    )
    assert code == 0, output
    assert "EVENTS " in output and int(output.split("EVENTS ")[1].split()[0]) > 10**6
    assert peak <= RSS_LIMIT_MB, output


def test_a_nesting_bomb_in_contained_json_is_our_error_in_bounded_memory(tmp_path: Path) -> None:
    """A contained-JSON document whose one event opens 24 MiB of brackets and never closes them
    (found by the fuzz campaign: the structure scanner's index arrays, eight bytes per bracket
    and several of them, took about 500 MB for one 8 MiB block): a cut-off document, read with
    a warning or stopped with our error, at a peak RSS like any other read."""
    bomb = tmp_path / "nested.qlog.gz"
    depth = 24 << 20
    with gzip.open(bomb, "wb", compresslevel=9) as out:
        out.write(b'{"qlog_version": "0.3", "traces": [{"vantage_point": {}, "events": [')
        out.write(b'{"time": 1, "name": "recovery:metrics_updated", "data": ')
        for _ in range(depth >> 20):
            out.write(b"[" * (1 << 20))
        out.write(b"]}]}")
    code, output, peak = _run_child(
        f"""
        from quicsm.core.errors import QlogError
        from quicsm.extract.read import read_transitions
        try:
            print("ROWS", read_transitions({str(bomb)!r}).height)
        except QlogError as exc:
            print("ERROR", exc)
        """
    )
    assert code == 0, output
    assert ("ROWS " in output or f"ERROR {bomb}" in output) and "an unexpected" not in output
    assert peak <= 300, output


def test_limits_are_configurable_and_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlog.gz"
    _bomb(path, compression="gzip", total=8 << 20)
    with pytest.raises(QlogError, match=r"t\.sqlog\.gz: expected at most 1 MiB decompressed"):
        read_transitions(path, limits=ReadLimits(max_decompressed_bytes=1 << 20))
    # one record over the cap (a stream without separators), in both modes
    huge = tmp_path / "h.sqlog"
    huge.write_bytes(b'\x1e{"qlog_format": "JSON-SEQ", "trace": {}}\n\x1e"' + b"x" * (3 << 20))
    small = ReadLimits(max_record_bytes=1 << 20)
    with pytest.raises(QlogError, match=r"h\.sqlog: expected records of at most 1 MiB"):
        read_transitions(huge, limits=small)
    diag = Diagnostics()
    with pytest.warns(UserWarning):
        assert read_transitions(huge, on_error="skip", diagnostics=diag, limits=small).is_empty()
    assert diag.skipped_files == 1 and "expected records of at most 1 MiB" in diag.reasons[0]
    assert read_transitions(path).height >= 1  # the default limits read it
