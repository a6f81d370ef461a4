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
from cdp import Browser, screenshot_then_settle
from click.testing import CliRunner

from quicsm.cli import main

SERVER = Path(__file__).parent / "fixtures" / "real" / "quic-go-v0.65.0" / "server.sqlog.zst"

pytestmark = pytest.mark.browser


XSS = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(2)</script>"
#: the time domain of every panel of the first connection (the view's scales named concat_N_x)
#: but its overview strip (the last, never zoomed)
DOMAINS = (
    "JSON.stringify(Object.entries(quicsmView._runtime.scales)"
    ".filter(([k, v]) => /^concat_\\d+_x$/.test(k)).map(([k, v]) => v.value.domain())"
    ".slice(0, -1))"
)
#: the overview strip's plotting area and the range drawn over it, on the page
OVERVIEW = """(() => { const bands = document.querySelector('g.c0ov_marks');
  const group = bands.closest('g.role-scope');
  const frame = group.querySelector('path.background').getBoundingClientRect();
  const marks = Array.from(group.querySelectorAll('g.role-mark'));
  const win = marks[marks.length - 1].querySelector('path').getBoundingClientRect();
  return [[frame.x, frame.y, frame.width, frame.height], [win.x, win.width]]; })()"""


def test_overview_strip_zooms_and_follows(chromium: str, producer_pages: dict[str, Path]) -> None:
    """The overview under the panels: a drag along it zooms every panel to the dragged range
    (the strip itself stays whole), and the range it draws follows a zoom made elsewhere."""
    page = producer_pages["quiche"]
    with Browser(chromium) as browser:
        session, load = browser.load(page.as_uri(), width=1400)
        assert _drawn(browser, session) == "yes" and load.errors == []
        whole = json.loads(browser.evaluate(session, DOMAINS))[0]
        frame, _ = browser.evaluate(session, OVERVIEW)
        browser.evaluate(session, f"window.scrollTo(0, {frame[1] - 400}); 1")
        time.sleep(0.2)
        frame, window = browser.evaluate(session, OVERVIEW)
        assert window[1] == pytest.approx(frame[2], abs=2)  # the whole trace is in view
        y = frame[1] + frame[3] / 2
        a, b = frame[0] + 0.2 * frame[2], frame[0] + 0.3 * frame[2]
        for kind, x in (("mousePressed", a), ("mouseMoved", b), ("mouseReleased", b)):
            browser.send("Input.dispatchMouseEvent",
                         {"type": kind, "x": x, "y": y, "button": "left", "buttons": 1,
                          "clickCount": 1}, session=session)  # fmt: skip
        zoomed = _settled(browser, session, [whole] * len(json.loads(
            browser.evaluate(session, DOMAINS))))  # fmt: skip
        span = whole[1] - whole[0]
        assert all(d == zoomed[0] for d in zoomed)
        assert zoomed[0][0] == pytest.approx(whole[0] + 0.2 * span, abs=span / 200)
        assert zoomed[0][1] == pytest.approx(whole[0] + 0.3 * span, abs=span / 200)
        # a zoom from elsewhere (as the wheel sets it): the strip draws the new range
        lo, hi = whole[0] + 0.5 * span, whole[0] + 0.6 * span
        browser.evaluate(session, f"quicsmView.signal('zoom0_start', [{lo}, {hi}]).run(); 1")
        _settled(browser, session, zoomed)
        frame, window = browser.evaluate(session, OVERVIEW)
        assert window[0] - frame[0] == pytest.approx(0.5 * frame[2], abs=2)
        assert window[1] == pytest.approx(0.1 * frame[2], abs=2)


#: clicks the first loss mark of the packets panel; what the page then shows under the chart
CLICK_LOSS = """(async () => { const el = Array.from(document.querySelectorAll(
  '#chart svg g.c0r_lost_marks path')).find(e => e.__data__ && e.__data__.datum);
  if (!el) return 'no loss mark';
  const r = el.getBoundingClientRect();
  el.dispatchEvent(new MouseEvent('click', {bubbles: true, clientX: r.x + r.width / 2,
                                            clientY: r.y + r.height / 2}));
  for (let i = 0; i < 400 && !document.body.dataset.shown; i++)
    await new Promise(res => setTimeout(res, 25));
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
    (tmp_path / "run.json").write_text(
        json.dumps({"stack": "quic-go", "version": SCRIPT, "scenario": 'a&amp;b " onload=alert(3)'})
    )
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
        shown = browser.send("Runtime.evaluate", {
            "expression": CLICK_LOSS, "awaitPromise": True, "returnByValue": True},
            session=session)["result"]["value"]  # fmt: skip
        assert ", trace 0, record " in shown and "packet_lost" in shown, shown
        assert '"packet_number"' in shown, shown
        assert browser.evaluate(session, "document.querySelectorAll('img').length") == 0
        # the packed specification, records and libraries, the loader, and the libraries it
        # unpacked and ran (allowed by their hash): no script from a label
        scripts = browser.evaluate(
            session, "Array.from(document.scripts).map(s => [s.type, s.id, s.textContent.length])"
        )
        assert len(scripts) == 5, scripts
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
        for kind, at in (
            ("mousePressed", (px, py)),
            ("mouseMoved", (px + 150, py + 60)),
            ("mouseReleased", (px + 150, py + 60)),
        ):
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


def _vega_spec(page: Path) -> dict:  # type: ignore[type-arg]
    """The Vega specification a page draws (packed in its #spec, its datasets as columns)."""
    from quicsm.render import charts
    from quicsm.render.packed_data import unpack_spec

    return unpack_spec(json.loads(charts.unpacked(page.read_text(), "spec")))


def panel_values(spec: dict, lo: float, hi: float) -> dict[str, tuple[float, float]]:  # type: ignore[type-arg]
    """Each panel (``concat_<k>``) -> the lowest and highest value it has at full resolution
    between ``lo`` and ``hi`` ms (a step line's row counts while it holds, until ``u``), of
    every numeric mark but the state bands; read from the specification's data, whatever
    zoom level the page draws."""
    data = {d["name"]: d for d in spec.get("data", [])}

    def rows(name: str) -> list[dict]:  # type: ignore[type-arg]
        while "values" not in data[name]:
            name = data[name]["source"]
        return data[name]["values"]  # type: ignore[no-any-return]

    out: dict[str, tuple[float, float]] = {}

    def visit(marks: list, panel: str | None) -> None:  # type: ignore[type-arg]
        for mark in marks:
            name = mark.get("name", "")
            if mark.get("type") == "group" and name.endswith("_group"):
                visit(mark.get("marks", []), name.removesuffix("_group"))
                continue
            source = mark.get("from", {}).get("data")
            if panel is None or not source or mark.get("type") not in ("line", "symbol"):
                continue
            found = rows(source)
            if not found or "v" not in found[0] or not isinstance(found[0]["v"], (int, float)):
                continue
            finest = max(r.get("lv", 0) for r in found)
            values = [r.get("y", r["v"]) for r in found if r.get("lv", 0) == finest
                      and r["t"] <= hi and r.get("u", r["t"]) >= lo]  # fmt: skip
            if values:
                old = out.get(panel, (min(values), max(values)))
                out[panel] = (min(old[0], *values), max(old[1], *values))

    visit(spec.get("marks", []), None)
    return out


#: every numeric y domain of the page, by panel (``concat_<k>``)
Y_DOMAINS = """JSON.stringify(Object.fromEntries(Object.entries(quicsmView._runtime.scales)
  .filter(([k, v]) => /^concat_\\d+_y$/.test(k) && typeof v.value.domain()[0] === 'number')
  .map(([k, v]) => [k.replace(/_y$/, ''), v.value.domain()])))"""


def _artifacts() -> Path:
    """Where the browser tests keep their screenshots: ``QUICSM_ARTIFACTS`` (CI), else the
    checkout's build/test-artifacts (ignored by git)."""
    default = Path(__file__).parents[1] / "build" / "test-artifacts"
    path = Path(os.environ.get("QUICSM_ARTIFACTS") or default)
    path.mkdir(parents=True, exist_ok=True)
    return path


def assert_fits(domain: list[float], low: float, high: float, where: object) -> None:
    """``domain`` holds [low, high] and is not much wider (an axis from zero: its top near
    ``high``)."""
    assert domain[0] <= low + 1e-9 and high <= domain[1] + 1e-9, (where, domain, low, high)
    if domain[0] == 0 and low >= 0:  # a scale that includes zero: the top fits
        assert domain[1] <= 1.5 * high + 1, (where, domain, low, high)
    else:
        assert domain[1] - domain[0] <= 1.5 * (high - low) + 0.05 * abs(high) + 1, (
            where, domain, low, high)  # fmt: skip


@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_each_producer_fits_every_width_and_refits_when_zoomed(
    chromium: str, producer: str, producer_pages: dict[str, Path]
) -> None:
    """One connection of each shipped producer at 800, 1,400 and 1,920 px: the page is at
    most 600 KB, draws without errors, nothing sticks out of the page or the figure, no text
    leaves the figure or shrinks below 11 px; the whole trace and, zoomed to its middle
    tenth, every panel's y axis fits the values in view at full resolution (not only those
    drawn at the zoom level). Screenshots of both, at each width, are kept (_artifacts)."""
    page = producer_pages[producer]
    assert page.stat().st_size <= PAGE_BUDGET, page.stat().st_size
    spec = _vega_spec(page)
    keep = _artifacts()
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
            whole = json.loads(browser.evaluate(session, DOMAINS))[0]
            domains = json.loads(browser.evaluate(session, Y_DOMAINS))
            in_view = panel_values(spec, *whole)
            assert set(in_view) <= set(domains) and len(in_view) >= 3, (domains, in_view)
            for panel, (low, high) in in_view.items():
                assert_fits(domains[panel], low, high, (width, "whole", panel))
            screenshot_then_settle(browser, session, keep / f"plot-{producer}-{width}.png", width)
            # zoom to the middle tenth of the trace, as a wheel would: every y axis refits
            lo = whole[0] + 0.45 * (whole[1] - whole[0])
            hi = lo + 0.1 * (whole[1] - whole[0])
            before = json.loads(browser.evaluate(session, DOMAINS))
            browser.evaluate(session, f"quicsmView.signal('zoom0_start', [{lo}, {hi}]).run(); 1")
            zoomed = _settled(browser, session, before)
            assert zoomed[0] == pytest.approx([lo, hi])  # the y scales follow in the same pulse
            domains = json.loads(browser.evaluate(session, Y_DOMAINS))
            in_view = panel_values(spec, lo, hi)
            assert len(in_view) >= 3, in_view
            for panel, (low, high) in in_view.items():
                assert_fits(domains[panel], low, high, (width, "zoomed", panel))
            browser.screenshot(session, keep / f"plot-{producer}-{width}-zoomed.png", width=width)


#: clicks one mark of each layer of the first connection that draws from events (named
#: ``c0r_<kind>``; the bands ``c0p<k>``, ``c0pk``, ``c0ps``, ``c0pe``), at its first element
#: with a record, and collects what the page then shows
CLICK_EACH = """(async () => {
  const out = {}, groups = Array.from(document.querySelectorAll('#chart svg g.role-mark'));
  for (const g of groups) {
    const name = Array.from(g.classList).find(c => /^c0(r_\\w+|p\\w*)_marks$/.test(c));
    if (!name || out[name]) continue;
    const el = Array.from(g.children).find(e => e.__data__ && e.__data__.datum &&
      typeof e.__data__.datum.r === 'number' && e.__data__.datum.r >= 0);
    if (!el) continue;
    const r = el.getBoundingClientRect();
    document.body.dataset.shown = '';
    el.dispatchEvent(new MouseEvent('click', {bubbles: true, clientX: r.x + r.width / 2,
                                              clientY: r.y + r.height / 2}));
    for (let i = 0; i < 400 && !document.body.dataset.shown; i++)
      await new Promise(res => setTimeout(res, 25));
    out[name] = {picked: window.quicsmPicked, shown: document.getElementById('raw').textContent};
  }
  return JSON.stringify(out); })()"""


def _file_records(path: Path) -> list[bytes]:
    """The file's JSON-SEQ records, read here on their own: item ``n`` is record ``n`` (the
    text after the ``n``-th separator; item 0 is what precedes the first)."""
    import zstandard

    with path.open("rb") as f:
        content = zstandard.ZstdDecompressor().stream_reader(f).read()
    return [part.strip() for part in content.split(b"\x1e")]


#: mark kind (its layer's name) -> the event names it may be drawn from
KIND_EVENTS = {
    "sent": {"packet_sent", "packet_received"},
    "acked": {"packet_received", "packet_sent"},
    "lost": {"packet_lost"},
    "spurious": {"packet_lost"},
    "ev_packet_lost": {"packet_lost"},
    "ev_spurious_loss": {"packet_lost"},
    "stream_sent": {"packet_sent", "packet_received"},
    "stream_acked": {"packet_received", "packet_sent"},
    "stream_lost": {"packet_lost"},
    "max_data": {"packet_received", "packet_sent", "parameters_set"},
    "max_stream_data": {"packet_received", "packet_sent", "parameters_set"},
}
METRIC_FIELDS = {"cwnd_bytes": {"congestion_window", "cwnd"},
                 "bytes_in_flight": {"bytes_in_flight"}, "ssthresh_bytes": {"ssthresh"},
                 "smoothed_rtt_ms": {"smoothed_rtt"}, "min_rtt_ms": {"min_rtt"},
                 "rtt_sample": {"latest_rtt"}}  # fmt: skip


@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_a_click_on_each_kind_of_mark_shows_its_record(
    chromium: str, producer: str, producer_pages: dict[str, Path]
) -> None:
    """One mark of each kind on each producer's page, clicked: the page shows the record it
    was drawn from, exactly as the file has it (compared with the file read here), named by
    file, trace and record number; the record is an event of that kind (a packet mark's of
    its packet number, a line's logging its metric) at the mark's time."""
    page = producer_pages[producer]
    records = _file_records(STACKS)
    with Browser(chromium) as browser:
        session, load = browser.load(page.as_uri(), width=1400)
        assert _drawn(browser, session) == "yes" and load.errors == []
        trace = int(browser.evaluate(session, "document.querySelector('h1').textContent")
                    .split("#")[1].split(" ")[0])  # fmt: skip
        clicked = json.loads(browser.send("Runtime.evaluate", {
            "expression": CLICK_EACH, "awaitPromise": True, "returnByValue": True},
            session=session)["result"]["value"])  # fmt: skip
    kinds = {name.removeprefix("c0").removesuffix("_marks") for name in clicked}
    assert {"r_sent", "r_cwnd_bytes"} <= kinds, kinds  # quinn logs no ACK frames
    assert any(k.startswith("p") for k in kinds), kinds  # a state band
    # the trace's first event: its time is the plot's zero
    events = (b'{"time"', b'{"name"', b'{"data"')
    headers = [i for i, r in enumerate(records)
               if r and not r.startswith(events) and "name" not in json.loads(r)]  # fmt: skip
    zero = json.loads(records[headers[trace] + 1])["time"]
    for name, got in clicked.items():
        kind = name.removeprefix("c0").removesuffix("_marks").removeprefix("r_")
        picked, shown = got["picked"], got["shown"]
        number = picked["r"]
        assert headers[trace] < number < (headers + [len(records)])[trace + 1], (name, number)
        text = records[number].decode()
        assert shown == f"{STACKS}, trace {trace}, record {number}:\n{text}", (name, shown)
        event = json.loads(text)
        short = event["name"].rpartition(":")[2]
        at = float(event["time"]) - zero
        datum = picked["datum"]
        if kind.startswith("p"):  # a state band: the change that began it, within the band
            assert datum["start"] - 0.002 <= at <= datum["end"] + 0.002, (name, at, datum)
            continue
        when = datum.get("first", datum["t"])
        assert at == pytest.approx(when, abs=0.002), (name, at, datum)
        if kind in METRIC_FIELDS:
            assert "metrics" in short and METRIC_FIELDS[kind] & event["data"].keys(), (name, text)
        elif kind in KIND_EVENTS:
            assert short in KIND_EVENTS[kind], (name, text)
        if kind == "sent":
            header_ = event["data"].get("header", {})
            assert header_.get("packet_number") == datum["v"], (name, text)


def test_a_resize_keeps_the_zoom(chromium: str, producer_pages: dict[str, Path]) -> None:
    """Zoomed in time and, by a rectangle, in one panel's values: a narrower window redraws
    the chart at its new width with the same time range on every panel and the same y range."""
    page = producer_pages["quiche"]
    with Browser(chromium) as browser:
        session, load = browser.load(page.as_uri(), width=1400)
        assert _drawn(browser, session) == "yes" and load.errors == []
        whole = json.loads(browser.evaluate(session, DOMAINS))[0]
        lo, hi = whole[0] + 0.3 * (whole[1] - whole[0]), whole[0] + 0.4 * (whole[1] - whole[0])
        browser.evaluate(session, f"quicsmView.signal('zoom0_start', [{lo}, {hi}])"
                                  ".signal('ry0_2', [10, 200]).run(); 1")  # fmt: skip
        zoomed = _settled(browser, session, [whole] * 5)
        assert zoomed[0] == pytest.approx([lo, hi])
        width = browser.evaluate(session, "document.querySelector('#chart svg').clientWidth")
        draws = int(browser.evaluate(session, "document.body.dataset.draws"))
        browser.evaluate(session, "document.body.dataset.drawn = ''; 1")
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": 1000, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                     session=session)  # fmt: skip
        assert _drawn(browser, session) == "yes"  # the redraw the resize causes, ended
        assert int(browser.evaluate(session, "document.body.dataset.draws")) > draws
        narrow = browser.evaluate(session, "document.querySelector('#chart svg').clientWidth")
        assert narrow < width - 200, (width, narrow)
        after = json.loads(browser.evaluate(session, DOMAINS))
        assert all(d == pytest.approx([lo, hi]) for d in after), after
        assert json.loads(browser.evaluate(session, Y_PACKETS)) == [10, 200]
        # the redrawn view takes the next rectangle (not the view the resize replaced)
        panel = browser.evaluate(session, PACKETS_PANEL)
        browser.evaluate(session, f"window.scrollTo(0, {panel[1] - 300}); 1")
        panel = browser.evaluate(session, PACKETS_PANEL)
        px, py = panel[0] + panel[2] * 0.4, panel[1] + panel[3] * 0.3
        for kind, at in (
            ("mousePressed", (px, py)),
            ("mouseMoved", (px + 150, py + 60)),
            ("mouseReleased", (px + 150, py + 60)),
        ):
            browser.send("Input.dispatchMouseEvent",
                         {"type": kind, "x": at[0], "y": at[1], "button": "left", "buttons": 1,
                          "clickCount": 1, "modifiers": 8}, session=session)  # fmt: skip
        boxed = _settled(browser, session, after)
        assert all(d == boxed[0] for d in boxed) and boxed[0][1] - boxed[0][0] < hi - lo
        low, high = json.loads(
            browser.evaluate(session, "JSON.stringify(quicsmView.signal('ry0_2'))")
        )
        assert [low, high] != [10, 200] and low < high
        assert json.loads(browser.evaluate(session, Y_PACKETS)) == [low, high]


#: every time domain of a small-multiples page, by scale name (concat_<conn>_concat_<panel>_x)
ALL_DOMAINS = """JSON.stringify(Object.fromEntries(Object.entries(quicsmView._runtime.scales)
  .filter(([k, v]) => /_x$/.test(k)).map(([k, v]) => [k, v.value.domain()])))"""


def test_small_multiples_draw_zoom_apart_and_open_their_own_records(
    chromium: str, tmp_path: Path
) -> None:
    """Two connections on one page: drawn without errors; a zoom of the second moves only the
    second's time axes; a click on the second's mark opens a record of its own trace."""
    page = tmp_path / "two.html"
    result = CliRunner().invoke(
        main, ["plot", f"{STACKS}#32", f"{STACKS}#2", "-o", str(page)]
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    with Browser(chromium) as browser:
        session, load = browser.load(page.as_uri(), width=1400)
        assert _drawn(browser, session) == "yes" and load.errors == []
        before = json.loads(browser.evaluate(session, ALL_DOMAINS))
        first = {k: v for k, v in before.items() if k.startswith("concat_0_")}
        second = {k: v for k, v in before.items() if k.startswith("concat_1_")}
        assert len(first) >= 5 and len(second) >= 5
        hi = next(iter(second.values()))[1] / 10
        browser.evaluate(session, f"quicsmView.signal('zoom1_start', [0, {hi}]).run(); 1")
        give_up = time.monotonic() + 120  # against a hang only: a loaded machine redraws slowly
        while (after := json.loads(browser.evaluate(session, ALL_DOMAINS))) == before:
            assert time.monotonic() < give_up, "the second connection's axes did not move"
            time.sleep(0.05)
        assert all(after[k] == v for k, v in first.items())
        overview = max(second, key=lambda k: int(k.split("_")[3]))  # never zoomed
        assert all(after[k] == pytest.approx([0, hi]) for k in second if k != overview)
        assert after[overview] == second[overview]
        shown = browser.send("Runtime.evaluate", {
            "expression": CLICK_EACH.replace("c0(r_", "c1(r_"), "awaitPromise": True,
            "returnByValue": True}, session=session)["result"]["value"]  # fmt: skip
    clicked = json.loads(shown)
    assert clicked and all(f"{STACKS}, trace 2, record " in c["shown"] for c in clicked.values())
