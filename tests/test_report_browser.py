"""The HTML report in a real headless Chromium: it loads from disk with no console errors, no
script runs, nothing is fetched, text from traces shows as text, and a screenshot is taken.

The screenshot is written to the test's temporary directory and, when ``QUICSM_ARTIFACTS`` is
set, copied there (CI keeps it for people to look at).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from cdp import Browser
from diff_helpers import patterned_traces, write_group

from quicsm.compare.load import compare_by_label
from quicsm.report import write_report

XSS = "<script>alert(1)</script>"

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    for version, app_ms, rec_ms in (("1.0", 30, 20), ("2.0", 300, 45)):
        write_group(
            root / f"v{version}",
            patterned_traces(8, prefix=f"t{version}", app_ms=app_ms, recovery_ms=rec_ms),
            labels={"version": version, "completion_ms": 100 + app_ms / 3, "note": XSS},
            title=XSS,
        )
    comps = compare_by_label([str(root)], "version")
    return write_report(
        root / f"report {XSS}.html".replace("/", "_"), comps, generated_at="2026-01-01 00:00 UTC"
    )


def test_report_loads_cleanly_in_chromium(chromium: str, report_file: Path, tmp_path: Path) -> None:
    with Browser(chromium) as browser:
        session, load = browser.load(report_file.as_uri())
        assert load.errors == []
        assert load.dialogs == []
        # the page itself is the only thing loaded
        assert load.requests == [report_file.as_uri()]
        assert browser.evaluate(session, "document.scripts.length") == 0
        text = browser.evaluate(session, "document.body.innerText")
        assert XSS in text  # shown as text, not run
        assert "ApplicationLimited: " in text and "What changed" in text
        n_svg = browser.evaluate(session, "document.querySelectorAll('svg').length")
        assert n_svg >= 7
        # every chart has room: no SVG is collapsed to nothing
        sizes = browser.evaluate(
            session,
            "Array.from(document.querySelectorAll('main svg')).map(s => "
            "[s.getBoundingClientRect().width, s.getBoundingClientRect().height])",
        )
        assert all(w > 50 and h > 50 for w, h in sizes), sizes
        # the two groups' state machines share one layout: every state at the same place
        places = browser.evaluate(
            session,
            "Array.from(document.querySelectorAll('.fsms svg.fsm')).map(s => "
            "Object.fromEntries(Array.from(s.querySelectorAll('g.node')).map(g => "
            "[g.querySelector('title').textContent, (() => { const r = g.getBoundingClientRect();"
            " return [Math.round(r.x - s.getBoundingClientRect().x), Math.round(r.y - "
            "s.getBoundingClientRect().y)]; })()])))",
        )
        assert len(places) == 2 and len(places[0]) >= 5
        assert places[0] == places[1]
        # ... side by side: same top, B to the right of A, each within the page
        boxes = browser.evaluate(
            session,
            "Array.from(document.querySelectorAll('.fsms svg.fsm')).map(s => { const r = "
            "s.getBoundingClientRect(); return [r.left, r.top, r.right]; })",
        )
        assert abs(boxes[0][1] - boxes[1][1]) < 2 and boxes[1][0] >= boxes[0][2], boxes
        assert boxes[1][2] <= browser.evaluate(session, "document.documentElement.clientWidth")
        # hover text names states, not graphviz ids
        titles = browser.evaluate(
            session,
            "Array.from(document.querySelectorAll('.fsms svg.fsm g.node title, "
            ".fsms svg.fsm g.edge title')).map(t => t.textContent)",
        )
        assert "ApplicationLimited" in titles
        assert not any(t.startswith("n") and t[1:2].isdigit() for t in titles), titles
        # the diagrams' text is readable on the page
        smallest = browser.evaluate(
            session,
            "Math.min(...Array.from(document.querySelectorAll('.fsms svg.fsm text'))"
            ".map(t => t.getBoundingClientRect().height))",
        )
        assert smallest >= 9, smallest
        shot = browser.screenshot(session, tmp_path / "report.png")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000
    artifacts = os.environ.get("QUICSM_ARTIFACTS")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(artifacts) / "report-screenshot.png")


def test_harness_sees_errors_and_requests(chromium: str, tmp_path: Path) -> None:
    """The checks above can fail: a page with a script error, an alert and a fetch is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<html><body><script>console.error('boom'); alert('x'); nosuch()</script>"
        '<img src="http://127.0.0.1:9/x.png"></body></html>'
    )
    with Browser(chromium) as browser:
        _, load = browser.load(bad.as_uri())
    assert any("boom" in e for e in load.errors)
    assert any("nosuch" in e for e in load.errors)
    assert load.dialogs == ["x"]
    assert "http://127.0.0.1:9/x.png" in load.requests


#: per small multiple of the representative traces: [drawn width of its lines, plot width]
_TRACE_WIDTHS = """Array.from(document.querySelectorAll('svg.traces g.panel')).map(g => {
  const plot = g.querySelector(':scope > rect.frame').getBoundingClientRect();
  const lines = Array.from(g.querySelectorAll(':scope > path.line')).map(p =>
    p.getBoundingClientRect());
  const left = Math.min(...lines.map(r => r.left)), right = Math.max(...lines.map(r => r.right));
  return [right - left, plot.width]; })"""


def test_version_report_reads_at_a_glance(chromium: str, tmp_path: Path) -> None:
    """The shipped corpus' version report: each representative trace uses at least half of
    its plot's width (a 26 s and a 1 s trace, each on its own axes), A and B diagrams side by
    side with readable text, a heatmap legend."""
    from click.testing import CliRunner

    from quicsm.cli import main

    root = Path(__file__).parent.parent / "traces"
    out = tmp_path / "version.html"
    result = CliRunner().invoke(
        main,
        ["report", str(root / "quic-go-v0.48.2.qlog"), str(root / "quic-go-v0.65.0.qlog"),
         "--by", "version", "--where", "vantage=server", "-o", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    with Browser(chromium) as browser:
        session, load = browser.load(out.as_uri(), width=1200)
        assert load.errors == [] and load.requests == [out.as_uri()]
        widths = browser.evaluate(session, _TRACE_WIDTHS)
        assert len(widths) == 2, widths
        for drawn, plot in widths:
            assert plot > 300 and drawn >= 0.5 * plot, widths
        tops = browser.evaluate(
            session,
            "Array.from(document.querySelectorAll('.fsms svg.fsm')).map(s => "
            "Math.round(s.getBoundingClientRect().top))",
        )
        assert len(tops) == 2 and tops[0] == tops[1]
        # each diagram fits the window with room to spare (they were ~900 px tall, stacked)
        heights = browser.evaluate(
            session,
            "Array.from(document.querySelectorAll('.fsms svg.fsm')).map(s => "
            "s.getBoundingClientRect().height)",
        )
        window = browser.evaluate(session, "window.innerHeight")
        assert all(h <= 0.8 * window for h in heights), (heights, window)
        smallest = browser.evaluate(
            session,
            "Math.min(...Array.from(document.querySelectorAll('.fsms svg.fsm text'))"
            ".map(t => t.getBoundingClientRect().height))",
        )
        assert smallest >= 9, smallest
        legend = browser.evaluate(
            session, "document.querySelectorAll('svg.heatmap g.legend.gradient rect').length"
        )
        assert legend >= 10  # the heatmap's colour scale has a legend, its colours drawn
        # ApplicationLimited time by cause: its seven lines, both groups' cells, within the page
        rows = browser.evaluate(
            session,
            "Array.from(document.querySelectorAll('table.app-limited tr')).map(r => "
            "Array.from(r.cells).map(c => c.innerText))",
        )
        assert len(rows) == 8 and all(len(r) == 3 for r in rows), rows
        lines = {r[0]: r[1:] for r in rows[1:]}
        assert lines["pacing"] == ["not logged", "not logged"]
        assert all(c.endswith("ms (logged)") for c in lines["ApplicationLimited, all"]), lines
        right = browser.evaluate(
            session, "document.querySelector('table.app-limited').getBoundingClientRect().right"
        )
        assert right <= browser.evaluate(session, "document.documentElement.clientWidth")
        shot = browser.screenshot(session, tmp_path / "version-report.png")
    artifacts = os.environ.get("QUICSM_ARTIFACTS")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(artifacts) / "version-report-screenshot.png")


#: every SVG text outside its drawing, and the page's horizontal overflow
CLIPPED = """JSON.stringify((() => { const out = [];
  for (const svg of document.querySelectorAll('main svg')) {
    const box = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll('text')) {
      if (!t.textContent.trim()) continue;
      const r = t.getBoundingClientRect();
      if (r.left < box.left - 1 || r.right > box.right + 1) out.push(t.textContent);
    }
  }
  return {overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
          clipped: out};
})())"""


@pytest.mark.parametrize("width", [800, 1400, 1920])
def test_report_text_fits_at_every_width(chromium: str, report_file: Path, width: int) -> None:
    """No chart text sticks out of its drawing (a state name lost its first letter, a heatmap
    title was cut), the page does not scroll sideways, and the first screen opens with the
    verdict: what changed, how sure, why."""
    import json

    with Browser(chromium) as browser:
        session, load = browser.load(report_file.as_uri(), width=width)
        assert load.errors == []
        layout = json.loads(browser.evaluate(session, CLIPPED))
        assert layout["overflow"] <= 0 and layout["clipped"] == [], layout
        verdict = browser.evaluate(
            session,
            "Array.from(document.querySelectorAll('.verdict p')).map(p => p.innerText)",
        )
        assert 1 <= len(verdict) <= 3 and verdict[0].startswith("What changed:"), verdict
        top = browser.evaluate(
            session, "document.querySelector('.verdict').getBoundingClientRect().top"
        )
        assert top < 900  # on the first screen


#: the skipped-input box, if any: [visible, its text, its top, the first comparison's top]
_SKIPPED_BOX = """(() => { const box = document.getElementById('skipped');
  if (!box) return null;
  const r = box.getBoundingClientRect(), s = getComputedStyle(box);
  const first = document.querySelector('section.comparison').getBoundingClientRect();
  return [r.width > 0 && r.height > 0 && s.display !== 'none' && s.visibility !== 'hidden',
          box.innerText, r.top, first.top]; })()"""


def test_lenient_report_shows_what_it_skipped(chromium: str, tmp_path: Path) -> None:
    """``quicsm report --lenient`` of a damaged file: a box above the comparison names the
    records skipped (file, record, line, what was expected, trace); the report of undamaged
    files, lenient too, has none."""
    from click.testing import CliRunner
    from test_skipped_once import BAD_LOSS, BAD_PACKET, _broken

    from quicsm.cli import main

    (tmp_path / "bad").mkdir()
    (tmp_path / "clean").mkdir()
    bad = _broken(tmp_path / "bad", BAD_LOSS, BAD_PACKET)
    clean = _broken(tmp_path / "clean")
    pages = {}
    for name, a in (("damaged", bad), ("undamaged", tmp_path / "clean2.sqlog")):
        if name == "undamaged":
            a.write_bytes(clean.read_bytes())
        out = tmp_path / f"{name}.html"
        result = CliRunner().invoke(
            main, ["report", str(a), "--vs", str(clean), "--lenient", "--no-cache", "-o", str(out)]
        )
        assert result.exit_code == 0, result.output
        pages[name] = out
    with Browser(chromium) as browser:
        session, load = browser.load(pages["damaged"].as_uri())
        assert load.errors == []
        visible, text, top, first = browser.evaluate(session, _SKIPPED_BOX)
        assert visible and top < first, (top, first)
        assert f"skipped 2 records (2 of {bad})" in text, text
        for record in (100, 101):
            assert f"{bad}: record {record} (line {record}): expected a JSON text, got" in text, (
                text
            )
        assert text.count(f"(trace {bad}#0000)") == 2, text
        methods = browser.evaluate(session, "document.getElementById('methods').innerText")
        assert f"Skipped input: skipped 2 records (2 of {bad})" in methods
        browser.screenshot(session, tmp_path / "skipped.png")
        session, load = browser.load(pages["undamaged"].as_uri())
        assert load.errors == []
        assert browser.evaluate(session, _SKIPPED_BOX) is None
        assert "Skipped input" not in browser.evaluate(session, "document.body.innerText")
