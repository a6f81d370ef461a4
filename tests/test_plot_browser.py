"""The `quicsm plot` HTML page in a real headless Chromium: it loads from disk with no errors
and no requests beyond itself, draws its panels at a readable size, zooms and pans every panel's
time axis together under a scripted wheel and drag, shows a hostile file name as text, and a
screenshot is taken (kept under ``QUICSM_ARTIFACTS`` when that is set, as CI does)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from cdp import Browser, find_chromium
from click.testing import CliRunner

from quicsm.cli import main

SERVER = Path(__file__).parent / "fixtures" / "real" / "quic-go-v0.65.0" / "server.sqlog.zst"

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def chromium() -> str:
    path = find_chromium()
    if path is None:
        pytest.fail("chromium is missing: scripts/setup installs the Debian package chromium")
    return path


XSS = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(2)</script>"
#: the time domain of every panel of the first connection (the view's scales named concat_N_x)
DOMAINS = (
    "JSON.stringify(Object.entries(quicsmView._runtime.scales)"
    ".filter(([k, v]) => /^concat_\\d+_x$/.test(k)).map(([k, v]) => v.value.domain()))"
)


#: clicks the first mark that carries a raw event; what the page then shows under the chart
CLICK_LOSS = """(() => { const el = Array.from(document.querySelectorAll('#chart svg path'))
  .find(e => e.__data__ && e.__data__.datum && e.__data__.datum.raw);
  if (!el) return 'no mark with an event';
  const r = el.getBoundingClientRect();
  el.dispatchEvent(new MouseEvent('click', {bubbles: true, clientX: r.x + r.width / 2,
                                            clientY: r.y + r.height / 2}));
  const out = document.getElementById('raw');
  return out.hidden ? 'nothing shown' : out.textContent; })()"""


#: the packets panel's plotting area on the page (the third panel: window, RTT, packets)
PACKETS_PANEL = """(() => { const r = document.querySelector('g.concat_2_group path.background')
  .getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()"""
Y_PACKETS = "JSON.stringify(quicsmView.scale('concat_2_y').domain())"
#: what a double-click does to the y axes (the same handler)
RESET_Y = """(() => { document.querySelector('#chart svg').dispatchEvent(
  new MouseEvent('dblclick', {bubbles: true})); return quicsmView.runAsync().then(() => 1); })()"""


def test_plot_html_in_chromium(chromium: str, tmp_path: Path) -> None:
    hostile = tmp_path / f"{XSS}.sqlog.zst"
    shutil.copy(SERVER, hostile)
    # hostile labels too, as the report's XSS suite has (they make the plot's subtitle)
    (tmp_path / "run.json").write_text(json.dumps({"stack": "quic-go", "version": SCRIPT,
                                                   "scenario": "a&amp;b \" onload=alert(3)"}))
    page = tmp_path / "connection.html"
    result = CliRunner().invoke(main, ["plot", f"{hostile}#0", "-o", str(page)])
    assert result.exit_code == 0, result.stderr
    with Browser(chromium) as browser:
        session, load = browser.load(page.as_uri(), width=1280)
        assert load.errors == [] and load.dialogs == []
        assert load.requests == [page.as_uri()]  # works offline: nothing else is fetched
        assert _drawn(browser, session) == "yes"
        assert load.errors == []
        text = browser.evaluate(session, "document.body.innerText")
        assert XSS in text  # the file name shows as text
        assert f"version={SCRIPT}" in text and 'scenario=a&amp;b " onload=alert(3)' in text
        labels = browser.evaluate(
            session, "Array.from(document.querySelectorAll('#chart svg text'))"
            ".map(t => t.textContent).join('\\n')"
        )  # fmt: skip
        assert SCRIPT in labels  # the chart's subtitle shows the label as text
        # a click on a loss mark shows the loss event as logged, as text
        shown = browser.evaluate(session, CLICK_LOSS)
        assert shown.startswith("packet_lost at ") and '"packet_number"' in shown, shown
        assert browser.evaluate(session, "document.querySelectorAll('img').length") == 0
        # the packed specification and libraries, the loader, and the libraries it unpacked
        # and ran (allowed by their hash): no script from a label
        scripts = browser.evaluate(
            session, "Array.from(document.scripts).map(s => [s.type, s.id, s.textContent.length])"
        )
        assert len(scripts) == 4, scripts
        assert browser.evaluate(
            session, "Array.from(document.scripts).filter(s => !s.type && !s.src).length"
        ) == 2  # fmt: skip
        # panels: window, RTT, packets, byte offsets, events; the chart fills the column, its
        # text readable
        box = browser.evaluate(
            session,
            "(() => { const r = document.querySelector('#chart svg')"
            ".getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()",
        )
        assert 1000 < box[2] <= 1280 and box[3] > 500, box
        smallest = browser.evaluate(
            session,
            "Math.min(...Array.from(document.querySelectorAll('#chart svg text'))"
            ".filter(t => t.textContent.trim()).map(t => t.getBoundingClientRect().height))",
        )
        assert smallest >= 11, smallest
        before = json.loads(browser.evaluate(session, DOMAINS))
        assert len(before) == 5 and all(d == before[0] for d in before)
        # a wheel over the first panel zooms every panel's time axis, to the same range
        x, y = box[0] + box[2] / 2, box[1] + 150
        browser.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y},
                     session=session)  # fmt: skip
        browser.send(
            "Input.dispatchMouseEvent",
            {"type": "mouseWheel", "x": x, "y": y, "deltaX": 0, "deltaY": -400},
            session=session,
        )
        zoomed = _settled(browser, session, before)
        assert all(d == zoomed[0] for d in zoomed)
        span = lambda d: d[1] - d[0]  # noqa: E731
        assert span(zoomed[0]) < 0.8 * span(before[0])
        # dragging the RTT panel to the right pans every panel to earlier times
        y2 = box[1] + 330
        for kind, at in (("mousePressed", x), ("mouseMoved", x + 200), ("mouseReleased", x + 200)):
            browser.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": at, "y": y2, "button": "left", "buttons": 1,
                 "clickCount": 1},
                session=session,
            )  # fmt: skip
        panned = _settled(browser, session, zoomed)
        assert all(d == panned[0] for d in panned)
        assert panned[0][0] < zoomed[0][0] and span(panned[0]) == pytest.approx(span(zoomed[0]))
        # shift-drag a rectangle over the packets panel: every panel's time axis takes its
        # time range, the packets panel's y axis its value range; a double-click lets y refit
        panel = browser.evaluate(session, PACKETS_PANEL)
        before_rect = json.loads(browser.evaluate(session, DOMAINS))
        px, py = panel[0] + panel[2] * 0.4, panel[1] + panel[3] * 0.3
        for kind, at in (("mousePressed", (px, py)), ("mouseMoved", (px + 150, py + 60)),
                         ("mouseReleased", (px + 150, py + 60))):
            browser.send("Input.dispatchMouseEvent",
                         {"type": kind, "x": at[0], "y": at[1], "button": "left", "buttons": 1,
                          "clickCount": 1, "modifiers": 8}, session=session)  # fmt: skip
        boxed = _settled(browser, session, before_rect)
        assert all(d == boxed[0] for d in boxed) and span(boxed[0]) < span(before_rect[0])
        y_set = browser.evaluate(session, "JSON.stringify(quicsmView.signal('ry0_2'))")
        low, high = json.loads(y_set)
        assert low < high and json.loads(browser.evaluate(session, Y_PACKETS)) == [low, high]
        browser.evaluate(session, RESET_Y)
        assert browser.evaluate(session, "JSON.stringify(quicsmView.signal('ry0_2'))") == "null"
        shot = browser.screenshot(session, tmp_path / "plot.png", width=1280)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 30_000
    artifacts = os.environ.get("QUICSM_ARTIFACTS")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(artifacts) / "plot-screenshot.png")


def _drawn(browser: Browser, session: str) -> str:
    """The page's ``data-drawn`` once it is set: the libraries and the specification are
    unpacked and drawn asynchronously after the load event."""
    give_up = time.monotonic() + 180  # against a hang only: a loaded machine draws slowly
    while time.monotonic() < give_up:
        state = browser.evaluate(session, "document.body.dataset.drawn || ''")
        if state:
            return str(state)
        time.sleep(0.05)
    raise AssertionError("the page never drew")


def _settled(browser: Browser, session: str, old: list[list[float]]) -> list[list[float]]:
    """The panels' time domains once they differ from ``old`` (Vega redraws asynchronously)."""
    give_up = time.monotonic() + 120  # against a hang only: a loaded machine redraws slowly
    while time.monotonic() < give_up:
        now = json.loads(browser.evaluate(session, DOMAINS))
        if now != old:
            return now  # type: ignore[no-any-return]
        browser.evaluate(session, "new Promise(r => setTimeout(r, 50))")
        time.sleep(0.05)
    raise AssertionError(f"the time axes did not move from {old}")


def test_side_by_side_models_fit_their_columns(chromium: str, tmp_path: Path) -> None:
    """quicsm.side_by_side (the notebooks' view) in Chromium: no drawing wider than its column
    or the page, every column the same width, also a drawing alone on the last row."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_model import fig13_transitions

    from quicsm.model.inference import infer
    from quicsm.render.notebook import side_by_side

    t = fig13_transitions()
    traces = sorted(t["trace"].unique().to_list())
    parts = [traces[0::3], traces[1::3], traces[2::3]]
    models = {f"part {i}": infer(t.filter(t["trace"].is_in(p)), algorithm="observed")
              for i, p in enumerate(parts)}  # fmt: skip
    page = tmp_path / "side.html"
    page.write_text(f"<!DOCTYPE html><html><body>{side_by_side(models)}</body></html>")
    with Browser(chromium) as browser:
        session, load = browser.load(page.as_uri(), width=760)
        assert load.errors == []
        boxes = browser.evaluate(
            session,
            "Array.from(document.querySelectorAll('svg')).map(s => { const r = "
            "s.getBoundingClientRect(); return [r.left, r.right, r.width]; })",
        )
        page_width = browser.evaluate(session, "document.documentElement.clientWidth")
        scroll_width = browser.evaluate(session, "document.documentElement.scrollWidth")
    assert len(boxes) == 3
    assert scroll_width <= page_width  # nothing sticks out of the page
    assert all(right <= page_width for _, right, _ in boxes)
    widths = {round(w) for _, _, w in boxes}
    assert len(widths) == 1 and widths.pop() < page_width * 0.6  # two columns, the third alone


STACKS = Path(__file__).parents[1] / "traces" / "stacks" / "stacks.qlog"
#: one connection of each shipped producer under random loss (the shipped corpus)
PRODUCERS = {
    "quic-go": ["stack=quic-go", "version=v0.65.0"],
    "quiche": ["stack=quiche"],
    "aioquic": ["stack=aioquic"],
    "quinn": ["stack=quinn"],
}
#: the largest page one connection may make (bytes)
PAGE_BUDGET = 600_000
#: every text's box, each panel's and the figure's overflow, and each y domain, in one call
LAYOUT = """JSON.stringify((() => {
  const fig = document.querySelector('figure'), svg = document.querySelector('#chart svg');
  const frame = fig.getBoundingClientRect();
  const texts = Array.from(svg.querySelectorAll('text')).filter(t => t.textContent.trim())
    .map(t => { const r = t.getBoundingClientRect();
                return [t.textContent, r.left, r.right, r.height]; });
  const y = Object.entries(quicsmView._runtime.scales).filter(([k, v]) => /_y$/.test(k))
    .map(([k, v]) => [k, v.value.domain()]);
  return {page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
          figure: fig.scrollWidth - fig.clientWidth, left: frame.left, right: frame.right,
          texts: texts, y: y};
})())"""


@pytest.fixture(scope="module")
def producer_pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("producers")
    pages = {}
    for name, where in PRODUCERS.items():
        page = out / f"{name}.html"
        args = ["plot", str(STACKS), "--where", "scenario=loss1", "--where", "cc_algorithm=cubic"]
        for w in where:
            args += ["--where", w]
        result = CliRunner().invoke(main, [*args, "-o", str(page)])
        assert result.exit_code == 0, result.stderr
        assert result.stderr.count("#") == 1, result.stderr  # one connection
        pages[name] = page
    return pages


def _packets_in_view(page: Path, lo: float, hi: float) -> tuple[float, float]:
    """The lowest and highest packet number the packets panel has between ``lo`` and ``hi``
    ms, at full resolution (from the page's packed specification)."""
    import base64
    import gzip
    import re

    packed = re.search(r'id="spec">([^<]*)<', page.read_text()).group(1)  # type: ignore[union-attr]
    spec = json.loads(gzip.decompress(base64.b64decode(packed)))
    panel = next(p for p in spec["vconcat"] if p["title"]["text"].startswith("packets by"))
    values = []
    for layer in panel["layer"][1:]:
        rows = layer.get("data", {}).get("values", [])
        if not rows or "lv" not in rows[0]:
            continue
        finest = max(r["lv"] for r in rows)
        values += [r["v"] for r in rows if r["lv"] == finest and lo <= r["t"] <= hi]
    return min(values), max(values)


@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_each_producer_fits_every_width_and_refits_when_zoomed(
    chromium: str, producer: str, producer_pages: dict[str, Path], tmp_path: Path
) -> None:
    """One connection of each shipped producer at 800, 1,400 and 1,920 px: the page is at
    most 600 KB, draws without errors, nothing sticks out of the page or the figure, no text
    leaves the figure or shrinks below 11 px; zoomed to a tenth of the trace, the packets
    panel's y axis fits the packet numbers in view (no longer from 0 to the last packet)."""
    page = producer_pages[producer]
    assert page.stat().st_size <= PAGE_BUDGET, page.stat().st_size
    artifacts = os.environ.get("QUICSM_ARTIFACTS")
    with Browser(chromium) as browser:
        for width in (800, 1400, 1920):
            session, load = browser.load(page.as_uri(), width=width)
            assert _drawn(browser, session) == "yes"
            assert load.errors == [] and load.requests == [page.as_uri()]
            layout = json.loads(browser.evaluate(session, LAYOUT))
            assert layout["page"] <= 0 and layout["figure"] <= 0, (width, layout["figure"])
            for text, left, right, height in layout["texts"]:
                assert layout["left"] - 1 <= left and right <= layout["right"] + 1, (width, text)
                assert height >= 11, (width, text, height)
                assert not text.endswith("…"), (width, text)  # cut short: wrapped instead
            if artifacts:
                Path(artifacts).mkdir(parents=True, exist_ok=True)
                browser.screenshot(session, Path(artifacts) / f"plot-{producer}-{width}.png",
                                   width=width)  # fmt: skip
        # zoom to the middle tenth of the trace, as a wheel would
        whole = json.loads(browser.evaluate(session, DOMAINS))[0]
        lo = whole[0] + 0.45 * (whole[1] - whole[0])
        hi = lo + 0.1 * (whole[1] - whole[0])
        before = json.loads(browser.evaluate(session, DOMAINS))
        browser.evaluate(session, f"quicsmView.signal('zoom0_start', [{lo}, {hi}]).run(); 1")
        zoomed = _settled(browser, session, before)
        assert zoomed[0] == pytest.approx([lo, hi])  # the y scales follow in the same pulse
        layout = json.loads(browser.evaluate(session, LAYOUT))
    first, last = _packets_in_view(page, lo, hi)
    packets_y = layout["y"][2][1]  # window, RTT, packets, events
    assert packets_y[0] <= first and last <= packets_y[1], (packets_y, first, last)
    assert packets_y[1] - packets_y[0] <= 1.5 * (last - first) + 100, (packets_y, first, last)
