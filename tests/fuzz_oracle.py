"""The reading contract as an oracle for coverage-guided fuzzing (``benchmarks/fuzz_readers.py``
runs it under Atheris; ``tests/test_fuzz_readers.py`` runs it on the regression inputs and a short
campaign; it lives beside the tests, as ``read_outcome.py`` does, because it uses every layer).

:meth:`Oracle.check` writes one input to a file and reads it with every reader (transitions,
metrics, trace summaries) in both modes, and inspects it; it raises :class:`ContractBroken` when

- a read ends in anything but rows or a :class:`~quicsm.core.errors.QuicsmError`, or in an error
  only the readers' last-resort boundary caught (``"an unexpected ..."``);
- a Python warning that is not a :class:`~quicsm.core.diagnostics.QuicsmWarning` leaks;
- the native core and the Python readers (``QUICSM_NATIVE``) give different transitions
  (derived, hybrid and explicit states: the native deriver, and the native contained-JSON
  reader in every mode), trace summaries or errors;
- anything is written to stderr (file descriptor 2) while it is read: a library's own report
  (a Rust panic's, with its backtrace) is not ours to print.

Hangs and memory are the fuzzer's to catch (libFuzzer's ``-timeout`` and ``-rss_limit_mb``).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from quicsm.core import native
from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.core.errors import QuicsmError


class ContractBroken(AssertionError):
    """An input broke the reading contract (the message says how)."""


def _outcome(read: Any, path: Path, lenient: bool) -> tuple[str, Any]:
    try:
        out = read(path, on_error="skip" if lenient else "raise", diagnostics=Diagnostics())
    except QuicsmError as error:
        message = str(error)
        if "an unexpected " in message:
            raise ContractBroken(f"only the last-resort boundary caught it: {message}") from None
        return ("error", f"{type(error).__name__}: {message}")
    return ("rows", out)


class Oracle:
    """Checks inputs against the reading contract, in a scratch directory of its own."""

    def __init__(self, directory: Path | None = None) -> None:
        self._own = directory is None
        self.directory = (
            Path(tempfile.mkdtemp(prefix="quicsm-fuzz-")) if directory is None else directory
        )
        self.path = self.directory / "input"
        self.checked = 0

    def close(self) -> None:
        if self._own:
            shutil.rmtree(self.directory, ignore_errors=True)

    def check(self, data: bytes) -> None:
        """Raise :class:`ContractBroken` if reading ``data`` breaks the contract."""
        self.path.write_bytes(data)
        self.checked += 1
        with tempfile.TemporaryFile() as spool:
            sys.stderr.flush()
            saved = os.dup(2)
            os.dup2(spool.fileno(), 2)
            try:
                self._check()
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
            spool.seek(0)
            written = spool.read()
        if written:
            raise ContractBroken(f"written to stderr while reading: {written[:300]!r}")

    def _check(self) -> None:
        from quicsm.extract.read import read_metrics, read_traces, read_transitions
        from quicsm.qlog.inspect import inspect_file

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for lenient in (False, True):
                impls = ("1", "0") if native.installed() else ("0",)
                for read in (read_transitions, _explicit, read_traces):
                    outcomes = {}
                    for flag in impls:
                        with _native(flag):
                            outcomes[flag] = _outcome(read, self.path, lenient)
                    if len(impls) == 2:
                        _same(outcomes["1"], outcomes["0"], lenient)
                _outcome(read_metrics, self.path, lenient)
            try:
                inspect_file(self.path).lines()
            except QuicsmError as error:
                if "an unexpected " in str(error):
                    raise ContractBroken(f"inspect: last-resort boundary: {error}") from None
        foreign = [w for w in caught if not issubclass(w.category, QuicsmWarning)]
        if foreign:
            raise ContractBroken(f"a Python warning leaked: {foreign[0].message}")


def _explicit(path: Path, **kwargs: Any) -> Any:
    """The transitions of the states the trace logs (explicit mode: no deriver, but the native
    contained-JSON reader)."""
    from quicsm.extract.read import read_transitions

    return read_transitions(path, states="explicit", **kwargs)


def _same(ours: tuple[str, Any], reference: tuple[str, Any], lenient: bool) -> None:
    mode = "lenient" if lenient else "strict"
    if ours[0] != reference[0]:
        raise ContractBroken(
            f"{mode}: native {ours[0]} {ours[1]!s:.300}, python {reference[1]!s:.300}"
        )
    if ours[0] == "error":
        if ours[1] != reference[1]:
            raise ContractBroken(f"{mode}: native {ours[1]}, python {reference[1]}")
    elif not ours[1].equals(reference[1]):
        raise ContractBroken(f"{mode}: rows differ\nnative {ours[1]}\npython {reference[1]}")


class _native:
    """Readers use the native deriver (``"1"``) or the Python one (``"0"``) inside the block."""

    def __init__(self, flag: str) -> None:
        self.flag = flag
        self.old: str | None = None

    def __enter__(self) -> None:
        self.old = os.environ.get(native.NATIVE_ENV)
        os.environ[native.NATIVE_ENV] = self.flag

    def __exit__(self, *exc: object) -> None:
        if self.old is None:
            os.environ.pop(native.NATIVE_ENV, None)
        else:
            os.environ[native.NATIVE_ENV] = self.old


def seed_corpus(directory: Path, *, max_bytes: int = 1 << 16) -> int:
    """Write the real fixtures (decompressed, their records up to ``max_bytes``) and small
    inputs of the hostile families (:func:`quicsm.testing.hostile.family_seeds`) into
    ``directory`` as a fuzzing corpus; returns how many."""
    from quicsm.testing.hostile import family_seeds
    from quicsm.testing.mutate import seed_files

    directory.mkdir(parents=True, exist_ok=True)
    seeds = seed_files(max_bytes=max_bytes)
    for i, (name, data) in enumerate(seeds):
        (directory / f"seed-{i:03d}-{name.replace('/', '_')}").write_bytes(data)
    families = family_seeds()
    for name, data in families:
        (directory / f"family-{name}").write_bytes(data)
    return len(seeds) + len(families)
