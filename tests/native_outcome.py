"""What a read gives with the native deriver and without it (tests/test_native.py and
benchmarks/native_differential.py compare the two)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from quicsm.core.diagnostics import Diagnostics
from quicsm.core.errors import QuicsmError
from quicsm.extract.read import read_transitions


@contextmanager
def native(on: bool) -> Iterator[None]:
    """Readers use the native deriver (``on``) or the Python one, inside the block."""
    old = os.environ.get("QUICSM_NATIVE")
    os.environ["QUICSM_NATIVE"] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["QUICSM_NATIVE"]
        else:
            os.environ["QUICSM_NATIVE"] = old


def outcome(path: Path, *, on: bool, states: str, lenient: bool) -> tuple[Any, ...]:
    """``("rows", frame, diagnostics)`` or ``("error", type, message)``."""
    diag = Diagnostics()
    with native(on), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            frame = read_transitions(
                path, states=states, on_error="skip" if lenient else "raise", diagnostics=diag
            )
        except QuicsmError as error:
            return ("error", type(error).__name__, str(error))
    return ("rows", frame, diag)


def compare(path: Path, *, states: str, lenient: bool) -> tuple[str | None, tuple[Any, ...]]:
    """(what differs between the native and the Python deriver, ``None`` if nothing; the
    native outcome)."""
    ours = outcome(path, on=True, states=states, lenient=lenient)
    reference = outcome(path, on=False, states=states, lenient=lenient)
    if ours[0] != reference[0]:
        found = f"native {ours[0]} {ours[1:] if ours[0] == 'error' else ''}, python {reference}"
        return found, ours
    if ours[0] == "error":
        return (None if ours == reference else f"native {ours[1:]}, python {reference[1:]}"), ours
    if not ours[1].equals(reference[1]):
        return f"rows differ:\nnative {ours[1]}\npython {reference[1]}", ours
    if ours[2] != reference[2]:
        return f"diagnostics differ: native {ours[2]}, python {reference[2]}", ours
    return None, ours


def differences(path: Path, *, states: str, lenient: bool) -> str | None:
    """``None`` when both derivers give the same outcome, else what differs."""
    return compare(path, states=states, lenient=lenient)[0]
