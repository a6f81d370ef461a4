"""``quicsm diff`` and ``quicsm report`` (and :func:`quicsm.compare.load.compare_paths` /
:func:`~quicsm.compare.load.compare_by_label`) report what the connection account's reads of
the packets skip: a record only those reads decode is named once (file, record, line, what was
expected, trace) and counted exactly, fresh and from the cache; strict, it stops the command
with the error naming it. On real quic-go and aioquic traces (:mod:`test_skipped_once`)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from test_skipped_once import _READ, BAD_LOSS, BAD_PACKET, _broken, _diagnostics

from quicsm.cli import main
from quicsm.compare.load import compare_by_label, compare_paths
from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.core.errors import QlogError

ROOT = Path(__file__).resolve().parents[1]
AIOQUIC = ROOT / "traces" / "aioquic-1.7.2.qlog"

#: a record no read of the states, metrics or trace headers decodes, cut short: only the wire
#: pass of the account (which rebuilds aioquic's probe timeouts from its packets) reads it whole
BAD_STREAM = b'{"time":12.5,"name":"transport:stream_state_updated","data":{"x":\n'


def _clean(tmp_path: Path) -> Path:
    folder = tmp_path / "clean"
    folder.mkdir()
    return _broken(folder)


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stderr


def _skip_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning: skipped")]


def _reason(path: Path, record: int, got: str) -> str:
    return (
        f"  {path}: record {record} (line {record}): expected a JSON text, got {got!r} "
        f"(trace {path}#0000)"
    )


PACKET_GOT = '{"time":13.5,"name":"transport:packet_se'
LOSS_GOT = '{"time":12.5,"name":"recovery:packet_los'


@pytest.mark.parametrize("command", ["diff", "report"])
def test_cli_names_a_record_only_the_account_skips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """A packet record cut short (hybrid states: quic-go logs its states, so only the packets
    are read from it): one warning naming it, with its trace; the same when the groups' rows
    come from the cache (the account of a file with skipped records is not kept: counted, and
    reported, again)."""
    monkeypatch.setenv("QUICSM_CACHE_DIR", str(tmp_path / "cache"))
    bad = _broken(tmp_path, BAD_PACKET)
    clean = _clean(tmp_path)
    out = ["-o", str(tmp_path / "r.md")] if command == "report" else []
    for run in ("fresh", "cached"):
        code, err = _cli(command, str(bad), "--vs", str(clean), "--lenient", *out)
        assert code == 0, (run, err)
        assert _skip_lines(err) == ["warning: skipped 1 record; first 1 reason:"], (run, err)
        assert _reason(bad, 100, PACKET_GOT) in err.splitlines(), (run, err)
        assert err.count("record 100") == 1, (run, err)


@pytest.mark.parametrize("command", ["diff", "report"])
def test_cli_strict_stops_at_a_record_only_the_account_reads(tmp_path: Path, command: str) -> None:
    bad = _broken(tmp_path, BAD_PACKET)
    clean = _clean(tmp_path)
    out = ["-o", str(tmp_path / "r.md")] if command == "report" else []
    for cache in ([], ["--no-cache"]):
        code, err = _cli(command, str(bad), "--vs", str(clean), *cache, *out,
                         "--cache-dir", str(tmp_path / "cache"))  # fmt: skip
        assert code == 1, err
        assert err.splitlines()[-1] == (
            f"Error: {bad}: record 100 (line 100): expected a JSON text, got {PACKET_GOT!r}"
        ), err
        assert "Traceback" not in err
    assert not (tmp_path / "r.md").exists()


def test_cli_diff_counts_every_read_once(tmp_path: Path) -> None:
    """Derived states: the states' read skips the loss records, the account adds the packet
    records; four records in all, each named once."""
    a = _broken(tmp_path, BAD_LOSS, BAD_PACKET)
    b = tmp_path / "b.sqlog"
    b.write_bytes(a.read_bytes())
    code, err = _cli(
        "diff", str(a), "--vs", str(b), "--states", "derived", "--lenient", "--no-cache"
    )
    assert code == 0, err
    assert _skip_lines(err) == [
        "warning: skipped 1 record; first 1 reason:",
        "warning: skipped 1 more record (2 in all); first 1 reason:",
        "warning: skipped 2 more records (4 in all); first 2 reasons:",
    ], err
    for path in (a, b):
        assert err.count(_reason(path, 100, LOSS_GOT)) == 1, err
        assert err.count(_reason(path, 101, PACKET_GOT)) == 1, err


def _quiet(call, *args, **kwargs):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", QuicsmWarning)
        value = call(*args, **kwargs)
    return value, [w.message for w in caught if isinstance(w.message, QuicsmWarning)]


@pytest.mark.parametrize("states", ["hybrid", "derived"])
def test_compare_paths_diagnostics_hold_the_union(tmp_path: Path, states: str) -> None:
    """The library's diagnostics count the records every read skipped once: the two loss
    records (read for derived states, and by the account) and the two packet records (by the
    account alone); the account's read warns, its warning carrying what it skipped."""
    a = _broken(tmp_path, BAD_LOSS, BAD_PACKET)
    b = tmp_path / "b.sqlog"
    b.write_bytes(a.read_bytes())
    diag = Diagnostics()
    _, caught = _quiet(
        compare_paths, [str(a)], [str(b)], on_error="skip", states=states, diagnostics=diag
    )
    assert diag.skipped_records == 4
    assert sorted(r.split(" (line")[0] for r in diag.reasons) == sorted(
        f"{p}: record {n}" for p in (a, b) for n in (100, 101)
    )
    assert all(r.endswith(f"(trace {r.split(':')[0]}#0000)") for r in diag.reasons)
    # the packet records are warned of (by the account's read, once per record)
    for path in (a, b):
        assert sum(f"{path}: record 101 (line 101)" in str(w) for w in caught) == 1


def test_compare_by_label_diagnostics_hold_the_union(tmp_path: Path) -> None:
    a = _broken(tmp_path, BAD_LOSS, BAD_PACKET)
    diag = Diagnostics()
    _quiet(compare_by_label, [str(a)], "vantage", on_error="skip", diagnostics=diag)
    assert diag.skipped_records == 2
    assert [r.split(" (line")[0] for r in diag.reasons] == [
        f"{a}: record 100",
        f"{a}: record 101",
    ]


def _aioquic(tmp_path: Path, bad: bytes) -> Path:
    """The first trace of the shipped aioquic 1.7.2 file with ``bad`` as its record 100."""
    text = zstandard.ZstdDecompressor().stream_reader(AIOQUIC.open("rb")).read()
    records = text.split(b"\x1e")
    headers = [i for i, r in enumerate(records) if b'"qlog_version"' in r]
    kept = records[: headers[1]]
    path = tmp_path / "aioquic.sqlog"
    path.write_bytes(b"\x1e".join([*kept[:100], bad, *kept[100:]]))
    return path


def test_the_accounts_wire_pass_reports_what_it_skips(tmp_path: Path) -> None:
    """aioquic logs no probe timeout: the account rebuilds them from the packets, reading every
    record of the file; a record only that read decodes is reported lenient, raises strict."""
    from quicsm.extract.account import read_account
    from quicsm.extract.read import read_metrics, read_traces, read_transitions

    path = _aioquic(tmp_path, BAD_STREAM)
    reads = Diagnostics()
    (frames, _) = _quiet(
        lambda: tuple(
            f(path, on_error="skip", diagnostics=reads)
            for f in (read_transitions, read_metrics, read_traces)
        )
    )
    assert reads.skipped_records == 0  # no other read decodes it
    diag = Diagnostics()
    account = read_account(*frames, on_error="skip", diagnostics=diag)
    assert account.get_column("ptos_from").to_list() == ["packets"]
    assert diag.skipped_records == 1
    assert diag.reasons == [
        f"{path}: record 100 (line 100): expected a JSON text, got "
        """'{"time":12.5,"name":"transport:stream_st' """
        f"(trace {path}#0000)"
    ]
    strict, _ = _quiet(
        lambda: tuple(f(path) for f in (read_transitions, read_metrics, read_traces))
    )
    with pytest.raises(QlogError, match=r"record 100 \(line 100\): expected a JSON text"):
        read_account(*strict)


#: a metrics record cut short: the metrics' read decodes it, the packets' read does not
BAD_METRICS = b'{"time":53.51,"name":"recovery:metrics_updated","data":{"congestion_window":\n'


def test_identify_counts_the_union_of_its_reads(tmp_path: Path) -> None:
    """``identify`` reads the states, the metrics, the trace headers and the account's packets:
    the metrics' read skips the metrics and the loss record, the account's the loss and the
    packet record; three records (the larger of the reads' counts said two, and never named the
    packet record), each named once."""
    from quicsm.controllers.api import identify

    path = _broken(tmp_path, BAD_METRICS, BAD_LOSS, BAD_PACKET)
    diag = Diagnostics()
    _, caught = _quiet(identify, path, on_error="skip", diagnostics=diag)
    assert diag.skipped_records == 3
    assert [r.split(" (line")[0] for r in diag.reasons] == [
        f"{path}: record {n}" for n in (100, 101, 102)
    ]
    assert len(caught) == 1 and caught[0].diagnostics is diag
    code, err = _cli("identify", str(path), "--lenient")
    assert code == 0, err
    assert _skip_lines(err) == ["warning: skipped 3 records; first 3 reasons:"], err
    assert _reason(path, 102, PACKET_GOT) in err.splitlines(), err
    assert err.count("record 101 (line 101)") == 1, err


@given(st.lists(_READ, max_size=6))
def test_identify_merges_its_reads_as_their_union(
    reads: list[tuple[str, set[int | str], int]],
) -> None:
    """However identify's reads overlap, its report counts every named record once and every
    unnamed one."""
    from quicsm.controllers.api import _merge

    into = Diagnostics()
    _merge(into, [_diagnostics(*r) for r in reads])
    union = {(f, k) for f, keys, _ in reads for k in keys}
    assert into.skipped_records == len(union) + sum(u for _, _, u in reads)
    assert len(into.reasons) == len(set(into.reasons))


def test_diff_terminal_view_says_what_it_skipped(tmp_path: Path) -> None:
    """On a terminal ``quicsm diff`` draws its fitted view (not the text the other outputs
    carry): what a lenient read skipped is said there too, above the comparison, as the Markdown,
    text and JSON outputs say it. Run in a real pseudo-terminal."""
    import os
    import pty
    import subprocess
    import sys

    bad = _broken(tmp_path, BAD_PACKET)
    clean = _clean(tmp_path)
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "160", "QUICSM_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "quicsm", "diff", str(bad), "--vs", str(clean), "--lenient"],
        stdout=follower, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    _, err = proc.communicate(timeout=120)
    os.close(leader)
    shown = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, err
    assert "skipped 1 record" in shown, shown
    assert shown.index("skipped 1 record") < shown.index("Recovery"), shown
