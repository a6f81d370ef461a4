"""Coverage-guided fuzzing of the readers: the oracle (``tests/fuzz_oracle.py``) on every
regression input, and a short Atheris campaign (``benchmarks/fuzz_readers.py``; the long
campaign and its numbers are in ``docs/formats.md``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fuzz_oracle import ContractBroken, Oracle, seed_corpus

from quicsm.testing.hostile import family_seeds

ROOT = Path(__file__).resolve().parents[1]
REGRESSIONS = sorted(
    p for p in (ROOT / "tests" / "fuzz_regressions").iterdir() if p.name != "README.md"
)


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    checker = Oracle()
    yield checker
    checker.close()


@pytest.mark.parametrize("path", REGRESSIONS, ids=lambda p: p.name)
def test_regression_inputs_keep_the_contract(oracle: Oracle, path: Path) -> None:
    oracle.check(path.read_bytes())


def test_the_oracle_catches_a_broken_contract(
    oracle: Oracle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader failing with a foreign exception, or natively reading differently, is caught."""
    import quicsm.extract.read as read

    data = (ROOT / "tests" / "fixtures" / "qlog" / "quicgo_0.3.sqlog").read_bytes()
    oracle.check(data)

    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("boom")

    monkeypatch.setattr(read, "read_traces", broken)
    with pytest.raises(ValueError, match="boom"):
        oracle.check(data)
    monkeypatch.undo()

    from quicsm.core import native

    if native.installed():
        real = read.read_transitions

        def differs(path: Path, **kwargs: object) -> object:
            frame = real(path, **kwargs)  # type: ignore[arg-type]
            return frame.head(1) if native.module() is not None else frame

        monkeypatch.setattr(read, "read_transitions", differs)
        with pytest.raises(ContractBroken, match="rows differ"):
            oracle.check(data)


def test_the_corpus_holds_the_hostile_families(tmp_path: Path) -> None:
    seed_corpus(tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("family-"))
    for family in ("many-tiny-traces", "packet-number-", "typed-", "corrupt-"):
        assert any(family in name for name in names), family


FAMILIES = dict(family_seeds())


@pytest.mark.parametrize("name", sorted(FAMILIES), ids=lambda name: name.rsplit(".", 1)[0])
def test_the_hostile_families_keep_the_contract(oracle: Oracle, name: str) -> None:
    """Small inputs of each family the campaigns found (many tiny traces, out-of-range packet
    numbers, typed and corrupt Parquet tables) through the whole oracle, stderr included."""
    oracle.check(FAMILIES[name])


def test_the_oracle_catches_output_on_stderr(
    oracle: Oracle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library's report on stderr (as Rust's panic hook writes it) breaks the contract."""
    import quicsm.extract.read as read

    data = (ROOT / "tests" / "fixtures" / "qlog" / "quicgo_0.3.sqlog").read_bytes()
    real = read.read_traces

    def noisy(*args: object, **kwargs: object) -> object:
        os.write(2, b"thread '<unnamed>' panicked at x.rs:1:1:\n")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(read, "read_traces", noisy)
    with pytest.raises(ContractBroken, match="written to stderr"):
        oracle.check(data)


@pytest.mark.slow
def test_a_short_coverage_guided_campaign_finds_nothing(tmp_path: Path) -> None:
    import importlib.util

    # part of the test extra: a missing fuzzer fails, it does not skip
    assert importlib.util.find_spec("atheris") is not None, "atheris is in the test extra"
    corpus, findings = tmp_path / "corpus", tmp_path / "findings"
    findings.mkdir()
    assert seed_corpus(corpus) >= 15
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "fuzz_readers.py"),
            str(corpus),
            "-max_total_time=60",
            "-timeout=20",
            "-rss_limit_mb=1536",
            "-max_len=65536",
            f"-artifact_prefix={findings}/",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = proc.stderr[-3000:]
    assert proc.returncode == 0, log
    assert not list(findings.iterdir()), log
    runs = int(proc.stderr.rsplit("Done ", 1)[1].split()[0])
    assert runs > 200, log  # the fuzzer really ran
