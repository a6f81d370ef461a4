"""The `quicsm plot` HTML page in a real headless Chromium: it loads from disk with no errors
and no requests, the plot has its panels, bands and marks at a readable size, and a screenshot
is taken (kept under ``QUICSM_ARTIFACTS`` when that is set, as CI does)."""

from __future__ import annotations

import os
import shutil
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
    if path is None:  # the same in and out of CI: a browser test without a browser fails
        pytest.fail("chromium is missing: scripts/setup --test installs Debian's chromium")
    return path


def test_plot_html_in_chromium(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "connection.html"
    result = CliRunner().invoke(main, ["plot", f"{SERVER}#0", "-o", str(page)])
    assert result.exit_code == 0, result.stderr
    with Browser(chromium) as browser:
        session, load = browser.load(page.as_uri())
        assert load.errors == []
        assert load.requests == [page.as_uri()]
        assert browser.evaluate(session, "document.scripts.length") == 0
        count = "n => document.querySelectorAll(n).length"
        n_loss = browser.evaluate(session, f"({count})('svg .loss')")
        n_pto = browser.evaluate(session, f"({count})('svg .pto')")
        assert n_loss > 0 and n_pto > 0
        assert browser.evaluate(session, f"({count})('svg .band')") > 4
        # the plot fills the column and its text is readable (at least 9 px on screen)
        box = browser.evaluate(
            session,
            "(() => { const r = document.querySelector('svg.connection')"
            ".getBoundingClientRect(); return [r.width, r.height]; })()",
        )
        assert box[0] > 800 and box[1] > 400, box
        smallest = browser.evaluate(
            session,
            "Math.min(...Array.from(document.querySelectorAll('svg.connection text'))"
            ".map(t => t.getBoundingClientRect().height))",
        )
        assert smallest >= 9, smallest
        # hovering a band names its state
        tip = browser.evaluate(session, "document.querySelector('svg .band title').textContent")
        assert tip.split(":")[0] in browser.evaluate(session, "document.body.innerText")
        shot = browser.screenshot(session, tmp_path / "plot.png")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 30_000
    artifacts = os.environ.get("QUICSM_ARTIFACTS")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(artifacts) / "plot-screenshot.png")


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
