"""One read per file per command: ``quicsm diff`` and ``quicsm report`` decompress each input
once (:func:`quicsm.qlog.blocks.keep_decompressed`, opened by
:func:`quicsm.compare.load.compare_paths` and :func:`~quicsm.compare.load.compare_by_label`),
however many times they read it (its states, its metrics, its packets), and what they write is
the same, byte for byte, as when every read decompresses the file again: on the shipped
version comparison, and on hostile files read leniently (the records they skip counted and
named exactly as before), cold and from the cache."""

from __future__ import annotations

import contextlib
import gzip
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from test_skipped_once import BAD_LOSS, BAD_PACKET, _broken

from quicsm.cli import main
from quicsm.compare import load
from quicsm.compare.load import compare_paths
from quicsm.core.diagnostics import QuicsmWarning
from quicsm.qlog import blocks
from quicsm.qlog.blocks import DecompressedFile, ReadLimits, keep_decompressed
from quicsm.qlog.paths import TraceSpans

ROOT = Path(__file__).resolve().parents[1]
V48 = ROOT / "traces" / "quic-go-v0.48.2.qlog"
V65 = ROOT / "traces" / "quic-go-v0.65.0.qlog"


@pytest.fixture
def decompressions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files decompressed (one entry per decompression begun), counted as they happen."""
    seen: list[str] = []
    inner = DecompressedFile._decompress

    def counted(self: DecompressedFile, raw: object) -> Iterator[bytes]:
        seen.append(str(self.path))
        return inner(self, raw)  # type: ignore[arg-type]

    monkeypatch.setattr(DecompressedFile, "_decompress", counted)
    return seen


def _zst(path: Path) -> Path:
    packed = path.with_name(path.name + ".zst")
    packed.write_bytes(zstandard.ZstdCompressor(level=3).compress(path.read_bytes()))
    path.unlink()
    return packed


def _pair(tmp_path: Path, *bad: bytes) -> tuple[Path, Path]:
    """Two compressed files of two real quic-go traces each, the first with ``bad`` records."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    return _zst(_broken(tmp_path / "a", *bad)), _zst(_broken(tmp_path / "b"))


def test_a_comparison_decompresses_each_file_once(
    tmp_path: Path, decompressions: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read for their trace headers, states, metrics and the account's packets: four reads
    of each file, one decompression; without keeping, one decompression per read."""
    a, b = _pair(tmp_path)
    kept = compare_paths([str(a)], [str(b)])
    assert sorted(decompressions) == sorted([str(a), str(b)])
    decompressions.clear()
    monkeypatch.setattr(blocks, "KEEP_BYTES", 0)  # nothing fits: every read decompresses
    again = compare_paths([str(a)], [str(b)])
    assert decompressions.count(str(a)) == decompressions.count(str(b)) == 4
    assert kept.a.account is not None and again.a.account is not None
    assert kept.b.account is not None and again.b.account is not None
    assert kept.a.account.equals(again.a.account) and kept.b.account.equals(again.b.account)
    assert kept.a.metrics is not None and again.a.metrics is not None
    assert kept.a.metrics.equals(again.a.metrics)
    assert kept.a.transitions.equals(again.a.transitions)


def test_files_are_kept_only_while_the_comparison_runs(
    tmp_path: Path, decompressions: list[str]
) -> None:
    a, b = _pair(tmp_path)
    compare_paths([str(a)], [str(b)])
    compare_paths([str(a)], [str(b)])
    assert sorted(decompressions) == sorted([str(a), str(b)] * 2)
    assert blocks._kept is None


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def _outputs(
    tmp_path: Path, name: str, a: Path, b: Path, *extra: str
) -> dict[str, tuple[int, str, str, bytes]]:
    """What report (HTML) and diff (JSON) write, cold then from the cache they left."""
    out: dict[str, tuple[int, str, str, bytes]] = {}
    cache = tmp_path / f"cache-{name}"
    for run in ("cold", "warm"):
        for command, fmt in (("report", []), ("diff", ["--format", "json"])):
            written = tmp_path / f"{name}-{command}.out"
            code, stdout, stderr = _run(
                command, str(a), "--vs", str(b), *fmt, *extra,
                "--cache-dir", str(cache), "-o", str(written),
            )  # fmt: skip
            body = written.read_bytes() if written.exists() else b""
            text = body.replace(str(written).encode(), b"OUT")  # the report names its output
            text = re.sub(rb"\d{4}-\d\d-\d\d \d\d:\d\d UTC", b"WHEN", text)  # and its time
            shown = stderr.replace(str(written), "OUT").replace(str(cache), "CACHE")
            out[f"{run} {command}"] = (code, stdout, shown, text)
            written.unlink(missing_ok=True)
    return out


def _same_kept_or_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, a: Path, b: Path, *extra: str
) -> dict[str, tuple[int, str, str, bytes]]:
    """The outputs, and the same outputs when nothing is kept (every read decompresses its file
    again, and the account reads the chosen traces' files whole, as before)."""
    kept = _outputs(tmp_path, "kept", a, b, *extra)
    with monkeypatch.context() as m:
        m.setattr(load, "keep_decompressed", contextlib.nullcontext)
        streamed = _outputs(tmp_path, "streamed", a, b, *extra)
    assert kept.keys() == streamed.keys()
    for key in kept:
        assert kept[key] == streamed[key], key
    return kept


def test_a_subset_is_counted_from_its_own_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The account of some traces of a file read whole earlier in the command, by a read that
    reported nothing, reads their spans only (as when the file's index is kept), and counts and
    reports what the file read whole counts and reports: here a bad loss record in the chosen
    trace of file A, which the hybrid states' read of quic-go does not decode (its states are
    logged) and the metrics' and the account's reads skip, named once either way."""
    from quicsm.cli.engine_options import EngineChoice
    from quicsm.engine import accounts

    a, b = _pair(tmp_path, BAD_LOSS)
    read: list[object] = []
    inner = accounts.read_packet_timelines

    def spied(paths: list[object], *args: object, **kwargs: object) -> object:
        read.extend(paths)
        return inner(paths, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(accounts, "read_packet_timelines", spied)
    engine = EngineChoice("local", None, None, tmp_path / "cache", False)
    where = {"vantage": "server"}

    def compared() -> tuple[object, ...]:
        with pytest.warns(QuicsmWarning, match="skipped 1 record; first 1 reason"):
            c = compare_paths(
                [str(a)], [str(b)], where=where, on_error="skip",
                reader=engine.reader(), accounts=engine.accounts(),
            )  # fmt: skip
        assert c.a.account is not None and c.b.account is not None
        assert c.a.account.height == c.b.account.height == 1
        return c.a.account.rows(), c.b.account.rows()

    kept = compared()
    assert [os.fspath(p) for p in read] == [str(a), str(b)]  # type: ignore[call-overload]
    assert all(isinstance(p, TraceSpans) and len(p.spans) == 1 for p in read)
    read.clear()
    with monkeypatch.context() as m:
        m.setattr(load, "keep_decompressed", contextlib.nullcontext)
        assert compared() == kept
    assert not any(isinstance(p, TraceSpans) for p in read)


def test_hostile_files_read_leniently_report_the_same_skipped_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad loss record (the states' and the packets' reads skip it) and a bad packet record
    (only the account's read does) in a compressed file: the same warning, naming each once,
    and the same outputs, kept or not."""
    a, b = _pair(tmp_path, BAD_LOSS, BAD_PACKET)
    got = _same_kept_or_not(tmp_path, monkeypatch, a, b, "--lenient")
    chosen = _same_kept_or_not(
        tmp_path, monkeypatch, a, b, "--lenient", "--where", "vantage=server"
    )
    got.update({f"{key}, chosen": value for key, value in chosen.items()})
    for key, (code, _, err, body) in got.items():
        assert code == 0, (key, err)
        assert "warning: skipped 2 records; first 2 reasons:" in err, (key, err)
        assert err.count("record 100 (line 100)") == err.count("record 101 (line 101)") == 1
        assert body


def test_a_compressed_stream_cut_short_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decompressions: list[str]
) -> None:
    """A gzip file that ends mid-stream (and a strict read of it): read again each time, as
    before, and reported as before."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain = _broken(tmp_path / "a")
    whole = gzip.compress(plain.read_bytes())
    cut = plain.with_name("cut.sqlog.gz")
    cut.write_bytes(whole[: len(whole) * 3 // 4])
    b = _zst(_broken(tmp_path / "b"))
    got = _same_kept_or_not(tmp_path, monkeypatch, cut, b, "--lenient")
    for key, (code, _, err, _) in got.items():
        assert code == 0 and "ends early" in err, (key, err)
    decompressions.clear()
    with pytest.warns(QuicsmWarning, match="the gzip stream ends early"):
        compare_paths([str(cut)], [str(b)], on_error="skip")
    kept = list(decompressions)
    decompressions.clear()
    with monkeypatch.context() as m, pytest.warns(QuicsmWarning, match="ends early"):
        m.setattr(blocks, "KEEP_BYTES", 0)
        compare_paths([str(cut)], [str(b)], on_error="skip")
    assert kept.count(str(b)) == 1 and decompressions.count(str(b)) == 4
    assert kept.count(str(cut)) == decompressions.count(str(cut)) >= 4


@pytest.mark.slow
def test_the_version_report_and_diff_are_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped version comparison (150 traces, 150 MB decompressed): report and diff,
    cold and warm, kept or not."""
    got = _same_kept_or_not(tmp_path, monkeypatch, V48, V65)
    for key, (code, _, err, body) in got.items():
        assert code == 0 and body, (key, err)


@given(
    content=st.binary(min_size=0, max_size=3000),
    block_size=st.integers(1, 700),
    budget=st.integers(0, 4000),
    gz=st.booleans(),
    stop=st.integers(0, 10),
)
def test_kept_blocks_are_the_blocks_read(
    tmp_path_factory: pytest.TempPathFactory,
    content: bytes,
    block_size: int,
    budget: int,
    gz: bool,
    stop: int,
) -> None:
    """Whatever the budget and the block size: every read gives the blocks a read without
    keeping gives; a read stopped early keeps nothing, a file over the budget is not kept."""
    path = tmp_path_factory.mktemp("k") / "f"
    path.write_bytes(gzip.compress(content) if gz else zstandard.ZstdCompressor().compress(content))
    plain = list(DecompressedFile(path, block_size=block_size).blocks())
    assert b"".join(plain) == content
    with keep_decompressed(budget):
        source = DecompressedFile(path, block_size=block_size)
        partial = source.blocks()
        for _ in zip(range(stop), partial, strict=False):
            pass
        del partial  # a read that stops: its generator is closed where it stopped
        stored = blocks._kept
        assert stored is not None
        if stop <= len(plain):
            assert stored.held == 0 and not stored.contents
        for _ in range(2):
            assert list(source.blocks()) == plain
        fits = len(content) <= budget
        assert stored.held == (len(content) if fits and plain else 0)
        other = DecompressedFile(path, block_size=block_size + 1, limits=ReadLimits())
        assert b"".join(other.blocks()) == content
    assert blocks._kept is None
