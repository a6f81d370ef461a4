"""A contained-JSON trace whose header members follow its events holds the problems of its
events until the header is complete, the first 64 as problems and the rest only counted: each
of those is known by its place (``traces[i].events[j]``) too, so that two reads of the file
that skip it (the states', then the packets' for ``--split-app-limited``) count it once. On a
real quic-go trace turned into contained JSON, and as a property of the parser."""

from __future__ import annotations

import warnings
from pathlib import Path

import orjson
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.core.diagnostics import MAX_KEPT_PROBLEMS, Diagnostics, QuicsmWarning
from quicsm.extract.loading import report_skipped
from quicsm.extract.read import read_transitions
from quicsm.qlog.source import read_qlog

ROOT = Path(__file__).resolve().parents[1]
QUIC_GO = ROOT / "traces" / "quic-go-v0.65.0.qlog"

#: a state event every read rejects (no "new" state), at a time it may have
_NO_STATE = {"name": "recovery:congestion_state_updated", "data": {}}


def _contained(tmp_path: Path, n_bad: int) -> Path:
    """The first trace of the shipped quic-go v0.65.0 file as a contained JSON document, its
    events before its header members, with ``n_bad`` bad state events as events 100, 101..."""
    text = zstandard.ZstdDecompressor().stream_reader(QUIC_GO.open("rb")).read()
    records = text.split(b"\x1e")
    headers = [i for i, r in enumerate(records) if b'"file_schema"' in r]
    head = orjson.loads(records[headers[0]])
    events = [orjson.loads(r) for r in records[headers[0] + 1 : headers[1]]]
    bad = [{"time": events[99]["time"], **_NO_STATE} for _ in range(n_bad)]
    trace = {"events": [*events[:100], *bad, *events[100:]], **head["trace"]}
    doc = {"qlog_version": "0.3", "qlog_format": "JSON", "traces": [trace]}
    path = tmp_path / "contained.qlog"
    path.write_bytes(orjson.dumps(doc))
    return path


def _read(path: Path, **kwargs: object) -> Diagnostics:
    diag = Diagnostics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        read_transitions(path, on_error="skip", diagnostics=diag, **kwargs)  # type: ignore[arg-type]
    return diag


def test_split_app_limited_counts_records_beyond_the_kept_problems_once(tmp_path: Path) -> None:
    """70 bad events before the header: 64 problems kept, 6 only counted; the states' and the
    packets' reads both skip all 70, which are 70 (the 6 were counted twice: 76)."""
    n_bad = MAX_KEPT_PROBLEMS + 6
    path = _contained(tmp_path, n_bad)
    for kwargs in (
        {"states": "derived"},
        {"states": "derived", "split_app_limited": True},
        {"split_app_limited": True},
    ):
        diag = _read(path, **kwargs)
        assert diag.skipped_records == n_bad, kwargs
        assert diag.unnamed_records() == 0, kwargs
        assert diag.reasons[0] == (
            f"{path}: traces[0].events[100]: expected congestion_state_updated data with "
            '"new", got none'
        )


def _document(n_good: int, bad_at: list[int], *, header_last: bool) -> bytes:
    events: list[dict[str, object]] = [
        {"time": float(i), "name": "recovery:metrics_updated", "data": {"congestion_window": 1}}
        for i in range(n_good)
    ]
    for i, at in enumerate(sorted(bad_at)):  # before good event ``at``
        events.insert(at + i, {"time": float(at), **_NO_STATE})
    header = {"vantage_point": {"type": "server"}, "title": "t"}
    trace = {"events": events, **header} if header_last else {**header, "events": events}
    return orjson.dumps({"qlog_version": "0.3", "qlog_format": "JSON", "traces": [trace]})


@settings(max_examples=30, deadline=None)
@given(
    n_good=st.integers(0, 20),
    n_bad=st.integers(0, 2 * MAX_KEPT_PROBLEMS + 5),
    header_last=st.booleans(),
    data=st.data(),
)
def test_every_skipped_contained_event_has_its_place(
    tmp_path_factory: pytest.TempPathFactory,
    n_good: int,
    n_bad: int,
    header_last: bool,
    data: st.DataObject,
) -> None:
    """However many events are skipped, and wherever the header is, each has its key: the
    file read twice into one report counts each once."""
    bad_at = sorted(data.draw(st.lists(st.integers(0, n_good), min_size=n_bad, max_size=n_bad)))
    places = {f"traces[0].events[{at + i}]" for i, at in enumerate(bad_at)}
    path = tmp_path_factory.mktemp("doc") / "doc.qlog"
    path.write_bytes(_document(n_good, bad_at, header_last=header_last))
    read = read_qlog(path, lenient=True)
    assert read.skipped == n_bad
    assert read.skipped_keys == places
    diag = Diagnostics()
    for _ in range(2):
        report_skipped(diag, read_qlog(path, lenient=True))
    assert diag.skipped_records == n_bad
