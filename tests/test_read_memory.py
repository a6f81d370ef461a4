"""Every reader streams: memory does not grow with the events a reader does not return, errors
keep nothing alive, and running out of memory is our error in both modes (never a file skipped
in silence). Peak and current RSS are measured in a child process (see test_read_large)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import zstandard
from child_rss import run_child

from quicsm.testing import hostile


def _child(code: str) -> tuple[str, float]:
    """Run ``code`` in a fresh interpreter (warnings off); (its output, its peak RSS in MB)."""
    run = run_child(code, show_warnings=False)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout, run.peak_mb


@pytest.fixture(scope="module")
def metrics_zst(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A valid 48 MiB metrics-only trace (no state events), zstd-compressed."""
    plain = hostile.metrics_only(tmp_path_factory.mktemp("m") / "m.sqlog", 48 << 20)
    packed = plain.with_name("m.sqlog.zst")
    packed.write_bytes(zstandard.ZstdCompressor(level=3).compress(plain.read_bytes()))
    plain.unlink()
    return packed


@pytest.mark.slow
@pytest.mark.parametrize(
    ("reader", "bound_mb"),
    [
        # before: 384 MB (every metric record kept as bytes, then decoded at the trace's end)
        ("from quicsm.extract.read import read_traces as read", 150),
        # before: 265 MB (every metric event kept)
        ("from quicsm.qlog.inspect import inspect_file as read", 150),
        # the baseline: transitions stream through the deriver
        ("from quicsm.extract.read import read_transitions as read", 150),
    ],
    ids=["read_traces", "inspect_file", "read_transitions"],
)
def test_readers_that_return_no_metric_events_do_not_hold_them(
    metrics_zst: Path, reader: str, bound_mb: float
) -> None:
    out, peak = _child(f"{reader}\nprint('OK', type(read({str(metrics_zst)!r})).__name__)")
    assert "OK" in out
    assert peak <= bound_mb, f"peak {peak:.0f} MB"


@pytest.mark.slow
def test_read_metrics_holds_events_as_numbers(metrics_zst: Path) -> None:
    """About 390k rows: the frame itself and ~70 bytes per event while reading (before: a
    Python object per event and per value, 441 MB; then 198 MB)."""
    out, peak = _child(
        f"""
        from quicsm.extract.read import read_metrics
        print("ROWS", read_metrics({str(metrics_zst)!r}).height)
        """
    )
    assert int(out.split("ROWS ")[1].split()[0]) > 300_000
    assert peak <= 200, f"peak {peak:.0f} MB"


#: what read_metrics may add to the peak of read_traces on the same file, per row it returns:
#: the frame itself takes about 50 bytes a row (file and trace categorical, 4 bytes each, the
#: event an enum of one byte, five float columns, absent metrics as nulls that take no memory),
#: plus the parts being read (98 bytes a row measured here with each block's columns copied
#: into polars' memory as they are kept; 127-130 when they were converted through numpy;
#: 143-146 handed over from the native core but freed only when the trace was finished; 192-198
#: as one Arrow struct per block, which kept every column of it); before it was built in
#: compact parts the events were held as numbers and then the frame beside them (268 bytes a
#: row here; 1,865 MB on the 1 GiB file, 838 MB with compact parts, 719 MB with the event an
#: enum, 504 MB with categorical keys)
METRICS_BYTES_PER_ROW = 125


@pytest.mark.slow
def test_read_metrics_peaks_near_the_frame_it_returns(metrics_zst: Path) -> None:
    out, _ = _child(
        f"""
        from quicsm.extract.read import read_metrics, read_traces

        def peak():
            return int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024

        read_traces({str(metrics_zst)!r})  # the reading machinery, imports included
        base = peak()
        rows = read_metrics({str(metrics_zst)!r}).height
        print("ROWS", rows, "PER_ROW", (peak() - base) / rows)
        """
    )
    rows, per_row = int(out.split("ROWS ")[1].split()[0]), float(out.split("PER_ROW ")[1])
    assert rows > 300_000
    assert per_row <= METRICS_BYTES_PER_ROW, f"{per_row:.0f} bytes per row"


def test_failing_reads_keep_nothing_alive(tmp_path: Path) -> None:
    """Five strict reads failing on a 40 MiB record (a 40 KB gzip file), their errors kept, the
    cycle collector off: the decoder's error held the record's text (each kept ~40 MB)."""
    record = (
        b'\x1e{"time":1,"name":"recovery:metrics_updated","data":{"cwnd":"'
        + b"a" * (40 << 20)
        + b'"x}}\n'
    )
    bad = tmp_path / "bad.sqlog.gz"
    bad.write_bytes(gzip.compress(b'\x1e{"qlog_format":"JSON-SEQ","trace":{}}\n' + record, 9))
    out, _ = _child(
        f"""
        import gc
        gc.disable()
        from quicsm.core.errors import QlogError
        from quicsm.extract.read import read_transitions, read_traces

        def rss():
            return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) // 1024

        errors = []
        for reader in (read_transitions, read_traces, read_transitions):
            try:
                reader({str(bad)!r})
            except QlogError as exc:
                errors.append(exc)
        base = rss()
        for _ in range(5):
            try:
                read_transitions({str(bad)!r})
            except QlogError as exc:
                errors.append(exc)
        print("GROWTH", rss() - base, len(errors))
        """
    )
    growth, n = out.split("GROWTH ")[1].split()[:2]
    assert n == "8"
    assert int(growth) < 60, out


def test_running_out_of_memory_is_our_error_in_both_modes(tmp_path: Path) -> None:
    """Under an address-space cap a 60 MiB record cannot be held: strict and lenient reads both
    stop with ResourceError naming the file (lenient used to skip the file: 0 rows)."""
    big = tmp_path / "big.sqlog"
    big.write_bytes(
        b'\x1e{"qlog_format":"JSON-SEQ","trace":{}}\n'
        b'\x1e{"time":1,"name":"transport:packet_sent","data":{"p":"' + b"a" * (60 << 20) + b'"}}\n'
    )
    out, _ = _child(
        f"""
        import resource
        from quicsm.core.errors import QuicsmError, ResourceError
        from quicsm.extract.read import read_traces, read_transitions

        size = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size + (96 << 20), resource.RLIM_INFINITY))
        for reader in (read_traces, read_transitions):
            for mode in ("raise", "skip"):
                try:
                    print(mode, "ROWS", reader({str(big)!r}, on_error=mode).height)
                except ResourceError as exc:
                    print(mode, "RESOURCE", exc)
                except QuicsmError as exc:
                    print(mode, "OTHER", exc)
        """
    )
    assert out.count("RESOURCE") == 4, out
    assert f"{big}: ran out of memory while reading it" in out
