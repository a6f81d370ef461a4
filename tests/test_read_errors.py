"""Bad input: exact error texts, lenient reading, arbitrary bytes never escaping otherwise."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import polars as pl
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.core.errors import InputError, QlogError, QuicsmError
from quicsm.extract.read import read_metrics, read_traces, read_transitions

RS = "\x1e"
HEADER = {
    "qlog_version": "0.3",
    "qlog_format": "JSON-SEQ",
    "trace": {"vantage_point": {"type": "client"}},
}


def seq(*records: object) -> str:
    return "".join(RS + json.dumps(r) + "\n" for r in records)


def event(t: float, new: str = "slow_start") -> dict[str, object]:
    return {"time": t, "name": "recovery:congestion_state_updated", "data": {"new": new}}


def test_record_that_is_an_array(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlog"
    path.write_text(
        seq(HEADER, event(1)) + RS + '["congestion_state_updated", 2]\n' + seq(event(3))
    )
    with pytest.raises(QlogError) as info:
        read_transitions(path)
    assert str(info.value) == (
        f'{path}: record 3 (line 3): expected an object with "time" and "name", got an array'
    )


def test_record_numbers_and_lines_count_from_the_file_start(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlog"
    # a pretty-printed header spans several lines: record and line numbers differ
    header = RS + json.dumps(HEADER, indent=1) + "\n"
    body = seq(*[{"time": i, "name": "transport:packet_sent", "data": {}} for i in range(1840)])
    path.write_text(
        header + body + RS + '{"time": 5, "name": "recovery:congestion_state_updated"}\n'
    )
    with pytest.raises(QlogError) as info:
        read_transitions(path)
    lines = header.count("\n") + 1840 + 1
    assert str(info.value) == (
        f'{path}: record 1842 (line {lines}): expected congestion_state_updated data with "new", '
        "got none"
    )
    assert info.value.record == 1842


def test_bad_json_names_the_record(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlog"
    path.write_text(
        seq(HEADER) + RS + '{"time": 1, "name": "recovery:congestion_state_updated", \n'
    )
    path.write_text(path.read_text() + seq(event(2)))
    with pytest.raises(
        QlogError, match=r"x.sqlog: record 2 \(line 2\): expected a JSON text, got "
    ):
        read_transitions(path)


def test_bad_time(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlog"
    path.write_text(
        seq(
            HEADER,
            {
                "time": "soon",
                "name": "recovery:congestion_state_updated",
                "data": {"new": "recovery"},
            },
        )
    )
    with pytest.raises(QlogError) as info:
        read_transitions(path)
    assert str(info.value) == (
        f"{path}: record 2 (line 2): expected a number for \"time\", got the string 'soon'"
    )


def test_ndjson_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "x.ndjson"
    lines = [
        json.dumps({**HEADER, "qlog_format": "NDJSON"}),
        json.dumps(event(1)),
        '["congestion_state_updated"]',
        json.dumps(event(2)),
    ]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(QlogError) as info:
        read_transitions(path)
    assert (
        str(info.value)
        == f'{path}: line 3: expected an object with "time" and "name", got an array'
    )


def test_contained_json_errors_name_the_event(tmp_path: Path) -> None:
    path = tmp_path / "x.qlog"
    doc = {
        "qlog_version": "draft-01",
        "traces": [
            {
                "event_fields": ["relative_time", "category", "event", "data"],
                "events": [
                    [0, "transport", "packet_sent", {}],
                    [1, "recovery", "congestion_state_updated"],
                ],
            }
        ],
    }
    path.write_text(json.dumps(doc))
    with pytest.raises(QlogError) as info:
        read_transitions(path)
    assert str(info.value) == (
        f"{path}: traces[0].events[1]: expected an array of 4 values (event_fields), got 3 values"
    )
    path.write_text('{"traces": [}')
    with pytest.raises(QlogError, match=r"x.qlog: line 1: expected ',' or '\]', got '}'"):
        read_transitions(path)


def test_unknown_format(tmp_path: Path) -> None:
    path = tmp_path / "notes.qlog"
    path.write_text("hello world\n")
    with pytest.raises(QlogError) as info:
        read_transitions(path)
    assert str(info.value) == (
        f"{path}: expected a qlog file (JSON, JSON-SEQ or NDJSON) or a transitions table "
        "(CSV or Parquet), got content starting 'hello world\\n'"
    )
    empty = tmp_path / "empty.sqlog"
    empty.write_bytes(b"")
    with pytest.raises(QlogError, match="got an empty file"):
        read_transitions(empty)


def test_a_javascript_wrapped_qlog_is_named(tmp_path: Path) -> None:
    """qvis bundles its examples as ``var name = {...}`` (``.qlog.js``): not qlog, and the
    error says what it is and how to read the object inside."""
    path = tmp_path / "spin_bit.qlog.js"
    path.write_text('var spin_bit = {\n  "qlog_version": "draft-01", "traces": []\n};\n')
    with pytest.raises(QlogError) as info:
        read_transitions(path)
    assert str(info.value) == (
        f"{path}: expected a qlog file (JSON, JSON-SEQ or NDJSON) or a transitions table "
        "(CSV or Parquet), got content starting 'var spin_bit = {\\n  \"qlog': JavaScript "
        "that assigns an object to a variable (as qvis's .qlog.js examples are), not qlog: "
        "save the object after '=' as a file of its own to read it"
    )
    # the qlog repository's draft-00 minimal example starts with comment lines
    commented = tmp_path / "minimal.qlog"
    commented.write_text('// a minimal qlog\n{"qlog_version": "draft-00", "traces": []}\n')
    with pytest.raises(QlogError) as info:
        read_transitions(commented)
    assert str(info.value).endswith(
        "got content starting '// a minimal qlog\\n{\"qlog': a comment, which JSON (and so qlog) "
        "does not allow"
    )
    # text that only begins with the word is not taken for JavaScript
    other = tmp_path / "notes.qlog"
    other.write_text("variables = 3\n")
    with pytest.raises(QlogError) as info:
        read_transitions(other)
    assert str(info.value).endswith("got content starting 'variables = 3\\n'")


def test_binary_content_is_shown_escaped(tmp_path: Path) -> None:
    path = tmp_path / "capture.qlog"
    path.write_bytes(b"\x16\x87U\x95\xea\x00\xffqlog" + bytes(range(200)))
    with pytest.raises(QlogError) as info:
        read_transitions(path)
    message = str(info.value)
    assert message.endswith(
        "got binary content starting '\\x16\\x87U\\x95\\xea\\x00\\xffqlog"
        "\\x00\\x01\\x02\\x03\\x04\\x05\\x06\\x07\\x08\\t\\n\\x0b\\x0c'"
    )
    assert message.isprintable()
    # text whose 24th byte cuts a character is still text
    cut = tmp_path / "cut.qlog"
    cut.write_bytes(("x" * 23 + "é and more").encode())
    with pytest.raises(QlogError, match="got content starting 'x{23}'"):
        read_transitions(cut)


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_a_broken_compressed_file_is_named_so(tmp_path: Path, compression: str) -> None:
    """11 bytes of gzip header (or a zstd frame header) and nothing else: not 'an empty file'."""
    path = tmp_path / "broken.qlog"
    head = (
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x00"
        if compression == "gzip"
        else b"(\xb5/\xfd\x00"
    )
    path.write_bytes(head)
    with pytest.raises(QlogError) as info:
        read_transitions(path)
    assert str(info.value) == (
        f"{path}: expected a valid {compression} stream, got not a valid {compression} stream: "
        "it ends before any content (truncated, or not compressed data)"
    )


def test_bad_on_error_value(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="on_error must be 'raise' or 'skip', not 'ignore'"):
        read_transitions(tmp_path, on_error="ignore")


def test_lenient_counts_exactly_what_it_skipped(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlog"
    bad = [
        RS + json.dumps({"time": i, "name": "recovery:congestion_state_updated"}) + "\n"
        for i in range(7)
    ]
    path.write_text(seq(HEADER, event(0)) + "".join(bad) + seq(event(100, "recovery")))
    (tmp_path / "junk.sqlog").write_text("not a trace")
    diag = Diagnostics()
    with pytest.warns(QuicsmWarning, match="skipped 7 records and 1 file"):
        df = read_transitions(tmp_path, on_error="skip", diagnostics=diag)
    assert df["state"].cast(pl.String).to_list() == ["Init", "SlowStart", "Recovery"]
    assert diag.skipped_records == 7 and diag.skipped_files == 1
    assert len(diag.reasons) == 5
    assert diag.reasons[0].startswith(f"{tmp_path / 'junk.sqlog'}: expected a qlog file")
    assert diag.reasons[1] == (
        f'{path}: record 3 (line 3): expected congestion_state_updated data with "new", got none'
        f" (trace {path}#0000)"
    )
    with pytest.raises(QlogError):
        read_transitions(tmp_path)


def test_truncated_compressed_streams_keep_what_they_have(tmp_path: Path) -> None:
    text = seq(
        HEADER,
        event(0),
        *[
            {"time": i, "name": "transport:packet_sent", "data": {"pad": "x" * 50}}
            for i in range(1, 400)
        ],
        event(500, "recovery"),
    ).encode()
    gz = gzip.compress(text, mtime=0)
    (tmp_path / "cut.sqlog.gz").write_bytes(gz[: len(gz) // 2])
    with pytest.warns(QuicsmWarning, match="gzip stream ends early"):
        df = read_transitions(tmp_path / "cut.sqlog.gz")
    assert df["state"].cast(pl.String).to_list() == ["Init", "SlowStart"]
    zs = zstandard.ZstdCompressor().compress(text)
    (tmp_path / "cut.sqlog.zst").write_bytes(zs[: len(zs) // 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        try:
            df = read_transitions(tmp_path / "cut.sqlog.zst")
        except QlogError as error:  # a cut zstd frame may also be reported as unreadable
            assert "cut.sqlog.zst" in str(error)
        else:
            assert df["state"].cast(pl.String).to_list()[:2] == ["Init", "SlowStart"]


def test_corrupt_gzip_is_our_error(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlog.gz"
    path.write_bytes(b"\x1f\x8b" + b"\x00" * 40)
    with pytest.raises(QlogError, match=r"x.sqlog.gz: expected a readable gzip stream"):
        read_transitions(path)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.binary(max_size=400),
    st.sampled_from([b"", b"\x1e", b"{", b"\x1f\x8b", b"trace,time_ms,state\n"]),
)
def test_arbitrary_bytes_give_rows_or_our_error(tmp_path: Path, data: bytes, prefix: bytes) -> None:
    path = tmp_path / "fuzz.qlog"
    path.write_bytes(prefix + data)
    for reader in (read_transitions, read_metrics, read_traces):
        for on_error in ("raise", "skip"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", QuicsmWarning)
                try:
                    frame = reader(path, on_error=on_error)
                except QuicsmError:
                    continue
            assert isinstance(frame, pl.DataFrame)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False)
        | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "time",
                        "name",
                        "data",
                        "new",
                        "old",
                        "trigger",
                        "trace",
                        "traces",
                        "events",
                        "event_fields",
                        "cwnd",
                        "pto_count",
                        "qlog_version",
                    ]
                ),
                inner,
                max_size=5,
            )
        ),
        max_leaves=20,
    )
)
def test_arbitrary_json_values_give_rows_or_our_error(tmp_path: Path, value: object) -> None:
    """Well-formed JSON of the wrong shape, as records and as whole documents."""
    for name, text in (
        ("a.sqlog", seq(HEADER) + RS + json.dumps(value) + "\n"),
        ("b.qlog", json.dumps({"qlog_version": "draft-01", "traces": [value]})),
        (
            "c.qlog",
            json.dumps(
                {
                    "traces": [
                        {"event_fields": ["time", "category", "event", "data"], "events": [value]}
                    ]
                }
            ),
        ),
        ("d.qlog", json.dumps({"traces": [{"events": [value]}]})),
        ("e.sqlog", RS + json.dumps(value) + "\n"),
    ):
        path = tmp_path / name
        path.write_text(text)
        for on_error in ("raise", "skip"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", QuicsmWarning)
                try:
                    read_transitions(path, on_error=on_error)
                    read_metrics(path, on_error=on_error)
                except QuicsmError:
                    pass
