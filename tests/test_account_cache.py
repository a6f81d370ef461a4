"""The connection account kept in the engine's cache (:mod:`quicsm.engine.accounts`): what it
serves is what counting from the files gives, whatever traces were counted before; a file's
packets are read once; ``cache=False`` and ``--no-cache`` leave the cache alone, and
``--cache-dir`` is where the index and the account are kept."""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import quicsm.engine.accounts as accounts
from quicsm.cli import main
from quicsm.core.diagnostics import QuicsmWarning
from quicsm.engine.accounts import cached_account
from quicsm.extract.account import read_account
from quicsm.extract.index import read_trace_index
from quicsm.extract.read import read_metrics, read_traces, read_transitions
from quicsm.qlog.blocks import DecompressedFile
from quicsm.qlog.paths import TraceSpans

STACKS = Path(__file__).parent.parent / "traces" / "stacks" / "stacks.qlog"


def _quiet(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        return call(*args, **kwargs)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shortest trace of each producer of the shipped stacks file (real packets of
    aioquic, quiche, quinn and quic-go), as a JSON-SEQ file of their own."""
    index = read_trace_index(STACKS).with_columns(
        (pl.col("end") - pl.col("start")).alias("size"),
        pl.col("labels").str.json_path_match("$.title").alias("who"),
    )
    picked = index.sort("size").unique("who", keep="first").sort("start")
    data = b"".join(DecompressedFile(STACKS).blocks())
    path = tmp_path_factory.mktemp("account") / "stacks-small.sqlog"
    path.write_bytes(b"".join(data[a:b] for a, b in picked.select("start", "end").iter_rows()))
    return path


def _read(path: Path) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    return (
        _quiet(read_transitions, path),
        _quiet(read_metrics, path),
        _quiet(read_traces, path).select("trace", "labels"),
    )


def _only(frame: pl.DataFrame, ids: list[str]) -> pl.DataFrame:
    return frame.filter(pl.col("trace").cast(pl.String).is_in(ids))


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_the_kept_account_is_the_counted_one_whatever_was_counted_before(
    tmp_path_factory: pytest.TempPathFactory, small: Path, data: st.DataObject
) -> None:
    """Counting some traces, then others, then all, each from the cache where it holds them,
    gives every time the rows :func:`read_account` counts from the file for those traces."""
    cache = tmp_path_factory.mktemp("cache")
    t, m, r = _read(small)
    ids = [str(x) for x in t.get_column("trace").unique(maintain_order=True)]
    assert len(ids) >= 3
    whole = _quiet(read_account, t, m, r)
    for _ in range(2):
        some = data.draw(st.lists(st.sampled_from(ids), min_size=1, unique=True))
        got = _quiet(
            cached_account, _only(t, some), _only(m, some), _only(r, some), cache_dir=cache
        )
        assert_frame_equal(got, _only(whole, some))
    assert_frame_equal(_quiet(cached_account, t, m, r, cache_dir=cache), whole)


def test_a_files_packets_are_read_once_and_a_copy_is_served_with_its_own_ids(
    tmp_path: Path, small: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second count of the same traces reads no packet; a copy of the file under another
    name is served from the same rows, named as the copy; ``cache=False`` writes nothing."""
    reads: list[object] = []
    real = accounts.read_packet_timelines

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(accounts, "read_packet_timelines", counted)
    cache = tmp_path / "cache"
    t, m, r = _read(small)
    first = _quiet(cached_account, t, m, r, cache_dir=cache)
    assert len(reads) == 1
    assert list(cache.glob("*/accounts/*.parquet"))
    assert_frame_equal(_quiet(cached_account, t, m, r, cache_dir=cache), first)
    assert len(reads) == 1
    copy = tmp_path / "elsewhere" / "copy.sqlog"
    copy.parent.mkdir()
    shutil.copy(small, copy)
    ct, cm, cr = _read(copy)
    served = _quiet(cached_account, ct, cm, cr, cache_dir=cache)
    assert len(reads) == 1
    assert_frame_equal(served, _quiet(read_account, ct, cm, cr))
    elsewhere = tmp_path / "unused"
    assert_frame_equal(_quiet(cached_account, t, m, r, cache_dir=elsewhere, cache=False), first)
    assert len(reads) == 2 and not elsewhere.exists()


def test_counting_some_traces_reads_only_their_bytes(
    tmp_path: Path, small: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The packets of the traces counted are read from their spans alone when the file's
    index is kept (it locates them); a file not indexed yet is read whole, once, and not
    indexed for it (indexing reads the whole file too)."""
    reads: list[object] = []
    real = accounts.read_packet_timelines
    indexed: list[object] = []
    index = accounts.trace_index

    def counted(paths: Any, *args: Any, **kwargs: Any) -> Any:
        reads.extend(paths)
        return real(paths, *args, **kwargs)

    def indexing(paths: Any, *args: Any, **kwargs: Any) -> Any:
        got = index(paths, *args, **kwargs)
        indexed.append(got.height)
        return got

    monkeypatch.setattr(accounts, "read_packet_timelines", counted)
    monkeypatch.setattr(accounts, "trace_index", indexing)
    t, m, r = _read(small)
    ids = [str(x) for x in t.get_column("trace").unique(maintain_order=True)]
    some = ids[1:3]
    cache = tmp_path / "c"
    got = _quiet(cached_account, _only(t, some), _only(m, some), _only(r, some), cache_dir=cache)
    assert got.get_column("trace").cast(pl.String).to_list() == some
    assert reads == [str(small)] and indexed == [0]  # not indexed: read whole
    assert not list(cache.glob("*-index/*.parquet"))
    _quiet(index, [small], cache_dir=cache)  # as FILE#N or --where index it
    reads.clear()
    other = ids[3:4]
    again = _quiet(
        cached_account, _only(t, other), _only(m, other), _only(r, other), cache_dir=cache
    )
    assert again.get_column("trace").cast(pl.String).to_list() == other
    (spans,) = reads
    assert isinstance(spans, TraceSpans)
    assert [f"{small}#{s[0]:04d}" for s in spans.spans] == other


def test_no_cache_and_cache_dir_reach_the_index_and_the_account(
    tmp_path: Path, small: Path
) -> None:
    """``quicsm diff --cache-dir D`` keeps the account under D; ``--no-cache`` keeps nothing
    anywhere (the default directory included); ``infer FILE#N --cache-dir D`` keeps the index
    there."""
    default = tmp_path / "default"
    env = {"QUICSM_CACHE_DIR": str(default)}
    runner = CliRunner()
    other = tmp_path / "other.sqlog"
    shutil.copy(small, other)
    chosen = tmp_path / "chosen"
    args = ["diff", str(small), "--vs", str(other), "--cache-dir", str(chosen)]
    got = runner.invoke(main, args, env=env)
    assert got.exit_code == 0, got.output
    assert list(chosen.glob("*/accounts/*.parquet"))
    assert not default.exists()
    got = runner.invoke(main, ["diff", str(small), "--vs", str(other), "--no-cache"], env=env)
    assert got.exit_code == 0, got.output
    assert not default.exists()
    indexed = tmp_path / "indexed"
    out = tmp_path / "out"
    args = ["infer", f"{small}#1", "-o", str(out), "--cache-dir", str(indexed)]
    got = runner.invoke(main, args, env=env)
    assert got.exit_code == 0, got.output
    assert list(indexed.glob("*-index/*.parquet")) and not default.exists()
    args = ["infer", f"{small}#1", "-o", str(out), "--no-cache"]
    got = runner.invoke(main, args, env=env)
    assert got.exit_code == 0, got.output
    assert not default.exists()
