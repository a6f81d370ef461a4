"""`quicsm plot`, quicsm.render.connection and quicsm.render.charts: connections of real traces,
drawn as SVG/HTML/PNG."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st

from quicsm.cli import main
from quicsm.extract.read import read_metrics, read_transitions
from quicsm.render import charts
from quicsm.render.colours import STATE_COLOURS, tint
from quicsm.render.connection import (
    clusters,
    connection_series,
    ellipsize,
    reduce_points,
    state_durations,
)

REAL = Path(__file__).parent / "fixtures" / "real"
SERVER = REAL / "quic-go-v0.65.0" / "server.sqlog.zst"  # losses and PTOs
QUICHE = Path(__file__).parent / "fixtures" / "qlog" / "quiche_quic.sqlog"  # logs pacing_rate
SPURIOUS = Path(__file__).parent.parent / "traces" / "quic-go-v0.65.0.qlog"  # spurious losses


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def series():  # type: ignore[no-untyped-def]
    transitions = read_transitions([SERVER])
    metrics = read_metrics([SERVER])
    trace = str(transitions["trace"][0])
    return connection_series(transitions, metrics, trace), transitions, metrics


def test_series_holds_what_the_trace_logs(series) -> None:  # type: ignore[no-untyped-def]
    s, transitions, metrics = series
    assert s.vantage == "server"
    # one band per state entered, contiguous, ending at the trace's end
    assert len(s.bands) == transitions.height
    assert all(a[1] == b[0] for a, b in zip(s.bands, s.bands[1:], strict=False))
    assert s.bands[-1][1] == s.end_ms
    assert len(s.losses_ms) == metrics.filter(pl.col("event") == "packet_lost").height > 0
    assert len(s.ptos_ms) == metrics.filter(pl.col("event") == "pto").height > 0
    assert {"cwnd_bytes", "bytes_in_flight", "smoothed_rtt_ms", "min_rtt_ms"} <= set(s.lines)
    assert "pacing_rate_bps" not in s.lines  # quic-go does not log it
    total = sum(ms for _, ms, _ in state_durations(s))
    assert total == pytest.approx(s.end_ms)


def plot_svg(s) -> str:  # type: ignore[no-untyped-def]
    return charts.to_svg(charts.connections_spec([s]))


def test_svg_names_every_state_line_and_event_kind(series) -> None:  # type: ignore[no-untyped-def]
    s, _, _ = series
    svg = plot_svg(s)
    assert svg == plot_svg(s)  # deterministic
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    for state in s.states:
        assert f">{state}</text>" in svg  # in the legend
    for name in ("cwnd", "bytes in flight", "smoothed RTT", "min RTT"):
        assert f">{name}</text>" in svg
    assert ">pacing rate<" not in svg
    # the event rows count what the trace logs, losses by what detected them (quic-go logs it)
    assert f">packet lost, time threshold ({len(s.losses_ms)})</text>" in svg
    assert f">probe timeout ({len(s.ptos_ms)})</text>" in svg


def test_not_logged_is_said_not_counted(tmp_path: Path) -> None:
    """quiche logs no packet_lost and no PTO timer: its plot says "not logged", not "(0)"."""
    out = tmp_path / "quiche.svg"
    code, _, err = run("plot", str(QUICHE), "-o", str(out))
    assert code == 0, err
    svg = out.read_text()
    assert ">packet lost: not logged</text>" in svg and ">packet lost (0)<" not in svg
    assert "not logged by this producer" in svg
    # quic-go logs both: counts, never "not logged"
    code, _, err = run("plot", f"{SERVER}#0", "-o", str(tmp_path / "go.svg"))
    assert "not logged" not in (tmp_path / "go.svg").read_text()


def test_spurious_losses_are_marked_apart() -> None:
    transitions = read_transitions([SPURIOUS])
    metrics = read_metrics([SPURIOUS])
    s = connection_series(transitions, metrics, f"{SPURIOUS}#0014")
    # trace 14 (jitter): every one of its 21 declared losses is acknowledged later
    assert len(s.losses_ms) == len(s.spurious_ms) == 21
    spec = charts.connection_spec(s)
    rows = {r["row"] for p in spec["vconcat"] for layer in p["layer"]
            for r in layer["data"]["values"] if "row" in r}  # fmt: skip
    assert f"spurious loss ({len(s.spurious_ms)})" in rows
    # losses split by what detected them (RFC 9002 section 6.1), adding up to every loss
    split = {r: int(r.rsplit("(", 1)[1].rstrip(")")) for r in rows if r.startswith("packet lost")}
    assert set(split) == {"packet lost, packet threshold (5)", "packet lost, time threshold (16)"}
    assert sum(split.values()) == len(s.losses_ms)


@given(st.lists(st.floats(0, 1000), max_size=200), st.floats(0.01, 50))
def test_clusters_count_every_event_once(times: list[float], gap: float) -> None:
    runs = clusters(times, gap=gap)
    assert sum(n for _, _, n in runs) == len(times)
    for (_, last, _), (first, _, _) in zip(runs, runs[1:], strict=False):
        assert first - last > gap  # marks farther apart than the gap stay apart
    for first, last, n in runs:
        assert first <= last and (n > 1 or first == last)


def _luminance(colour: str) -> float:
    def channel(c: int) -> float:
        x = c / 255
        return x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(int(colour[i : i + 2], 16)) for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_lines_and_marks_read_on_every_state_band() -> None:
    """WCAG contrast of at least 3:1 between every line/mark colour and every band (no orange
    pacing line on an orange ApplicationLimited band)."""
    inks = [*charts.LINE_COLOURS.values(), charts.RTT_SAMPLE_COLOUR, charts.ACKED_COLOUR,
            *(c for _, c, _ in charts.EVENT_MARKS.values()),
            *(c for _, _, c, _ in charts.PACKET_MARKS.values())]  # fmt: skip
    for state, colour in STATE_COLOURS.items():
        band = _luminance(tint(colour, charts.BAND_TINT))
        for ink in inks:
            lum = _luminance(ink)
            ratio = (max(band, lum) + 0.05) / (min(band, lum) + 0.05)
            assert ratio >= 3, (state, ink, ratio)


def test_html_is_self_contained_and_scripts_are_pinned(series) -> None:  # type: ignore[no-untyped-def]
    import base64
    import hashlib

    s, _, _ = series
    page = charts.connection_page([s])
    assert "Content-Security-Policy" in page and "unsafe-eval" not in page

    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert len(scripts) == 1  # the loader; the libraries and the specification travel packed
    packed = dict(re.findall(r'<script type="application/gzip" id="(\w+)">(.*?)</script>', page))
    assert set(packed) == {"lib", "spec"}
    library = charts.unpacked(page, "lib")
    spec = json.loads(charts.unpacked(page, "spec"))
    # compiled to Vega when the page is made: the browser does not compile it at each load
    assert "/vega/v" in spec["$schema"] and spec["marks"]
    csp = re.search(r'Content-Security-Policy" content="([^"]*)"', page).group(1)  # type: ignore[union-attr]
    allowed = re.findall(r"'sha256-([^']+)'", csp)
    # the loader and the unpacked library are allowed by their hashes, nothing else
    assert sorted(allowed) == sorted(
        base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        for script in (scripts[0], library)
    )
    markup = re.sub(r"<script>.*?</script>", "", page, flags=re.S)
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!#)""", markup)  # the browser test
    # shows that nothing is fetched when the scripts run
    rows = re.findall(r"<tr><td>.*?</tr>", page)
    assert len(rows) == len(s.states)


@given(
    st.lists(st.tuples(st.floats(0, 500), st.floats(-1e6, 1e6)), min_size=1, max_size=400),
    st.integers(1, 40),
)
def test_reduce_points_keeps_extremes_of_every_column(
    points: list[tuple[float, float]], columns: int
) -> None:
    points.sort()
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    rx, ry = reduce_points(xs, ys, columns=columns, span=(0.0, 500.0) if xs else None)
    assert rx == sorted(rx) and rx[0] == xs[0] and rx[-1] == xs[-1]
    if len(xs) > 4 * columns:
        by_col: dict[int, list[float]] = {}
        width = 500.0 / columns
        for x, y in zip(xs, ys, strict=True):
            by_col.setdefault(math.floor(x / width), []).append(y)
        kept: dict[int, list[float]] = {}
        for x, y in zip(rx, ry, strict=True):
            kept.setdefault(math.floor(x / width), []).append(y)
        assert kept.keys() == by_col.keys()
        for col, values in by_col.items():
            assert min(kept[col]) == min(values) and max(kept[col]) == max(values)
            assert len(kept[col]) <= 4
    else:
        assert (rx, ry) == (xs, ys)


def test_cli_plot_one_trace(tmp_path: Path) -> None:
    out = tmp_path / "conn.svg"
    code, _, err = run("plot", f"{SERVER}#0", "-o", str(out))
    assert code == 0, err
    head = out.read_text().split(">", 1)[0]
    assert head.startswith("<svg") and head.count("class=") == 1 and 'class="connection"' in head
    assert f"{SERVER}#0000" in err
    code, _, err = run("plot", str(SERVER), "--where", "vantage=server", "-o", str(tmp_path / "p"))
    assert code == 0, err
    assert (tmp_path / "p").read_text().startswith("<!DOCTYPE html>")  # html by default


def test_cli_plot_png(tmp_path: Path) -> None:
    out = tmp_path / "conn.png"
    code, _, err = run("plot", f"{SERVER}#0", "-o", str(out))
    assert code == 0, err
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 2 * 1000 and height > 2 * 500


def test_cli_plot_several_connections_and_errors(tmp_path: Path) -> None:
    out = tmp_path / "two.html"
    code, _, err = run("plot", str(REAL), "--where", "vantage=server", "-o", str(out))
    assert code == 0, err
    assert err.count("#0000") == 3  # three servers, one small multiple each
    assert "3 connections" in out.read_text()
    code, _, err = run("plot", f"{SERVER}#7", "-o", str(tmp_path / "x.html"))
    assert code == 1 and "no such trace" in err and "holds 1 trace (#0 to #0)" in err
    code, _, err = run("plot", f"{SERVER}#x", "-o", str(tmp_path / "x.html"))
    assert code == 1 and "expected FILE#N" in err and "Traceback" not in err


@given(st.text(min_size=0, max_size=300), st.integers(3, 200))
@example("…" + "a" * 10, 5)  # an ellipsis in the title itself: "…a…aa" (head "…a", tail "aa")
def test_long_titles_are_cut_in_the_middle(text: str, room: int) -> None:
    cut = ellipsize(text, room)
    assert len(cut) <= room
    if len(text) <= room:
        assert cut == text
    else:
        # the title may hold "…" itself, so the cut is found by position, not by searching for
        # the first "…": a start of the title, the ellipsis, an end of it, balanced
        tail = (len(cut) - 1) // 2
        head = len(cut) - 1 - tail
        assert cut[head] == "…" and tail > 0
        assert text.startswith(cut[:head]) and text.endswith(cut[head + 1 :])


def test_a_chart_the_renderer_rejects_is_a_clear_error() -> None:
    from quicsm.core.errors import QuicsmError

    with pytest.raises(QuicsmError, match="the chart could not be drawn"):
        charts.to_svg({"mark": "nosuchmark", "data": {"values": []}})


@given(
    st.lists(st.tuples(st.floats(0.001, 50), st.sampled_from(["A", "B", "C"])), min_size=1,
             max_size=300),
    st.integers(1, 60),
)  # fmt: skip
def test_pixel_bands_keep_one_state_per_column(
    steps: list[tuple[float, str]], columns: int
) -> None:
    from quicsm.render.connection import pixel_bands

    bands, t = [], 0.0
    for width, state in steps:
        bands.append((t, t + width, state))
        t += width
    out = pixel_bands(bands, end=t, columns=columns)
    if len(bands) <= columns:
        assert out == bands
        return
    assert len(out) <= columns
    assert out[0][0] == 0 and out[-1][1] == pytest.approx(t)
    assert all(a[1] == pytest.approx(b[0]) for a, b in zip(out, out[1:], strict=False))
    assert all(a[2] != b[2] for a, b in zip(out, out[1:], strict=False))  # neighbours merged
    assert {s for _, _, s in out} <= {s for _, _, s in bands}


def _columns_by_hand(
    bands: list[tuple[float, float, str]], end: float, columns: int
) -> list[tuple[float, float, str]]:
    """The reference: every column visited, its state the one covering most of it (ties: the
    first name), neighbouring columns of one state merged."""
    width = end / columns
    out: list[tuple[float, float, str]] = []
    for c in range(columns):
        cover: dict[str, float] = {}
        for start, stop, state in bands:
            overlap = min(stop, (c + 1) * width) - max(start, c * width)
            if stop > start and overlap > 0:
                cover[state] = cover.get(state, 0.0) + overlap
        if not cover:
            continue
        state = max(sorted(cover), key=lambda s: cover[s])
        lo, hi = c * width, min((c + 1) * width, end)
        if out and out[-1][2] == state and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi, state)
        else:
            out.append((lo, hi, state))
    return out


BAND_STEPS = st.lists(
    st.tuples(st.floats(0.001, 50), st.sampled_from(["A", "B", "C"]), st.booleans()),
    min_size=1, max_size=200,
)  # fmt: skip


def _bands(steps: list[tuple[float, str, bool]]) -> tuple[list[tuple[float, float, str]], float]:
    """Bands one after the other (``gap``: an unlogged stretch before it)."""
    bands, t = [], 0.0
    for width, state, gap in steps:
        t += width / 3 if gap else 0.0
        bands.append((t, t + width, state))
        t += width
    return bands, t


@given(BAND_STEPS, st.integers(1, 80))
@example([(5.0, "A", True)], 20)  # a band starting on a column boundary as the products round
def test_merged_bands_are_the_columns_by_hand(
    steps: list[tuple[float, str, bool]], columns: int
) -> None:
    """The one-pass merge (the interactive page's zoom levels) draws what visiting every
    column would, whatever the number of columns and gaps between bands."""
    from quicsm.render.connection import merge_bands

    bands, end = _bands(steps)
    got = merge_bands(bands, end=end, columns=columns)
    want = _columns_by_hand(bands, end, columns)
    assert [s for _, _, s in got] == [s for _, _, s in want]
    assert [a for a, _, _ in got] == pytest.approx([a for a, _, _ in want])
    assert [b for _, b, _ in got] == pytest.approx([b for _, b, _ in want])


@given(BAND_STEPS, st.integers(1, 40))
def test_band_levels_end_with_the_bands_themselves(
    steps: list[tuple[float, str, bool]], columns: int
) -> None:
    """Each level spans the bands' time, in time order; coarse levels have fewer rows than the
    bands and at most one state per column; the finest level is the bands themselves."""
    from quicsm.render.connection import LEVEL_FACTOR, band_levels

    bands, end = _bands(steps)
    rows = band_levels(bands, end=end, columns=columns)
    top = max(lv for *_, lv in rows)
    assert [(a, b, s) for a, b, s, lv in rows if lv == top] == bands
    for level in range(top):
        mine = [(a, b) for a, b, _, lv in rows if lv == level]
        assert 0 < len(mine) < len(bands) and len(mine) <= columns * LEVEL_FACTOR**level
        assert mine[0][0] <= bands[0][0] and mine[-1][1] >= bands[-1][1] - 1e-9
        assert all(x[1] <= y[0] + 1e-9 for x, y in zip(mine, mine[1:], strict=False))


def test_rtt_samples_are_drawn_as_points(series) -> None:  # type: ignore[no-untyped-def]
    """Every RTT sample (latest_rtt) is a dot in the RTT panel, so jitter shows."""
    s, _, metrics = series
    n = metrics["latest_rtt_ms"].drop_nulls().len()
    assert len(s.rtt_samples[0]) == n > 100
    spec = charts.connection_spec(s)
    index, rtt = next((i, v) for i, v in enumerate(spec["vconcat"])
                      if v["title"]["text"].startswith("RTT"))  # fmt: skip
    layer = next(i for i, layer in enumerate(rtt["layer"]) if layer["mark"]["type"] == "circle")
    assert len(rtt["layer"][layer]["data"]["values"]) == n
    svg = charts.to_svg(charts.connections_spec([s]))
    name = rtt["layer"][layer].get("name") or f"concat_{index}_layer_{layer}"
    group = re.search(rf'class="mark-symbol role-mark {name}_marks"'
                      r"[^>]*>(.*?)</g>", svg, re.S)  # fmt: skip
    assert group is not None and group.group(1).count("<path") == n


def test_small_multiples_keep_the_named_order_and_label_their_summaries(tmp_path: Path) -> None:
    """Connections named as FILE#N are drawn in the order named (not the order read), and the
    header names each summary's connection."""
    aioquic = REAL / "aioquic-1.7.2" / "server.qlog.zst"
    out = tmp_path / "two.html"
    code, _, err = run("plot", f"{SERVER}#0", f"{aioquic}#0", "-o", str(out))
    assert code == 0, err
    page = out.read_text()
    first, second = page.index(f"<b>{SERVER}#0000"), page.index(f"<b>{aioquic}#0000")
    assert first < second
    out2 = tmp_path / "two-reversed.html"
    code, _, err = run("plot", f"{aioquic}#0", f"{SERVER}#0", "-o", str(out2))
    assert code == 0, err
    page = out2.read_text()
    assert page.index(f"<b>{aioquic}#0000") < page.index(f"<b>{SERVER}#0000")
    assert page.index(f"<h2>{aioquic}#0000") < page.index(f"<h2>{SERVER}#0000")


@given(st.permutations(list(range(6))))
def test_named_order_is_the_order_given(order: list[int]) -> None:
    from quicsm.cli.plot import _in_named_order

    traces = [f"f.qlog#{n:04d}" for n in range(6)] + ["g.qlog#0000"]
    named = tuple(f"f.qlog#{n}" for n in order)
    assert _in_named_order(traces, named) == [f"f.qlog#{n:04d}" for n in order] + ["g.qlog#0000"]


@given(
    st.lists(st.tuples(st.floats(0, 1000), st.floats(-1e6, 1e6)), min_size=1, max_size=600),
    st.integers(1, 20),
)
def test_zoom_levels_end_with_every_point_and_keep_each_columns_extremes(
    points: list[tuple[float, float]], columns: int
) -> None:
    """Level 0 is the per-column reduction; each level has four times the columns; the last
    level is the series itself; ``until`` is the next x of the same level."""
    from quicsm.render.connection import LEVEL_FACTOR, level_for, zoom_levels

    points.sort()
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    rows = zoom_levels(xs, ys, columns=columns, span=(0.0, 1000.0))
    top = max(lv for *_, lv in rows)
    for level in range(top + 1):
        mine = [(x, y, u) for x, y, u, lv in rows if lv == level]
        want = reduce_points(xs, ys, columns=columns * LEVEL_FACTOR**level, span=(0.0, 1000.0))
        assert [m[0] for m in mine] == want[0] and [m[1] for m in mine] == want[1]
        assert [m[2] for m in mine[:-1]] == [m[0] for m in mine[1:]]
    assert [(x, y) for x, y, _, lv in rows if lv == top] == list(zip(xs, ys, strict=True))
    zooms = [1, 2, 4, 5, 16, 100, 10**6]
    levels = [level_for(z, top) for z in zooms]
    assert levels == sorted(levels) and levels[0] == 0 and max(levels) <= top


@given(st.lists(st.tuples(st.floats(0, 100), st.integers(0, 3)), min_size=1, max_size=80))
def test_drop_repeats_draws_the_same_step_line(points: list[tuple[float, int]]) -> None:
    from quicsm.render.connection import drop_repeats

    points.sort()
    xs, ys = [p[0] for p in points], [float(p[1]) for p in points]
    rx, ry = drop_repeats(xs, ys)
    assert rx[0] == xs[0] and rx[-1] == xs[-1]

    def at(px: list[float], py: list[float], x: float) -> float:
        return next(y for xx, y in zip(reversed(px), reversed(py), strict=True) if xx <= x)

    for x in xs:  # the step-after line has the same value everywhere
        assert at(rx, ry, x) == at(xs, ys, x)
