"""The report's conformance section in a real headless Chromium: it loads from disk with no
errors or requests, and a person sees the section, every scenario, and each figure with its
interval."""

from __future__ import annotations

from pathlib import Path

import pytest
from cdp import Browser, find_chromium

from quicsm.compare.load import compare_by_label
from quicsm.report import write_report

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "benchmarks" / "corpora" / "linux-tcp.qlog"
QUIC = ROOT / "benchmarks" / "corpora" / "conformance-quic-go.qlog"

pytestmark = pytest.mark.browser


def test_conformance_section_reads_in_chromium(tmp_path: Path) -> None:
    chromium = find_chromium()
    if chromium is None:
        pytest.fail("chromium is missing: scripts/setup --test installs Debian's chromium")
    comps = compare_by_label(
        [str(KERNEL), str(QUIC)],
        "stack",
        where={"cc_algorithm": "cubic", "scenario": "jitter,ratecap"},
        metrics=True,
    )
    report = write_report(
        tmp_path / "conformance.html",
        comps,
        conformance="linux-tcp",
        generated_at="2026-01-01 00:00 UTC",
    )
    with Browser(chromium) as browser:
        session, load = browser.load(report.as_uri())
        assert load.errors == [] and load.requests == [report.as_uri()]
        text = browser.evaluate(session, "document.querySelector('#conformance').innerText")
        assert "Conformance: against stack = linux-tcp" in text
        rows = browser.evaluate(
            session,
            "[...document.querySelectorAll('#conformance tbody tr')].slice(0, 2)"
            ".map(r => [...r.cells].map(c => c.innerText))",
        )
        assert [r[0] for r in rows] == ["jitter", "ratecap"]
        for r in rows:
            assert r[1] == "quic-go" and r[2] == "5 / 5"
            assert "[" in r[3] and "]" in r[3]  # the throughput ratio with its interval
        # the section sits inside the page: nothing runs off to the right
        assert browser.evaluate(
            session,
            "document.querySelector('#conformance').getBoundingClientRect().right"
            " <= document.documentElement.clientWidth + 1",
        )
