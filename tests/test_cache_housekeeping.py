"""``quicsm cache``: what the cache directory holds, pruning what this version can no longer read
(and, with ``--older-than``, what is old), clearing it; never touching what quicsm did not write.
On a cache filled by a real ``quicsm infer`` of a shipped trace."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.cli import main
from quicsm.cli.cache import _Age
from quicsm.engine.cache import extractor_fingerprint
from quicsm.engine.housekeeping import clear, entries, prune

ROOT = Path(__file__).resolve().parents[1]
TRACE = f"{ROOT / 'traces' / 'quic-go-v0.65.0.qlog'}#0"
OLD = "0123456789abcdef"  # a fingerprint no version has


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache directory as one real ``quicsm infer`` leaves it."""
    base = tmp_path_factory.mktemp("filled")
    code, _, err = _cli("infer", TRACE, "-o", str(base / "out"), "--cache-dir", str(base / "c"))
    assert code == 0, err
    return base / "c"


@pytest.fixture
def cache(filled: Path, tmp_path: Path) -> Path:
    """The filled cache, plus an older version's directories, a chart an older version kept
    and something quicsm did not write."""
    root = tmp_path / "c"
    shutil.copytree(filled, root, symlinks=True)
    for current in [p for p in root.iterdir() if p.name.startswith(extractor_fingerprint())]:
        shutil.copytree(current, root / current.name.replace(extractor_fingerprint(), OLD))
    (root / "charts").mkdir()
    (root / "charts" / "ab.svg").write_text("<svg/>")
    (root / "notes.txt").write_text("mine")
    return root


def _kinds(root: Path) -> dict[tuple[str, bool], int]:
    found: dict[tuple[str, bool], int] = {}
    for e in entries(root):
        found[e.kind, e.stale] = found.get((e.kind, e.stale), 0) + 1
    return found


def test_info_names_every_kind_and_the_older_versions(cache: Path) -> None:
    assert _kinds(cache) == {
        ("partitions", False): 1,
        ("partitions", True): 1,
        ("trace index", False): 1,
        ("trace index", True): 1,
        ("drawn charts", True): 1,  # the report draws its own charts now: never read
        ("unknown", False): 1,
    }
    code, out, err = _cli("cache", "info", "--cache-dir", str(cache))
    assert code == 0, err
    assert out.splitlines()[0] == str(cache)
    assert "partitions (older versions)" in out and "unknown" in out
    assert "`quicsm cache prune` removes them" in out
    code, out, _ = _cli("cache", "info", "--cache-dir", str(cache), "--format", "json")
    doc = json.loads(out)
    sizes = {Path(e["path"]).name: e["bytes"] for e in doc["entries"]}
    assert sizes["notes.txt"] == 4 and doc["bytes"] == sum(sizes.values())
    assert all(size > 0 for size in sizes.values())


def test_prune_removes_only_what_this_version_cannot_read(cache: Path, tmp_path: Path) -> None:
    current = sorted(p.name for p in cache.iterdir() if p.name.startswith(extractor_fingerprint()))
    code, out, err = _cli("cache", "prune", "--cache-dir", str(cache), "--dry-run")
    assert code == 0, err
    assert "would remove" in out and any(p.name.startswith(OLD) for p in cache.iterdir())
    code, out, err = _cli("cache", "prune", "--cache-dir", str(cache))
    assert code == 0, err
    left = sorted(p.name for p in cache.iterdir())
    assert left == sorted([*current, "charts", "notes.txt"])
    assert not any((cache / "charts").iterdir())  # an older version's chart: never read
    # what stays is still this version's cache: the same read is not extracted again
    parts = next(cache.glob("*-hybrid/parts/*.transitions.parquet"))
    before = parts.stat().st_mtime_ns
    code, _, err = _cli("infer", TRACE, "-o", str(tmp_path / "o"), "--cache-dir", str(cache))
    assert code == 0, err
    assert parts.stat().st_mtime_ns == before
    assert sorted(p.name for p in cache.iterdir()) == left


def test_prune_older_than_goes_by_when_entries_were_written(cache: Path) -> None:
    now = time.time()
    chart = cache / "charts" / "ab.svg"
    os.utime(chart, (now - 40 * 86400, now - 40 * 86400))
    old_notes = cache / "notes.txt"
    os.utime(old_notes, (now - 400 * 86400, now - 400 * 86400))
    code, out, err = _cli("cache", "prune", "--older-than", "30d", "--cache-dir", str(cache))
    assert code == 0, err
    assert not chart.exists()
    assert old_notes.exists()  # not quicsm's: never removed
    assert any(cache.glob(f"{extractor_fingerprint()}-*"))  # written just now
    assert not any(cache.glob(f"{OLD}-*"))


def test_clear_removes_everything_quicsm_wrote_and_nothing_else(cache: Path) -> None:
    code, out, err = _cli("cache", "clear", "--cache-dir", str(cache), "--format", "json")
    assert code == 0, err
    removed = {Path(e["path"]).name for e in json.loads(out)["removed"]}
    assert "notes.txt" not in removed and "ab.svg" in removed
    assert sorted(p.name for p in cache.iterdir()) == ["notes.txt"]


def test_bad_input_is_named() -> None:
    code, _, err = _cli("cache", "prune", "--older-than", "3 fortnights")
    assert code == 2 and "expected a number and a unit" in err and "Traceback" not in err


def test_a_cache_dir_that_is_a_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "c"
    path.write_text("x")
    code, _, err = _cli("cache", "info", "--cache-dir", str(path))
    assert code != 0 and "Traceback" not in err


def test_an_absent_cache_holds_nothing(tmp_path: Path) -> None:
    assert entries(tmp_path / "none") == []
    assert prune(tmp_path / "none") == [] and clear(tmp_path / "none") == []


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from("smhdw"))
def test_ages_are_a_number_and_a_unit(n: int, unit: str) -> None:
    seconds = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[unit]
    assert _Age().convert(f"{n}{unit}", None, None) == n * seconds


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["partitions", "index", "chart", "bundle", "unknown"]),
            st.booleans(),  # an older version's (for directories of a version)
            st.integers(min_value=0, max_value=100),  # days since written
        ),
        max_size=12,
    ),
    st.one_of(st.none(), st.integers(min_value=1, max_value=60)),
)
def test_prune_removes_exactly_the_stale_and_the_old(
    layout: list[tuple[str, bool, int]], days: int | None
) -> None:
    """Whatever the directory holds, prune removes exactly the entries of other versions and
    (with an age) those written before it, never anything quicsm did not write."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        now = time.time()
        expected: set[str] = set()
        for i, (kind, older, age) in enumerate(layout):
            fingerprint = OLD if older else extractor_fingerprint()
            path = {
                "partitions": root / f"{fingerprint}-strict-h{'x' * i}",
                "index": root / f"{fingerprint}-lenient-index{'x' * i}",
                "chart": root / "vega" / f"{i}.json",
                "bundle": root / f"vega-bundle-{i}.js",
                "unknown": root / f"other-{i}",
            }[kind]
            if kind in ("partitions", "index"):
                path.mkdir(parents=True)
                (path / "f").write_bytes(b"x" * i)
                os.utime(path / "f", (now - (age + 0.5) * 86400,) * 2)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(b"x" * i)
            os.utime(path, (now - (age + 0.5) * 86400,) * 2)
            stale = older and kind in ("partitions", "index")
            old = days is not None and age >= days  # written half a day past whole days
            if kind != "unknown" and (stale or old):
                expected.add(path.name)
        gone = prune(root, older_than=None if days is None else days * 86400.0, now=now)
        assert {e.path.name for e in gone} == expected
        assert not any(e.path.exists() for e in gone)
        assert all(
            (root / f"other-{i}").exists() for i, (k, *_) in enumerate(layout) if k == "unknown"
        )
