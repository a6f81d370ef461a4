"""A lenient read reports each bad record once, however many reads of its file skip it: the
states' read and the packets' read of ``--split-app-limited`` (and of the states derived from
packets) decode some of the same records; the report names the file, the record, what was
expected and the trace, and counts exactly. On a real quic-go trace, through the library and
the CLI (fresh and from the cache); the union of the reads as a property."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from quicsm.cli import main
from quicsm.core.diagnostics import MAX_REASONS, Diagnostics, QuicsmWarning
from quicsm.engine.task import merge_diagnostics
from quicsm.extract.read import read_transitions

ROOT = Path(__file__).resolve().parents[1]
QUIC_GO = ROOT / "traces" / "quic-go-v0.65.0.qlog"

#: a loss record cut short: the states' read (derived states read losses) and the packets' read
#: (the ApplicationLimited split) both decode it
BAD_LOSS = b'{"time":12.5,"name":"recovery:packet_lost","data":{"header":\n'
#: a packet record cut short: only the packets' read decodes it
BAD_PACKET = b'{"time":13.5,"name":"transport:packet_sent","data":{"header":\n'


def _broken(tmp_path: Path, *bad: bytes) -> Path:
    """The first two traces of the shipped quic-go v0.65.0 file (JSON-SEQ) with ``bad``
    records after the first trace's 99th record (so records 100, 101, ... of the file)."""
    text = zstandard.ZstdDecompressor().stream_reader(QUIC_GO.open("rb")).read()
    records = text.split(b"\x1e")
    headers = [i for i, r in enumerate(records) if b'"file_schema"' in r or b'"qlog_version"' in r]
    kept = records[: headers[2]]  # the empty piece before the first separator, two traces
    path = tmp_path / "broken.sqlog"
    path.write_bytes(b"\x1e".join([*kept[:100], *bad, *kept[100:]]))
    return path


def _read(path: Path, **kwargs: object) -> Diagnostics:
    diag = Diagnostics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        read_transitions(path, on_error="skip", diagnostics=diag, **kwargs)  # type: ignore[arg-type]
    return diag


def test_a_record_both_reads_skip_is_counted_once(tmp_path: Path) -> None:
    path = _broken(tmp_path, BAD_LOSS)
    alone = _read(path, states="derived")
    assert alone.skipped_records == 1  # the states' read skips it
    split = _read(path, states="derived", split_app_limited=True)
    assert split.skipped_records == 1
    (reason,) = split.reasons
    assert reason == (
        f"{path}: record 100 (line 100): expected a JSON text, got "
        """'{"time":12.5,"name":"recovery:packet_los' """
        f"(trace {path}#0000)"
    )
    assert split.notes == []


def test_records_only_the_packets_read_sees_are_added(tmp_path: Path) -> None:
    path = _broken(tmp_path, BAD_LOSS, BAD_PACKET)
    assert _read(path, states="derived").skipped_records == 1
    split = _read(path, states="derived", split_app_limited=True)
    assert split.skipped_records == 2
    assert [r.split(":")[1] for r in split.reasons] == [
        " record 100 (line 100)",
        " record 101 (line 101)",
    ]
    # hybrid: quic-go logs its states, so the states' read decodes no loss record; the
    # packets' read skips both
    hybrid = _read(path, split_app_limited=True)
    assert hybrid.skipped_records == 2 and len(hybrid.reasons) == 2


def test_cli_reports_the_record_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``quicsm infer --lenient --split-app-limited``: one warning naming the record once, the
    same when the states come from the cache."""
    monkeypatch.setenv("QUICSM_CACHE_DIR", str(tmp_path / "cache"))
    path = _broken(tmp_path, BAD_LOSS)
    runner = CliRunner()
    args = ["infer", str(path), "--states", "derived", "--lenient", "--split-app-limited", "-q"]
    for run in ("fresh", "cached"):
        result = runner.invoke(main, [*args, "-o", str(tmp_path / run)])
        assert result.exit_code == 0, result.output
        err = result.stderr
        assert err.count("skipped 1 record;") == 1, err
        assert err.count("record 100 (line 100)") == 1, err
        assert f"(trace {path}#0000)" in err
        assert "could not be decoded" not in err


_KEYS = st.one_of(st.integers(0, 50), st.sampled_from(["traces[0].events[3]", "events[7]"]))
_READ = st.tuples(
    st.sampled_from(["a.sqlog", "b.sqlog"]),
    st.sets(_KEYS, max_size=8),
    st.integers(0, 3),  # records the read skipped but could not name
)


def _diagnostics(file: str, keys: set[int | str], unnamed: int) -> Diagnostics:
    d = Diagnostics()
    ordered = sorted(keys, key=lambda k: (isinstance(k, str), k))
    reasons = [(k, f"{file}: {k}: expected x") for k in ordered[:MAX_REASONS]]
    d.skip_records(file, skipped=len(keys) + unnamed, keys=keys, reasons=reasons)
    return d


@given(st.lists(_READ, max_size=6))
def test_merged_reads_count_the_union(reads: list[tuple[str, set[int | str], int]]) -> None:
    """However reads overlap, merged (in any order, through the cache's JSON or not) they
    count every named record once and every unnamed one, and give no reason twice."""
    parts = [_diagnostics(*r) for r in reads]
    union = {(f, k) for f, keys, _ in reads for k in keys}
    expected = len(union) + sum(u for _, _, u in reads)
    for order in (parts, parts[::-1]):
        merged = merge_diagnostics(order)
        assert merged.skipped_records == expected
        assert len(merged.reasons) == len(set(merged.reasons)) <= MAX_REASONS
        again = merge_diagnostics([Diagnostics.from_json(d.to_json()) for d in order])
        assert again.skipped_records == expected and again.reasons == merged.reasons


def test_the_accounts_packets_read_adds_only_new_records(tmp_path: Path) -> None:
    """The connection account reads the packets again: handed the states' diagnostics, it adds
    the record only the packets' read skips, not the one both skip."""
    from quicsm.engine.accounts import cached_account
    from quicsm.extract.read import read_metrics, read_traces

    path = _broken(tmp_path, BAD_LOSS, BAD_PACKET)
    diag = _read(path, states="derived")
    assert diag.skipped_records == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        transitions = read_transitions(path, on_error="skip", states="derived")
        metrics = read_metrics(path, on_error="skip")
        traces = read_traces(path, on_error="skip")
    cached_account(transitions, metrics, traces, on_error="skip", cache=False, diagnostics=diag)
    assert diag.skipped_records == 2
    assert [r.split(":")[1] for r in diag.reasons] == [
        " record 100 (line 100)",
        " record 101 (line 101)",
    ]


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stderr


def _skip_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning: skipped")]


def test_cli_plot_counts_a_record_its_reads_share_once(tmp_path: Path) -> None:
    """``quicsm plot --lenient`` reads the states, the metrics and the packets: one count of
    the file's two bad records, each named once, however many reads skipped them."""
    path = _broken(tmp_path, BAD_LOSS, BAD_PACKET)
    code, err = _cli("plot", f"{path}#0000", "--lenient", "-o", str(tmp_path / "p.svg"))
    assert code == 0, err
    assert _skip_lines(err) == ["warning: skipped 2 records; first 2 reasons:"], err
    assert err.count("record 100 (line 100)") == err.count("record 101 (line 101)") == 1


def test_cli_diff_says_what_each_read_adds(tmp_path: Path) -> None:
    """Two groups read apart: the second read's records are said as more, with the total."""
    a = _broken(tmp_path, BAD_LOSS)
    b = tmp_path / "b.sqlog"
    b.write_bytes(a.read_bytes())
    code, err = _cli(
        "diff", str(a), "--vs", str(b), "--states", "derived", "--lenient", "--no-cache"
    )
    assert code == 0, err
    assert _skip_lines(err) == [
        "warning: skipped 1 record; first 1 reason:",
        "warning: skipped 1 more record (2 in all); first 1 reason:",
    ], err
    assert f"  {a}: record 100" in err and f"  {b}: record 100" in err


def test_a_file_two_reads_skip_is_one_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlog"
    junk.write_text("not a trace")
    diag = Diagnostics()
    for _ in range(2):
        other = Diagnostics()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", QuicsmWarning)
            read_transitions([junk, QUIC_GO], on_error="skip", diagnostics=other)
        diag.absorb(other)
    assert (diag.skipped_files, diag.skipped_records, len(diag.reasons)) == (1, 0, 1)
