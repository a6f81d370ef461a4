"""The report's static charts in a real headless Chromium: no text of a chart overlaps another,
every text stays inside its drawing, each is no wider than the renderer's character widths
make room for (so the layout holds in the fonts a browser picks), and the text is readable
(at least 10 px at a 1200 px wide window). On the shipped version report, and on charts drawn
from hostile data (long names, many rows, extreme values)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cdp import Browser

from quicsm.render import svg_charts
from quicsm.render.svg_charts.text import text_width

pytestmark = pytest.mark.browser

ROOT = Path(__file__).parent.parent

#: per chart: its class, its box, and per text: content, font size, bold, computed length, box
LAYOUT = """JSON.stringify(Array.from(document.querySelectorAll('svg.chart')).map(svg => {
  const b = svg.getBoundingClientRect();
  return {cls: svg.getAttribute('class'), box: [b.left, b.top, b.right, b.bottom],
          texts: Array.from(svg.querySelectorAll('text')).filter(t => t.textContent.trim())
            .map(t => { const r = t.getBoundingClientRect();
              return [t.textContent, Number(t.getAttribute('font-size')),
                      t.getAttribute('font-weight') === 'bold', t.getComputedTextLength(),
                      [r.left, r.top, r.right, r.bottom]]; })};
}))"""


def _problems(charts: list[dict[str, object]]) -> list[str]:
    """What is wrong with the charts' text as the browser laid it out."""
    out = []
    for chart in charts:
        left, top, right, bottom = chart["box"]  # type: ignore[misc]
        texts = chart["texts"]
        assert isinstance(texts, list)
        for text, size, bold, length, (x0, y0, x1, y1) in texts:
            if x0 < left - 0.5 or x1 > right + 0.5 or y0 < top - 0.5 or y1 > bottom + 0.5:
                out.append(f"{chart['cls']}: {text!r} outside its drawing")
            room = text_width(text, size, bold=bold)
            if length > room + 0.5:
                out.append(f"{chart['cls']}: {text!r} is {length:.1f} px, room for {room:.1f}")
        for i, (a, _, _, _, ra) in enumerate(texts):
            for b, _, _, _, rb in texts[i + 1 :]:
                dx = min(ra[2], rb[2]) - max(ra[0], rb[0])
                dy = min(ra[3], rb[3]) - max(ra[1], rb[1])
                if dx > 0.5 and dy > 0.5:
                    out.append(f"{chart['cls']}: {a!r} overlaps {b!r}")
    return out


@pytest.fixture(scope="module")
def version_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped version comparison, as benchmarks/bench_waiting.py runs it."""
    from click.testing import CliRunner

    from quicsm.cli import main

    out = tmp_path_factory.mktemp("svg-charts") / "version.html"
    result = CliRunner().invoke(
        main,
        ["report", str(ROOT / "traces" / "quic-go-v0.48.2.qlog"), "--vs",
         str(ROOT / "traces" / "quic-go-v0.65.0.qlog"), "--no-cache", "-o", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.parametrize("width", [800, 1200, 1920])
def test_version_report_charts_keep_their_text_apart(
    chromium: str, version_report: Path, width: int
) -> None:
    with Browser(chromium) as browser:
        session, load = browser.load(version_report.as_uri(), width=width)
        assert load.errors == []
        charts = json.loads(browser.evaluate(session, LAYOUT))
        assert [c["cls"] for c in charts] == [
            "chart time-in-state", "chart dwell", "chart traces", "chart heatmap"]  # fmt: skip
        assert _problems(charts) == []
        if width == 1200:  # drawn at full size: every text at least 10 px tall on the page
            heights = [t[4][3] - t[4][1] for c in charts for t in c["texts"]]
            assert min(heights) >= 10, min(heights)
            assert all(c["box"][2] <= width for c in charts)


def _hostile_page(path: Path) -> Path:
    long = "traces/" + "very-long-directory-name/" * 6 + "quic-go-v0.48.2.qlog"
    names = (long, long.replace("0.48.2", "0.65.0"))
    states = ["CongestionAvoidanceMaxed", "RetransmissionTimeout", "W" * 40, "Init", "·µ×"]
    bars = [
        svg_charts.Bar(s, (1.0, 0.0), (0.9, float("nan")), (1.2, float("nan")),
                       f"p < 0.001 Holm +{i}9.9 pp" * (i % 2 + 1), i % 2 == 0)
        for i, s in enumerate(states)
    ]  # fmt: skip
    boxes = [
        svg_charts.Box(s, ([1e-4, 1e-3, 5, 1e5, 9e6], [0.01, 0.01, 0.01, 0.02, 0.03]), (1, 2),
                       "p = 1.000 BH ×1000.00", i == 1)
        for i, s in enumerate(states)
    ]  # fmt: skip
    series = svg_charts.Series(
        [float(t) for t in range(0, 99_000, 7)],
        [float(1e9 + (t % 977) * 1e6) for t in range(0, 99_000, 7)],
        [float((t % 333) * 1e6) for t in range(0, 99_000, 7)],
        [float(t) for t in range(0, 99_000, 97)], [],
        [(float(t), float(t + 450), s) for t, s in zip(range(0, 99_000, 450),
                                                     states * 500, strict=False)],
    )  # fmt: skip
    short = svg_charts.Series(
        [0.0, 0.2, 0.4], [1.0, 2.0, 3.0], [0.5, 1.0, None], [0.1], [],
        [(0.0, 0.1, "SlowStart"), (0.1, 0.4, "ApplicationLimited")],
    )  # fmt: skip
    cells = {
        (r, c): svg_charts.Cell(p, p is not None and p < 0, f"n.s. (Holm p = 1.000) · {i}/{i}",
                                (i, i))
        for i, (r, c, p) in enumerate([(r, c, p) for r in states for c, p in
                                       zip(("10000", "1000000", "x" * 50), (-950.0, None, 33.0),
                                           strict=True)])
    }  # fmt: skip
    parts = [
        svg_charts.time_in_state_svg(bars, names=names),
        svg_charts.dwell_svg(boxes, names=names) or "",
        svg_charts.traces_svg([(names[0], long + " · 99000 ms", series), (names[1], "x", short)]),
        svg_charts.heatmap_svg(states, ["10000", "1000000", "x" * 50], cells,
                               row_label="scenario " * 8, col_label="object_size",
                               title="completion_ms: % difference of " + " from ".join(names)),
    ]  # fmt: skip
    path.write_text(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><style>body{margin:8px}'
        "svg{display:block;margin:12px 0}</style></head><body>" + "".join(parts) + "</body></html>",
        encoding="utf-8",
    )
    return path


def test_charts_of_hostile_data_keep_their_text_apart(chromium: str, tmp_path: Path) -> None:
    page = _hostile_page(tmp_path / "hostile.html")
    with Browser(chromium) as browser:
        session, load = browser.load(page.as_uri(), width=1400)
        assert load.errors == []
        charts = json.loads(browser.evaluate(session, LAYOUT))
        assert len(charts) == 4
        assert _problems(charts) == []
        browser.screenshot(session, tmp_path / "hostile.png", width=1400)


def test_the_check_sees_overlap_and_overflow(chromium: str, tmp_path: Path) -> None:
    """The checks above can fail: text drawn over text, past the drawing's edge, and wider
    than its room (a font of another size than the one declared) are each found."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<html><body><svg class="chart bad" width="200" height="60">'
        '<text x="10" y="20" font-size="12">SlowStart</text>'
        '<text x="14" y="22" font-size="12">Recovery</text>'
        '<text x="150" y="50" font-size="12">CongestionAvoidance</text>'
        '<text x="10" y="50" font-size="12" style="font-size:30px">wide</text>'
        "</svg></body></html>"
    )
    with Browser(chromium) as browser:
        session, _ = browser.load(page.as_uri())
        found = _problems(json.loads(browser.evaluate(session, LAYOUT)))
    assert "chart bad: 'SlowStart' overlaps 'Recovery'" in found
    assert "chart bad: 'CongestionAvoidance' outside its drawing" in found
    assert any(p.startswith("chart bad: 'wide' is ") for p in found), found
