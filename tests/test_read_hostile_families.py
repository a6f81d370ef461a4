"""The third hostile campaign's reproducer families, made again by
:mod:`quicsm.testing.hostile`: every reader, natively and in Python, ends each in rows or in one
:class:`~quicsm.core.errors.QuicsmError` that names what is wrong, the same from call to call,
and writes nothing to stderr (read in a fresh process with ``RUST_BACKTRACE=1``, where a panic
of a Rust library would print its report and backtrace)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from quicsm.core import native
from quicsm.testing import hostile

ROOT = Path(__file__).resolve().parents[1]

_READ_ALL = """
import json, sys, warnings
from pathlib import Path
from quicsm.core.errors import QuicsmError
from quicsm.extract.read import read_metrics, read_traces, read_transitions
from quicsm.qlog.inspect import inspect_file

calls = {
    "transitions": lambda p: read_transitions(p),
    "derived": lambda p: read_transitions(p, states="derived"),
    "lenient": lambda p: read_transitions(p, on_error="skip"),
    "metrics": lambda p: read_metrics(p),
    "traces": lambda p: read_traces(p),
    "inspect": lambda p: inspect_file(p).lines(),
}
out = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for name in sys.argv[1:]:
        for call, read in calls.items():
            results = []
            for _ in range(2):
                try:
                    read(Path(name))
                    results.append("rows")
                except QuicsmError as error:
                    results.append(f"{type(error).__name__}: {error}")
            out[f"{Path(name).name} {call}"] = results
foreign = sorted({w.category.__name__ for w in caught} - {"QuicsmWarning"})
print(json.dumps({"outcomes": out, "foreign_warnings": foreign}))
"""


def _families(directory: Path) -> dict[str, Path]:
    """One input of each family (small sizes: cost per trace is measured elsewhere)."""
    d = directory
    return {
        "packet -2 acknowledged by [[-2,-2]]": hostile.out_of_range_packets(
            d / "negative.sqlog", 0, number=-2, where="ack"
        ),
        "ACK range past 2^64": hostile.out_of_range_packets(
            d / "range.sqlog", 4, number=(1 << 64) + 1, where="range"
        ),
        "packet number 2^62": hostile.out_of_range_packets(
            d / "big.sqlog", 4, number=1 << 62, where="packet"
        ),
        "many tiny traces, JSON-SEQ": hostile.many_tiny_traces(d / "tiny.sqlog", 100),
        "many tiny traces, contained": hostile.many_tiny_traces(
            d / "tiny.qlog", 100, contained=True
        ),
        "float trace beside a label": hostile.typed_table(d / "float.parquet", "trace", "float"),
        "bool trace beside a label": hostile.typed_table(d / "bool.parquet", "trace", "bool"),
        "list state": hostile.typed_table(d / "list.parquet", "state", "list", label=False),
        "list time_ms": hostile.typed_table(d / "listtime.parquet", "time_ms", "list"),
        "Parquet the reader panics on": hostile.corrupt_parquet(
            d / "panic.parquet", hostile.PARQUET_PANIC_SEEDS[0]
        ),
    }


@pytest.mark.parametrize("flag", ["1", "0"], ids=["native", "python"])
def test_every_family_gives_rows_or_one_named_error_and_nothing_on_stderr(
    tmp_path: Path, flag: str
) -> None:
    assert native.installed(), "the native core is built with the package"
    families = _families(tmp_path)
    env = {**os.environ, "RUST_BACKTRACE": "1", native.NATIVE_ENV: flag, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _READ_ALL, *map(str, families.values())],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr == ""
    report = json.loads(proc.stdout)
    assert report["foreign_warnings"] == []
    outcomes = report["outcomes"]
    assert len(outcomes) == 6 * len(families)
    for key, (first, second) in outcomes.items():
        assert first == second, key  # deterministic: no task ids, no addresses
        if first != "rows":
            assert first.startswith("QlogError: ") and "unexpected" not in first, (key, first)
    # what each family must end in, strict
    for family, path in families.items():
        strict = outcomes[f"{path.name} transitions"][0]
        if "tiny" in family:
            assert strict == "rows"
            assert outcomes[f"{path.name} metrics"][0] == "rows"
        elif "packet" in family or "ACK" in family:
            assert "expected a packet number from 0 to 2^62-1" in strict, strict
            assert outcomes[f"{path.name} lenient"][0] == "rows"
        elif "panics" in family:
            assert "the Parquet reader cannot decode (it panicked: " in strict, strict
        else:
            assert "to hold" in strict and "got a column of type" in strict, strict
