"""The native sendable timeline (``native/src/sendable.rs``) against the Python reference
(``quicsm.extract.sendable.sendable_timeline``): the same segments, counts and limits on
generated frames (hostile values included: integers beyond 64 bits and times that are not
floats go to the Python path), on every shipped trace and on generated and mutated files, read
for the connection account (``byte_offsets=False``, the frames kept as columns)."""

from __future__ import annotations

import dataclasses
import random
import warnings
from array import array
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_outcome import native
from test_native import ROOT
from test_native_packets import IDS, SEEDS, SHIPPED, _packet_file

from quicsm.core import native as native_core
from quicsm.core.diagnostics import Diagnostics
from quicsm.core.errors import QuicsmError
from quicsm.extract.loading import trace_id
from quicsm.extract.packets import PacketColumns, read_packet_timelines
from quicsm.extract.sendable import native_sendable_timeline, sendable_timeline
from quicsm.extract.streams import StreamColumns
from quicsm.testing.mutate import MUTATIONS, mutate

pytestmark = pytest.mark.skipif(
    getattr(native_core.module(), "sendable_timeline", None) is None,
    reason="the native core was built without its sendable timeline",
)

#: few distinct times (equal times, -0.0 against 0.0) so that events meet
times = st.sampled_from([-0.0, 0.0, 0.5, 1.0, 1.0 + 1e-12, 2.0, 7.25, 1e300])
streams = st.sampled_from([-1, 0, 1, 2, 3, 4, 6, 8, 1 << 40])
sizes = st.integers(-3, 1600) | st.sampled_from([(1 << 62) - 1, (1 << 63) - 1, 1 << 62])
#: values a 64-bit column does not hold (the Python path reads them)
huge = st.sampled_from([1 << 63, -(1 << 63) - 1, 1 << 80])
stream_rows = st.lists(
    st.tuples(times, st.booleans(), streams, sizes, sizes, st.integers(0, 100)), max_size=40
)
frames = st.lists(st.tuples(times, st.booleans(), streams, sizes), max_size=12)
limit = st.integers(-5, 5000) | st.sampled_from([(1 << 62), (1 << 63) - 1])
params = st.fixed_dictionaries(
    {},
    optional={
        "initial_max_data": limit,
        "initial_max_stream_data_bidi_local": limit,
        "initial_max_stream_data_bidi_remote": limit,
        "initial_max_stream_data_uni": limit,
        "initial_max_streams_bidi": limit,
    },
)


def _column(rows: list[tuple[Any, ...]], width: int) -> list[bytes]:
    if not rows:
        return [b""] * width
    t, sent, *rest = zip(*rows, strict=True)
    return [
        array("d", t).tobytes(),
        array("q", [int(s) for s in sent]).tobytes(),
        *(array("q", c).tobytes() for c in rest),
    ]


def _stream_columns(
    rows: list[Any], limits: list[Any], blocked: list[Any], peer: dict[str, int]
) -> StreamColumns:
    c = StreamColumns()
    c.stream_rows, c.limits, c.blocked = list(rows), list(limits), list(blocked)
    if peer:
        c.parameters[False] = dict(peer)
    return c


@settings(max_examples=400, deadline=None)
@given(stream_rows, frames, frames, params, st.sampled_from([0.0, -0.0, 0.5, 1e300]))
def test_generated_frames_give_the_python_timeline(
    rows: list[Any], limits: list[Any], blocked: list[Any], peer: dict[str, int], start: float
) -> None:
    """Every value here fits the columns: the native core computes the timeline (it says it
    did), and it is the Python one to the last value."""
    reference = sendable_timeline(_stream_columns(rows, limits, blocked, peer), start)
    done, made = native_sendable_timeline(
        _column(rows, 6), _column(limits, 4), _column(blocked, 4), peer, start
    )
    assert done
    assert made == reference
    if made is not None:  # -0.0 and 0.0 compare equal: the signs must be the same too
        assert [str(t) for t in made.times] == [str(t) for t in reference.times]  # type: ignore[union-attr]


@settings(max_examples=200, deadline=None)
@given(
    stream_rows,
    frames,
    frames,
    params,
    st.lists(st.tuples(st.sampled_from(["rows", "limits", "blocked", "peer", "time"]), huge)),
    st.lists(st.integers(0, 3), max_size=4),
)
def test_rows_decoded_in_python_keep_their_place_and_hostile_values_go_to_python(
    rows: list[Any],
    limits: list[Any],
    blocked: list[Any],
    peer: dict[str, int],
    hostile: list[tuple[str, int]],
    cuts: list[int],
) -> None:
    """Account columns (``byte_offsets=False``) fed native chunks and rows decoded in Python in
    turns give the timeline of all the rows in the order read; a value no column holds (an
    integer beyond 64 bits, an integer time) sends the whole trace to the Python path."""
    rows, limits, blocked, peer = list(rows), list(limits), list(blocked), dict(peer)
    for where, value in hostile:
        if where == "rows" and rows:
            rows[0] = (*rows[0][:3], value, *rows[0][4:])
        elif where == "limits" and limits:
            limits[0] = (*limits[0][:3], value)
        elif where == "blocked" and blocked:
            blocked[0] = (*blocked[0][:3], value)
        elif where == "peer":
            peer["initial_max_data"] = value
        elif where == "time" and rows:
            rows[-1] = (3, *rows[-1][1:])  # an int time: not put in a float column
    reference = sendable_timeline(_stream_columns(rows, limits, blocked, peer), 0.0)
    columns = PacketColumns(byte_offsets=False)
    if peer:
        columns._streams.parameters[False] = dict(peer)
    # one packet row per native chunk (a chunk with none holds no frame either)
    packet = [array("d", [0.0]).tobytes(), array("q", [0]).tobytes(), bytes(1), b"", b"", b""]
    # the rows in parts: even parts as chunks the native core read, odd ones decoded here
    bounds = sorted({0, len(rows), *(min(c * 7, len(rows)) for c in cuts)})
    for k, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        part = rows[a:b]
        native_chunk = k % 2 == 0
        try:
            chunk = [*_column(part, 6), *[b""] * 8]
        except OverflowError:
            native_chunk = False
        if native_chunk and part and all(type(r[0]) is float for r in part):
            columns._take(packet + chunk)
        else:
            columns._streams.stream_rows.extend(part)
    columns._streams.limits.extend(limits)
    columns._streams.blocked.extend(blocked)
    assert columns._sendable(0.0) == reference


def _lean(path: Path, *, on: bool, lenient: bool) -> tuple[Any, ...]:
    """Every trace's timeline read for the account, or the error, with what was skipped."""
    diag = Diagnostics()
    ids = [trace_id(str(path), i) for i in IDS]
    with native(on), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = read_packet_timelines(
                path,
                ids,
                on_error="skip" if lenient else "raise",
                diagnostics=diag,
                byte_offsets=False,
            )
        except QuicsmError as error:
            return ("error", type(error).__name__, str(error))
    return ("timelines", out, diag.notes)


@pytest.mark.slow
@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(ROOT)) for p in SHIPPED])
def test_shipped_traces_give_the_same_account_timelines(path: Path) -> None:
    """Read for the account (the frames as columns, the native sendable timeline) against
    read for the plot (the frames as rows, the Python one) and against the Python reader."""
    ids = [trace_id(str(path), i) for i in IDS]
    lean = _lean(path, on=True, lenient=False)
    assert lean == _lean(path, on=False, lenient=False)
    full = read_packet_timelines(path, ids)
    assert lean[1] == {t: dataclasses.replace(tl, streams=None) for t, tl in full.items()}


def test_a_shipped_file_gives_the_same_account_timelines() -> None:
    path = ROOT / "traces" / "quic-go-v0.48.2.qlog"
    lean = _lean(path, on=True, lenient=False)
    assert lean == _lean(path, on=False, lenient=False)
    assert sum(tl.sendable is not None for tl in lean[1].values()) > 10


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=_packet_file())
def test_generated_packet_records_give_the_same_account_timelines(
    tmp_path: Path, data: bytes
) -> None:
    path = tmp_path / "packets.sqlog"
    path.write_bytes(data)
    for lenient in (False, True):
        assert _lean(path, on=True, lenient=lenient) == _lean(path, on=False, lenient=lenient)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.sampled_from(range(len(SEEDS))),
    rng_seed=st.integers(0, 2**32 - 1),
    kinds=st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=3, unique=True),
)
def test_mutated_real_files_give_the_same_account_timelines(
    tmp_path: Path, seed: int, rng_seed: int, kinds: list[str]
) -> None:
    _, data = SEEDS[seed]
    path = tmp_path / f"m{rng_seed}"
    path.write_bytes(mutate(data, random.Random(rng_seed), kinds=kinds))
    for lenient in (False, True):
        assert _lean(path, on=True, lenient=lenient) == _lean(path, on=False, lenient=lenient)
