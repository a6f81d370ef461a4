"""Selecting traces without decoding the others: each file's index of trace spans (its traces'
bytes in the decompressed content) and labels, kept in the cache; reads of some traces' spans
give the rows a whole read gives for them, and never look at the bytes outside them."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from quicsm.compare.selection import select_traces
from quicsm.core.errors import QlogError
from quicsm.engine.index import index_dir, trace_index
from quicsm.extract.index import INDEX_SCHEMA, read_trace_index, spans_of
from quicsm.extract.packets import read_packet_timelines
from quicsm.extract.read import read_metrics, read_traces, read_transitions
from quicsm.qlog.paths import TraceSpans
from quicsm.qlog.source import read_qlog

FIXTURES = Path(__file__).parent / "fixtures" / "qlog"
#: one-trace JSON-SEQ files of four producers, one after another in one file
SEQ_PARTS = ("quicgo_0.3.sqlog", "quiche_quic.sqlog", "neqo_0.4.sqlog", "quicgo_file_schema.sqlog")


def _seq_file(directory: Path, *, compress: bool = False) -> Path:
    data = b"".join((FIXTURES / name).read_bytes() for name in SEQ_PARTS)
    path = directory / ("many.sqlog.gz" if compress else "many.sqlog")
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def _ndjson_file(directory: Path) -> Path:
    one = (FIXTURES / "draft02.ndjson").read_bytes()
    path = directory / "many.ndjson"
    path.write_bytes(one.rstrip(b"\n") + b"\n" + one + one)
    return path


def _same_trace(a: object, b: object) -> None:
    fields = ("index", "vantage", "title", "labels", "first_time", "last_time", "n_events")
    assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
    assert a.states == b.states and a.metrics == b.metrics  # type: ignore[attr-defined]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kind=st.sampled_from(["seq", "seq.gz", "ndjson"]),
    chosen=st.sets(st.integers(0, 3), min_size=1),
    block_size=st.sampled_from([1, 7, 64, 1 << 20]),
)
def test_a_read_of_spans_gives_the_chosen_traces_of_a_whole_read(
    tmp_path: Path, kind: str, chosen: set[int], block_size: int
) -> None:
    """Whatever traces are chosen and however the content arrives in blocks, reading their
    spans gives each chosen trace as a read of the whole file gives it (number, labels, times,
    event counts, states and metrics), and the spans a whole read reports."""
    path = (
        _ndjson_file(tmp_path) if kind == "ndjson" else _seq_file(tmp_path, compress=kind != "seq")
    )
    whole = read_qlog(path, count=True, want_metrics=True)
    assert whole.spans is not None and [s[0] for s in whole.spans] == list(range(len(whole.traces)))
    assert [s[1] for s in whole.spans[1:]] == [s[2] for s in whole.spans[:-1]]  # back to back
    spans = [s for s in whole.spans if s[0] in chosen]
    part = read_qlog(path, count=True, want_metrics=True, spans=spans, block_size=block_size)
    assert [t.index for t in part.traces] == [s[0] for s in spans]
    assert part.spans == spans
    for trace in part.traces:
        _same_trace(trace, whole.traces[trace.index])


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_readers_given_spans_return_the_rows_of_those_traces(tmp_path: Path) -> None:
    """read_transitions, read_metrics and read_traces of a file's spans: the rows a whole read
    gives for those traces, ids and all (the metrics of the shipped 75-trace file too)."""
    shipped = Path(__file__).parent.parent / "traces" / "quic-go-v0.65.0.qlog"
    for path in (_seq_file(tmp_path), shipped):
        index = read_trace_index([path])
        assert index.columns == list(INDEX_SCHEMA)
        picked = index.filter(pl.col("number").is_in([1, 3]))
        (spans,) = spans_of(picked)
        assert isinstance(spans, TraceSpans) and [s[0] for s in spans.spans] == [1, 3]
        ids = picked.get_column("trace").cast(pl.String).to_list()
        for reader in (read_transitions, read_metrics, read_traces):
            whole = reader([path]).filter(pl.col("trace").cast(pl.String).is_in(ids))
            assert_frame_equal(reader([spans]), whole, categorical_as_str=True)
        assert index.drop("number", "start", "end").equals(read_traces([path]))


def test_bytes_outside_the_spans_are_never_looked_at(tmp_path: Path) -> None:
    """A file whose second trace holds a broken record: a strict read of the whole file fails
    on it; reads of the other traces' spans do not see it; a read of its own span names the same
    record and line as the whole read."""
    good = (FIXTURES / "quicgo_0.3.sqlog").read_bytes()
    broken = good.replace(b'{"time":', b'{"time" 1,', 1)  # its first event no longer JSON
    assert broken != good
    path = tmp_path / "broken.sqlog"
    path.write_bytes(good + broken + good)
    with pytest.raises(QlogError) as whole:
        read_transitions([path])
    lenient = read_qlog(path, count=True, lenient=True)
    assert lenient.spans is not None and len(lenient.spans) == 3
    first, second, third = lenient.spans
    rows = read_transitions([TraceSpans(str(path), (first, third))])
    assert rows.get_column("trace").cast(pl.String).unique().sort().to_list() == [
        f"{path}#0000",
        f"{path}#0002",
    ]
    with pytest.raises(QlogError) as alone:
        read_transitions([TraceSpans(str(path), (second,))])
    assert str(alone.value) == str(whole.value)


def test_the_index_is_kept_per_content_and_follows_renames(tmp_path: Path) -> None:
    """The index of a file is built once and kept under the key of its content; a copy under
    another name is served from it with its own ids; a lenient read that skipped something is
    not kept (it is reported again next time)."""
    cache = tmp_path / "cache"
    path = _seq_file(tmp_path)
    first = trace_index([path], cache_dir=cache)
    assert_frame_equal(first, read_trace_index([path]))
    (kept,) = index_dir(cache, lenient=False).glob("*.parquet")
    copy = tmp_path / "elsewhere" / "copy.sqlog"
    copy.parent.mkdir()
    shutil.copy(path, copy)
    again = trace_index([copy], cache_dir=cache)
    assert list(index_dir(cache, lenient=False).glob("*.parquet")) == [kept]  # served, not built
    assert_frame_equal(again, read_trace_index([copy]))
    kept.write_bytes(b"not parquet")  # a damaged copy: indexed again
    assert_frame_equal(trace_index([path], cache_dir=cache), first)
    broken = tmp_path / "broken.sqlog"
    broken.write_bytes(path.read_bytes() + b"\x1e{not json}\n")
    with pytest.warns(UserWarning, match="skipped"):
        trace_index([broken], on_error="skip", cache_dir=cache)
    assert not list(index_dir(cache, lenient=True).glob("*.parquet"))


def test_file_n_reads_only_the_named_trace(tmp_path: Path) -> None:
    """`FILE#N` (and --where) resolve to the spans of the chosen traces, and the packets of a
    chosen trace are read from its span alone."""
    path = _seq_file(tmp_path)
    chosen = select_traces([f"{path}#2"], where={})
    (spans,) = chosen.to_read
    assert isinstance(spans, TraceSpans) and [s[0] for s in spans.spans] == [2]
    narrowed = select_traces([str(path)], where={"vantage": "server"})
    assert narrowed.traces is not None
    (spans,) = narrowed.to_read
    assert isinstance(spans, TraceSpans)
    assert {f"{path}#{s[0]:04d}" for s in spans.spans} == set(
        narrowed.traces.get_column("trace").cast(pl.String).to_list()
    )
    tid = f"{path}#0000"
    assert read_packet_timelines([TraceSpans(str(path), spans.spans[:1])], [tid]) == (
        read_packet_timelines([path], [tid])
    )
