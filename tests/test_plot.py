"""`quicsm plot` and quicsm.render.plot: one connection of a real trace, drawn as SVG/HTML/PNG."""

from __future__ import annotations

import math
import re
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from quicsm.cli import main
from quicsm.extract.read import read_metrics, read_transitions
from quicsm.render.plot import (
    connection_series,
    nice_step,
    plot_html,
    plot_svg,
    reduce_points,
    state_durations,
)

REAL = Path(__file__).parent / "fixtures" / "real"
SERVER = REAL / "quic-go-v0.65.0" / "server.sqlog.zst"  # losses and PTOs
QUICHE = Path(__file__).parent / "fixtures" / "qlog" / "quiche_quic.sqlog"  # logs pacing_rate


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


def test_svg_marks_every_state_loss_and_pto(series) -> None:  # type: ignore[no-untyped-def]
    s, _, _ = series
    svg = plot_svg(s)
    assert svg == plot_svg(s)  # deterministic
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count('class="loss"') == len(s.losses_ms)
    assert svg.count('class="pto"') == len(s.ptos_ms)
    n_panels = 2  # window and RTT; no pacing rate in this trace
    drawn_bands = sum(1 for a, b, _ in s.bands if b > a)
    assert svg.count('class="band"') == n_panels * drawn_bands
    for state in s.states:
        assert f">{state}</text>" in svg  # in the legend
    for name in ("cwnd", "bytes in flight", "smoothed RTT", "min RTT"):
        assert f">{name}</text>" in svg
    assert ">pacing rate<" not in svg


def test_pacing_rate_panel_when_logged() -> None:
    transitions = read_transitions([QUICHE])
    metrics = read_metrics([QUICHE])
    s = connection_series(transitions, metrics, str(transitions["trace"][0]))
    assert "pacing_rate_bps" in s.lines
    svg = plot_svg(s)
    assert ">pacing rate</text>" in svg and "bit/s" in svg


def test_html_is_self_contained(series) -> None:  # type: ignore[no-untyped-def]
    s, _, _ = series
    page = plot_html(s)
    assert "<script" not in page and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )
    assert "Content-Security-Policy" in page
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
    rx, ry = reduce_points(xs, ys, columns=columns)
    assert rx == sorted(rx) and rx[0] == xs[0] and rx[-1] == xs[-1]
    if len(xs) > 4 * columns:
        by_col: dict[int, list[float]] = {}
        for x, y in zip(xs, ys, strict=True):
            by_col.setdefault(int(x), []).append(y)
        kept: dict[int, list[float]] = {}
        for x, y in zip(rx, ry, strict=True):
            kept.setdefault(int(x), []).append(y)
        assert kept.keys() == by_col.keys()
        for col, values in by_col.items():
            assert min(kept[col]) == min(values) and max(kept[col]) == max(values)
            assert len(kept[col]) <= 4
    else:
        assert (rx, ry) == (xs, ys)


@given(st.floats(1e-6, 1e12))
def test_nice_step_gives_a_handful_of_round_ticks(span: float) -> None:
    step = nice_step(span, 5)
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 9) in (1, 2, 2.5, 5, 10)
    assert 2 <= span / step <= 5.0001


def test_cli_plot_one_trace(tmp_path: Path) -> None:
    out = tmp_path / "conn.svg"
    code, _, err = run("plot", f"{SERVER}#0", "-o", str(out))
    assert code == 0, err
    assert out.read_text().startswith("<svg") and f"{SERVER}#0000" in err
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
    assert width == 2 * 960 and height > 700


def test_cli_plot_needs_exactly_one_trace(tmp_path: Path) -> None:
    code, _, err = run("plot", str(REAL), "-o", str(tmp_path / "x.html"))
    assert code == 1
    assert "plot draws one connection, but 6 traces were selected" in err
    assert "Traceback" not in err
    code, _, err = run("plot", f"{SERVER}#7", "-o", str(tmp_path / "x.html"))
    assert code == 1 and "no such trace" in err and "holds 1 trace (#0 to #0)" in err
    code, _, err = run("plot", f"{SERVER}#x", "-o", str(tmp_path / "x.html"))
    assert code == 1 and "expected FILE#N" in err


@given(st.text(min_size=0, max_size=300), st.integers(3, 200))
def test_long_titles_are_cut_in_the_middle(text: str, room: int) -> None:
    from quicsm.render.plot import _ellipsize

    cut = _ellipsize(text, room)
    assert len(cut) <= room
    if len(text) <= room:
        assert cut == text
    else:
        head, _, tail = cut.partition("…")
        assert text.startswith(head) and text.endswith(tail) and tail
