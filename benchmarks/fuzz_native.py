"""Coverage-guided fuzzing of the native core (the scan, the record decoder and the deriver of
``native/``) with libFuzzer, on the stable Rust toolchain.

The target, ``native/fuzz/fuzz_targets/records.rs``, reads any bytes as one region of records
and checks the contract of ``native/tests/contract/mod.rs``: no panic or overflow, the decoder
accepting only JSON, the scan finishing a region of n records in at most n + 1 calls, and the
same rows whether it resumes from its cursor or searches again, reads the region whole or split
in two, or reads it again. ``cargo test`` in ``native/`` checks the same contract on every input
kept under ``native/fuzz/regressions/``.

The fuzzer is the ``libfuzzer-sys`` crate (libFuzzer's sources, compiled by the crate's build
script with the C++ compiler); the coverage instrumentation is the one cargo-fuzz adds, passed
here as ``RUSTFLAGS`` (LLVM's sanitizer-coverage pass, which stable ``rustc`` runs with
``-C passes=sancov-module``), with overflow checks and debug assertions on and no sanitizer. The
build goes to ``$CARGO_TARGET_DIR`` (else ``build/native-target``) under the host's target
triple, apart from the extension module's build.

``CORPUS`` is seeded, when it holds no file, with the real fixtures and the committed traces cut
to their first (and middle) records, and with the kept regression inputs; libFuzzer's options
follow it. A finding is written to ``-artifact_prefix`` (a ``crash-``, ``timeout-`` or ``oom-``
file); once fixed it is kept under ``native/fuzz/regressions/``.

::

    .venv/bin/python benchmarks/fuzz_native.py --build     # build only (scripts/setup --test)
    # the CI run (tests/test_fuzz_native.py): about a minute
    .venv/bin/python benchmarks/fuzz_native.py CORPUS -max_total_time=60 -timeout=10 \\
        -rss_limit_mb=600 -max_len=65536 -artifact_prefix=FINDINGS/
    # the long campaign (docs/formats.md): -fork=1 keeps going after a finding (each kept)
    nice -n 10 .venv/bin/python benchmarks/fuzz_native.py CORPUS -fork=1 -ignore_crashes=1 \\
        -ignore_timeouts=1 -ignore_ooms=1 -max_total_time=3600 -timeout=10 -rss_limit_mb=600 \\
        -max_len=65536 -artifact_prefix=FINDINGS/
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "native" / "fuzz" / "Cargo.toml"
REGRESSIONS = ROOT / "native" / "fuzz" / "regressions"
TARGET = "records"

# the instrumentation cargo-fuzz adds with `--sanitizer none`, all of it stable rustc options
RUSTFLAGS = [
    "-Cpasses=sancov-module",
    "-Cllvm-args=-sanitizer-coverage-level=3",
    "-Cllvm-args=-sanitizer-coverage-inline-8bit-counters",
    "-Cllvm-args=-sanitizer-coverage-pc-table",
    "-Cllvm-args=-sanitizer-coverage-trace-compares",
    "--cfg=fuzzing",
    "-Cdebug-assertions",
    "-Coverflow-checks",
]


class FuzzSetupError(RuntimeError):
    """The fuzz target could not be built (a tool missing or a build failing)."""


def build() -> Path:
    """Builds the fuzz target (a no-op when it is up to date); returns its executable."""
    env = dict(os.environ)
    cargo_bin = Path.home() / ".cargo" / "bin"
    if cargo_bin.is_dir():
        env["PATH"] = f"{env.get('PATH', '')}{os.pathsep}{cargo_bin}"
    target_dir = Path(env.get("CARGO_TARGET_DIR") or ROOT / "build" / "native-target")
    env["CARGO_TARGET_DIR"] = str(target_dir)
    env["RUSTFLAGS"] = " ".join(RUSTFLAGS)
    try:
        triple = subprocess.run(
            ["rustc", "-vV"], capture_output=True, text=True, check=True, env=env
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise FuzzSetupError(f"the native fuzz target needs Rust (rustc, cargo): {e}") from e
    host = next(ln.split(": ", 1)[1] for ln in triple.splitlines() if ln.startswith("host: "))
    # --target: the flags then instrument the target only, not build scripts
    cmd = ["cargo", "build", "--release", "--locked", "--manifest-path", str(MANIFEST)]
    cmd += ["--target", host, "--bin", TARGET]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise FuzzSetupError(f"building the native fuzz target failed:\n{proc.stderr[-4000:]}")
    exe = target_dir / host / "release" / TARGET
    if not exe.is_file():
        raise FuzzSetupError(f"the build left no {exe}")
    return exe


def _records_upto(data: bytes, start: int, size: int) -> bytes:
    """The whole records (lines) of ``data`` in ``size`` bytes from the first line end at or
    after ``start`` (all of ``data`` if it is smaller)."""
    if len(data) <= size:
        return data
    if start:
        start = data.find(b"\n", start) + 1
    cut = data.rfind(b"\n", start, start + size)
    return data[start : cut + 1] if cut > start else data[start : start + size]


def seed_corpus(directory: Path, *, max_bytes: int = 1 << 15) -> int:
    """Writes the seeds into ``directory``: each real fixture and committed trace (decompressed)
    cut to its records in its first ``max_bytes`` and, when larger, in ``max_bytes`` from its
    middle (losses and timeouts come later in a connection), each kept regression input, and
    small inputs of the hostile families (``quicsm.testing.hostile.family_seeds``: many tiny
    traces, out-of-range packet numbers). Returns how many."""
    sys.path.insert(0, str(ROOT))
    from quicsm.qlog.blocks import DecompressedFile
    from quicsm.testing.hostile import family_seeds
    from quicsm.testing.mutate import FIXTURES

    directory.mkdir(parents=True, exist_ok=True)
    sources = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.name != "run.json")
    sources += sorted(p for p in (ROOT / "traces").rglob("*.qlog"))
    n = 0
    for path in sources:
        data = b"".join(DecompressedFile(path).blocks())
        name = str(path.relative_to(ROOT)).replace("/", "_")
        cuts = {_records_upto(data, 0, max_bytes)}
        if len(data) > max_bytes:
            cuts.add(_records_upto(data, len(data) // 2, max_bytes))
        for i, cut in enumerate(sorted(cuts)):
            (directory / f"seed-{name}-{i}").write_bytes(cut)
            n += 1
    for path in sorted(REGRESSIONS.iterdir()):
        if path.name != "README.md":
            (directory / f"regression-{path.name}").write_bytes(path.read_bytes())
            n += 1
    for name, data in family_seeds(tables=False):
        (directory / f"family-{name}").write_bytes(data)
        n += 1
    return n


def main() -> int:
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        # libFuzzer ignores flags that start with '--': without this, --help started a campaign
        print(__doc__)
        return 0 if args else 2
    try:
        exe = build()
    except FuzzSetupError as e:
        print(f"fuzz_native: ERROR: {e}", file=sys.stderr)
        return 1
    if args == ["--build"]:
        print(exe)
        return 0
    corpora = [a for a in args if not a.startswith("-")]
    if corpora:
        corpus = Path(corpora[0])
        if not corpus.is_dir() or not any(p.is_file() for p in corpus.iterdir()):
            print(f"seeded {seed_corpus(corpus)} inputs into {corpus}", file=sys.stderr)
    return subprocess.run([str(exe), *args]).returncode


if __name__ == "__main__":
    sys.exit(main())
