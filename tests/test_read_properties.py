"""Properties of the readers on generated multi-trace JSON-SEQ / NDJSON files."""

from __future__ import annotations

import dataclasses
import gzip
import warnings
from pathlib import Path

import polars as pl
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_qlog_seq import encode, streams  # the stream strategy of the scanner tests

from quicsm.core.diagnostics import QuicsmWarning
from quicsm.extract.read import read_transitions
from quicsm.qlog.seq import LF, RS
from quicsm.qlog.source import read_qlog

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def read(path: Path) -> pl.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        return read_transitions(path)


@SETTINGS
@given(streams(), st.sampled_from([RS, LF]))
def test_transitions_frame_invariants(
    tmp_path: Path, records: list[dict[str, object]], sep: bytes
) -> None:
    path = tmp_path / ("t.sqlog" if sep == RS else "t.ndjson")
    path.write_bytes(encode(records, sep))
    df = read(path)
    n_headers = sum(1 for r in records if "trace" in r and "name" not in r)
    assert df["trace"].n_unique() == n_headers
    for _, group in df.group_by("trace", maintain_order=True):
        states = group["state"].cast(pl.String).to_list()
        times = group["time_ms"].to_list()
        assert states[0] == "Init" and times[0] == 0.0
        assert all(a != b for a, b in zip(states, states[1:], strict=False))
        assert times == sorted(times)
        assert group["end_ms"].n_unique() == 1 and group["end_ms"][0] >= max(times) - 1e-9


@SETTINGS
@given(streams(), st.sampled_from([1, 7, 64, 4096]))
def test_block_size_and_compression_do_not_matter(
    tmp_path: Path, records: list[dict[str, object]], block: int
) -> None:
    data = encode(records, RS)
    plain = tmp_path / "t.sqlog"
    plain.write_bytes(data)
    expected = [dataclasses.asdict(t) for t in read_qlog(plain).traces]
    assert [dataclasses.asdict(t) for t in read_qlog(plain, block_size=block).traces] == expected
    (tmp_path / "t.sqlog.gz").write_bytes(gzip.compress(data, mtime=0))
    (tmp_path / "t.sqlog.zst").write_bytes(zstandard.ZstdCompressor().compress(data))
    for name in ("t.sqlog.gz", "t.sqlog.zst"):
        got = read_qlog(tmp_path / name, block_size=block).traces
        assert [dataclasses.asdict(t) for t in got] == expected
    frame = read(plain)
    assert read(tmp_path / "t.sqlog.zst").drop("file", "trace").equals(frame.drop("file", "trace"))
