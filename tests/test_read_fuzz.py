"""Fuzzing the readers with mutations of the real fixtures (a bounded budget; the long campaign
is ``benchmarks/fuzz_campaign.py``, its results in ``docs/formats.md``).

Every mutated file, in both modes, is read by every reader and by ``inspect`` and ends in rows
or in our error; a Python exception, a leaked Python warning, or an error only the readers'
last-resort boundary caught fails the test. When a lenient read skips nothing, the strict read
gives the same rows.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal
from read_outcome import read_everything

from quicsm.core.diagnostics import Diagnostics
from quicsm.core.errors import QuicsmError
from quicsm.extract.read import read_transitions
from quicsm.testing.mutate import MUTATIONS, mutate, seed_files

SEEDS = seed_files()
KINDS = sorted(MUTATIONS)


def test_the_seeds_are_the_real_fixtures() -> None:
    names = [name for name, _ in SEEDS]
    assert len(SEEDS) >= 15 and any(n.startswith("real/") for n in names)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.sampled_from(range(len(SEEDS))),
    rng_seed=st.integers(0, 2**32 - 1),
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=3, unique=True),
)
def test_mutated_real_files_end_in_rows_or_our_error(
    tmp_path: Path, seed: int, rng_seed: int, kinds: list[str]
) -> None:
    name, data = SEEDS[seed]
    rng = random.Random(rng_seed)
    path = tmp_path / f"m{rng_seed}"
    path.write_bytes(mutate(data, rng, kinds=kinds))
    for lenient in (False, True):
        outcome, _ = read_everything(path, lenient=lenient)
        assert outcome in ("read", "QlogError", "InputError")
    diag = Diagnostics()
    try:
        lenient_rows = read_transitions(path, on_error="skip", diagnostics=diag)
    except QuicsmError:
        return
    if diag.skipped_records == 0 and diag.skipped_files == 0:
        assert_frame_equal(read_transitions(path), lenient_rows)


@pytest.mark.parametrize("kind", KINDS)
def test_each_mutation_changes_a_real_file(kind: str) -> None:
    rng = random.Random(7)
    _, data = next((n, d) for n, d in SEEDS if n.endswith("quicgo_0.3.sqlog"))
    assert any(MUTATIONS[kind](data, rng) != data for _ in range(5))


def test_times_going_backwards_strict_raises_lenient_skips(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlog"
    header = b'\x1e{"qlog_format": "JSON-SEQ", "trace": {}}\n'
    ev = b'\x1e{"time": %s, "name": "recovery:congestion_state_updated", "data": {"new": "%s"}}\n'
    path.write_bytes(
        header + ev % (b"100", b"slow_start") + ev % (b"5", b"recovery") + ev % (b"120", b"x")
    )
    with pytest.raises(QuicsmError, match=r"record 3 \(line 3\): expected a time no earlier"):
        read_transitions(path)
    diag = Diagnostics()
    with pytest.warns(UserWarning):
        frame = read_transitions(path, on_error="skip", diagnostics=diag)
    assert diag.skipped_records == 1
    assert frame["time_ms"].to_list() == sorted(frame["time_ms"].to_list())
    assert frame.filter(pl.col("state") == "Init").height == 1
    assert (frame["time_ms"] >= 0).all() and frame["end_ms"][0] == 20.0


def test_out_of_range_values_are_our_error_in_both_modes(tmp_path: Path) -> None:
    from quicsm.extract.read import read_metrics

    path = tmp_path / "h.sqlog"
    header = b'\x1e{"qlog_format": "JSON-SEQ", "trace": {}}\n'
    for value in (b"1e30", b"1" + b"0" * 30, b"-3", b"1.5"):
        path.write_bytes(
            header
            + b'\x1e{"time": 1, "name": "recovery:metrics_updated", "data": {"pto_count": '
            + value
            + b"}}\n"
        )
        with pytest.raises(QuicsmError, match=r"record 2 \(line 2\): expected a (non-neg|finite)"):
            read_metrics(path)
        diag = Diagnostics()
        with pytest.warns(UserWarning):
            assert read_metrics(path, on_error="skip", diagnostics=diag).is_empty()
        assert diag.skipped_records == 1


def test_the_campaign_runs_and_counts_every_input(tmp_path: Path) -> None:
    """benchmarks/fuzz_campaign.py end to end on a few inputs: every input is counted once per
    mode, as rows or our error, and the JSON record says so."""
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "campaign.json"
    proc = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "fuzz_campaign.py"), "--inputs", "4",
         "--seed", "3", "--workers", "1", "--out", str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(out.read_text())
    assert record["inputs"] == 4 and record["broken"] == {} and record["broken_inputs"] == []
    for mode in ("strict", "lenient"):
        counts = record["outcomes"][mode]
        assert sum(counts.values()) == 4 and set(counts) <= {"read", "QlogError", "InputError"}


def test_the_campaign_cuts_large_fixtures_at_a_record(tmp_path: Path) -> None:
    """``seed_files(max_bytes)`` keeps small fixtures whole and cuts a larger one after its last
    whole record within the limit: a prefix that reads without a truncation report."""
    limit = 2 << 20
    whole, cut = dict(SEEDS), dict(seed_files(limit))
    assert whole.keys() == cut.keys()
    large = [name for name, data in whole.items() if len(data) > limit]
    assert large  # the 28 MB stock quic-go trace
    for name, data in whole.items():
        if name not in large:
            assert cut[name] == data
            continue
        assert len(cut[name]) <= limit and data.startswith(cut[name])
        assert cut[name].endswith(b"\n") and data[len(cut[name])] == 0x1E
        path = tmp_path / Path(name).name
        path.write_bytes(cut[name])
        diag = Diagnostics()
        frame = read_transitions(path, diagnostics=diag)
        assert frame.height > 0 and not diag.truncated
