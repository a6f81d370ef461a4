"""Coverage-guided fuzzing of the readers with Atheris (libFuzzer for Python).

Every input the fuzzer makes is checked by ``Oracle`` of ``tests/fuzz_oracle.py``: every reader, in
both modes, natively and in Python, ends in rows or our error, with no leaked warning, and the
native and Python derivers agree. quicsm's modules are instrumented for coverage, so the fuzzer
keeps the inputs that reach new code. ``CORPUS`` is seeded with the real fixtures when it holds
no file; libFuzzer's own options follow it. A hang (``-timeout`` seconds on one input) or a
resident set over ``-rss_limit_mb`` is a finding as well; each finding is written to
``-artifact_prefix`` (a ``crash-``, ``timeout-`` or ``oom-`` file), to be kept under
``tests/fuzz_regressions/`` once fixed.

::

    # the CI run (tests/test_fuzz_readers.py): about a minute
    .venv/bin/python benchmarks/fuzz_readers.py CORPUS -max_total_time=60 -timeout=20 \\
        -rss_limit_mb=1536 -max_len=65536 -artifact_prefix=FINDINGS/
    # the long campaign (docs/formats.md): in -fork mode, each job a fresh process, so the
    # contract's 600 MB holds per job (one instrumented process grows by about 0.1 MB per input,
    # which the readers alone do not); hangs and memory failures are counted and kept, and the
    # campaign goes on
    .venv/bin/python benchmarks/fuzz_readers.py CORPUS -fork=1 -ignore_ooms=1 \\
        -ignore_timeouts=1 -max_total_time=3600 -timeout=20 -rss_limit_mb=600 -max_len=65536 \\
        -artifact_prefix=FINDINGS/
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

if __name__ == "__main__" and (len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help")):
    # libFuzzer ignores flags that start with '--': without this, --help started a campaign
    print(__doc__)
    sys.exit(0 if len(sys.argv) > 1 else 2)

import atheris  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

with atheris.instrument_imports(include=["quicsm"]):
    # every module the readers run, imported here to be instrumented
    import quicsm.extract.read
    import quicsm.qlog.inspect  # noqa: F401

from fuzz_oracle import Oracle, seed_corpus  # noqa: E402


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    if args:
        corpus = Path(args[0])
        if not corpus.is_dir() or not any(p.is_file() for p in corpus.iterdir()):
            print(f"seeded {seed_corpus(corpus)} fixtures into {corpus}", file=sys.stderr)
    oracle = Oracle()
    # libFuzzer's -fork mode runs argv[0] through the shell: this interpreter and this script
    argv = [f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).resolve()))}"]
    try:
        atheris.Setup(argv + sys.argv[1:], oracle.check)
        atheris.Fuzz()
    finally:
        oracle.close()


if __name__ == "__main__":
    main()
