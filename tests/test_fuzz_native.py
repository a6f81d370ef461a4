"""Coverage-guided fuzzing of the native core: a short libFuzzer campaign on its fuzz target
(``benchmarks/fuzz_native.py``; the contract is ``native/tests/contract/mod.rs``, which ``cargo
test`` also checks on every kept input; the long campaign and its numbers are in
``docs/formats.md``)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "fuzz_native.py"


def _driver() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_native", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_seed_corpus_holds_the_fixtures_traces_and_kept_findings(tmp_path: Path) -> None:
    driver = _driver()
    n = driver.seed_corpus(tmp_path, max_bytes=4096)
    names = [p.name for p in tmp_path.iterdir()]
    assert n == len(names)
    assert any(name.startswith("seed-traces_") for name in names)
    assert any(name.startswith("seed-tests_fixtures_") for name in names)
    # the hostile families' records (not their Parquet tables: the target reads records)
    families = [name for name in names if name.startswith("family-")]
    assert any("packet-number" in name for name in families)
    assert any("many-tiny-traces" in name for name in families)
    assert not any(name.endswith(".parquet") for name in families)
    kept = [p for p in driver.REGRESSIONS.iterdir() if p.name != "README.md"]
    assert kept and all(f"regression-{p.name}" in names for p in kept)
    # a large trace is cut to whole records, from its start and from its middle
    cuts = sorted(p for p in tmp_path.iterdir() if p.name.startswith("seed-traces_stacks"))
    assert len(cuts) == 2
    for cut in cuts:
        data = cut.read_bytes()
        assert 0 < len(data) <= 4096 and data.endswith(b"\n")


@pytest.mark.slow
def test_a_short_coverage_guided_campaign_finds_nothing(tmp_path: Path) -> None:
    # Rust and a C++ compiler come with scripts/setup --test: a missing one fails, it does not skip
    build = subprocess.run(
        [sys.executable, str(SCRIPT), "--build"], capture_output=True, text=True, timeout=1200
    )
    assert build.returncode == 0, build.stderr[-3000:]
    corpus, findings = tmp_path / "corpus", tmp_path / "findings"
    findings.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            str(corpus),
            "-max_total_time=60",
            "-timeout=10",
            "-rss_limit_mb=600",
            "-max_len=65536",
            f"-artifact_prefix={findings}/",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    log = proc.stderr[-3000:]
    assert proc.returncode == 0, log
    assert not list(findings.iterdir()), log
    assert "seeded" in proc.stderr, log
    runs = int(proc.stderr.rsplit("Done ", 1)[1].split()[0])
    assert runs > 1000, log  # the fuzzer really ran
    # and was guided by coverage of the native code (edges, from the instrumentation)
    cov = [int(c) for c in re.findall(r"cov: (\d+)", proc.stderr)]
    assert cov and max(cov) > 500, log
