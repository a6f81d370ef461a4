"""``quicsm report``: a self-contained, escaped, deterministic HTML page (and Markdown)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from diff_helpers import patterned_traces, write_group
from hypothesis import given
from hypothesis import strategies as st

from quicsm.cli import main
from quicsm.compare.load import compare_paths
from quicsm.report import build_report, write_report

XSS = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    write_group(
        root / "v1",
        patterned_traces(8, prefix="a", app_ms=30),
        labels={"version": "1.0", "completion_ms": 100, "note": XSS},
        title=XSS,
    )
    write_group(
        root / "v2<b>",
        patterned_traces(8, prefix="b", app_ms=300, recovery_ms=40),
        labels={"version": "2.0", "completion_ms": 140, "note": XSS},
        title=XSS,
    )
    return root


@pytest.fixture(scope="module")
def html(corpus: Path) -> str:
    comp = compare_paths([str(corpus / "v1")], [str(corpus / "v2<b>")])
    return build_report([comp], generated_at="2026-01-01 00:00 UTC", command="quicsm report")


def test_every_section_is_there(html: str) -> None:
    for heading in (
        "What changed",
        "State machines",
        "Time in state and dwell times",
        "Congestion window of a representative trace",
        "Scenario matrix",
        "Methods",
    ):
        assert f"{heading}</h3>" in html
    assert "ApplicationLimited: " in html
    assert " of time (primary, Holm-adjusted p &lt; 0.001, n = 8 vs 8)" in html
    assert html.count("<svg") >= 7  # 2 FSMs, diff graph, bars, dwell, 2 congestion charts, heatmap


def test_self_contained_no_scripts_no_external_references(html: str) -> None:
    assert "<script" not in html.lower()
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    # the only URLs are XML namespace names (identifiers, never fetched)
    urls = set(re.findall(r"""(?:https?:)?//[^\s"'<>)]+""", html))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}, urls
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!#)""", html)


def test_strings_from_traces_are_escaped(html: str) -> None:
    assert XSS not in html
    # the trace title is shown (as text) in the representative trace's caption
    assert "titled “&lt;script&gt;alert(1)&lt;/script&gt;”" in html
    # a directory name (group name, file names) is escaped everywhere it appears
    assert "v2&lt;b&gt;" in html
    assert "v2<b>" not in html


def test_scenario_heatmap_from_labels(html: str) -> None:
    # object_size alternates in run.json: the heatmap uses it and completion_ms as the metric
    assert "completion_ms: % difference of" in html
    assert "object_size" in html


def test_deterministic(corpus: Path, html: str) -> None:
    comp = compare_paths([str(corpus / "v1")], [str(corpus / "v2<b>")])
    again = build_report([comp], generated_at="2026-01-01 00:00 UTC", command="quicsm report")
    assert again == html


def test_markdown_report(corpus: Path, tmp_path: Path) -> None:
    comp = compare_paths([str(corpus / "v1")], [str(corpus / "v2<b>")])
    out = write_report(tmp_path / "r.md", [comp])
    md = out.read_text()
    assert md.startswith("# quicsm report: ")
    assert "## Methods" in md and "### Scenario matrix" in md
    assert "<b>" not in md and "v2&lt;b>" in md


def test_cli_writes_html_and_md(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(
        main,
        [
            "report",
            str(corpus),
            "--by",
            "version",
            "-o",
            str(out),
            "--matrix",
            "object_size",
            "--metric",
            "state:ApplicationLimited",
        ],
        env={"SOURCE_DATE_EPOCH": "1767225600"},
    )
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "generated 2026-01-01 00:00 UTC" in text
    assert "time share of ApplicationLimited: % difference" in text
    md = tmp_path / "report.md"
    result = CliRunner().invoke(main, ["report", str(corpus), "--by", "version", "-o", str(md)])
    assert result.exit_code == 0 and md.read_text().startswith("# quicsm report")


def test_cli_keeps_its_controllers_in_the_cache_and_draws_the_same_page(
    corpus: Path, tmp_path: Path
) -> None:
    """The controllers the report named are kept in the cache directory (``--cache-dir``) and
    read back by the next report of the same groups, which writes the same bytes; its charts
    are drawn every time (no script engine: cheap), so none is kept; ``--no-cache`` keeps
    nothing and writes the same page."""
    cache = tmp_path / "cache"
    pages = []
    for i, extra in enumerate((["--cache-dir", str(cache)], ["--cache-dir", str(cache)],
                               ["--no-cache"])):  # fmt: skip
        out = tmp_path / f"r{i}.html"
        args = ["report", str(corpus / "v1"), "--vs", str(corpus / "v2<b>"), "-o", str(out)]
        result = CliRunner().invoke(main, [*args, *extra], env={"SOURCE_DATE_EPOCH": "0"})
        assert result.exit_code == 0, result.output
        pages.append(out.read_text(encoding="utf-8"))
        kept = sorted((cache / "families").glob("*.json"))
        assert not (cache / "charts").exists()
        if i == 0:
            first = kept
    assert pages[0].count('<svg xmlns="http://www.w3.org/2000/svg" class="chart ') == 4
    assert pages[1] == pages[0] and pages[2] == pages[0]
    assert len(first) == 2, first
    assert kept == first  # the second report and --no-cache added none


def test_cli_errors(corpus: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        [
            "report",
            str(corpus),
            "--by",
            "version",
            "-o",
            str(tmp_path / "r.html"),
            "--metric",
            "state:Nope",
        ],
    )
    assert result.exit_code == 1 and "--metric 'state:Nope': unknown state" in result.stderr
    result = CliRunner().invoke(
        main, ["report", str(corpus), "--by", "version", "-o", str(tmp_path / "no" / "r.html")]
    )
    assert result.exit_code == 1 and "cannot write the report" in result.stderr


def _labelled(prefix: str, labels: list[dict[str, object]]) -> object:
    from diff_helpers import frame

    from quicsm.compare.grouping import group_from_frame

    traces = patterned_traces(len(labels), prefix=prefix, app_ms=30)
    df = frame(traces, file=f"{prefix}.sqlog")
    keyed = {(f"{prefix}.sqlog", t[0]): lab for t, lab in zip(traces, labels, strict=True)}
    return group_from_frame(prefix, df, labels=keyed)


def test_scenario_axes_prefer_a_full_crossing_then_the_scenario() -> None:
    from quicsm.compare.grouping import Comparison
    from quicsm.report.sections import choose_axes

    grid = [
        {"network.down.rate_mbit": r, "object_size": s, "scenario": f"{r}-{s}", "run": i}
        for i, (r, s) in enumerate([(r, s) for r in (10, 100) for s in (1e4, 1e6)] * 2)
    ]
    comp = Comparison(_labelled("a", grid), _labelled("b", grid))  # type: ignore[arg-type]
    assert choose_axes(comp, exclude=set()) == ("network.down.rate_mbit", "object_size")
    # rate and delay only partly cross (3 of 4 combinations): the named scenario is used
    partial = [
        {"network.down.rate_mbit": r, "network.down.delay_ms": d, "scenario": n}
        for n, r, d in [("base", 100, 18), ("ratecap", 10, 18), ("jitter", 100, 56)] * 2
    ]
    comp = Comparison(_labelled("c", partial), _labelled("d", partial))  # type: ignore[arg-type]
    assert choose_axes(comp, exclude=set()) == ("scenario", None)
    # nothing shared: no matrix
    comp = Comparison(
        _labelled("e", [{"scenario": "x"}] * 3),  # type: ignore[arg-type]
        _labelled("f", [{"scenario": "y"}] * 3),  # type: ignore[arg-type]
    )
    assert choose_axes(comp, exclude=set()) is None


TRACES = Path(__file__).parent.parent / "traces"


@pytest.fixture(scope="module")
def version_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The shipped corpus's version report, in both formats."""
    out = tmp_path_factory.mktemp("version")
    files = [str(TRACES / "quic-go-v0.48.2.qlog"), str(TRACES / "quic-go-v0.65.0.qlog")]
    texts = []
    for name in ("r.md", "r.html"):
        result = CliRunner().invoke(
            main,
            [
                "report",
                *files,
                "--by",
                "version",
                "--where",
                "vantage=server",
                "-o",
                str(out / name),
            ],
        )
        assert result.exit_code == 0, result.output
        texts.append((out / name).read_text(encoding="utf-8"))
    return texts[0], texts[1]


def _section(md: str, title: str) -> str:
    start = md.index(f"### {title}\n")
    end = md.index("\n### ", start + 1)
    return md[start:end]


def test_version_report_names_the_jitter_change_and_its_mechanism(
    version_report: tuple[str, str],
) -> None:
    md, html = version_report
    changed = _section(md, "What changed")
    lines = [line for line in changed.splitlines() if line.startswith("- ")]
    # outcomes lead: the jitter scenario's completion time, decided (10 runs per version in
    # the corpus's jitter scenario), with its spurious-loss mechanism
    assert lines[0].startswith("- [PRIMARY] completion time in jitter: ")
    assert "(-96%;" in lines[0]
    assert "primary, Holm-adjusted p < 0.001, significant" in lines[0]
    # v0.48.2 logs no spurious loss: the packets count them, far above v0.65.0's, and say so
    assert "why: spurious losses (declared lost, later acknowledged) 120.0 → 14.3 " in lines[0]
    assert "from packets: quic-go v0.48.2 logs none" in lines[0]
    assert "losses by packet threshold" in lines[0]
    # the same in the HTML page's first card
    first_card = html[html.index("What changed</h3>") : html.index("State machines</h3>")]
    assert "completion time in jitter" in first_card and "spurious losses" in first_card
    # the order: outcomes, the evidence, the caveats, then the detail
    assert md.index("### What changed") < md.index("### Why") < md.index("### Outcomes")


def test_representative_traces_come_from_one_stratum_each_on_its_own_axes(
    version_report: tuple[str, str],
) -> None:
    md, html = version_report
    assert "both from jitter" in md
    section = html[html.index("Congestion window of a representative trace</h3>") :]
    section = section[: section.index("Scenario matrix</h3>")]
    assert "Both traces come from <b>jitter</b>" in section
    # small multiples in one chart, each named after its group, each on its own axes: the
    # v0.48.2 trace lasts seconds and the v0.65.0 one about a second, so their time ticks differ
    charts = section.split("<svg")[1:]
    assert len(charts) == 1
    titles = re.findall(r'<text class="title"[^>]*>([^<]+)</text>', charts[0])
    assert titles == ["version=v0.48.2", "version=v0.65.0"], titles
    axes = re.findall(r'aria-label="x axis: time \(ms\), from ([\d.,]+) to ([\d.,]+)"', charts[0])
    assert len(axes) == 2 and axes[0] != axes[1], axes


def _diagram_shares(html: str) -> list[dict[str, str]]:
    """Each group's state diagram: state -> the "% of time" on its node."""
    pair = html[html.index('class="pair fsms"') :]
    out = []
    for figure in pair[: pair.index("</div>")].split("<figure>")[1:]:
        nodes = re.findall(r'class="node">\s*<title>([^<]+)</title>(.*?)</g>', figure, re.S)
        out.append({
            state: m.group(1)
            for state, body in nodes
            if (m := re.search(r">([\d.]+%) of time<", body))
        })  # fmt: skip
    return out


def test_one_share_of_time_everywhere_on_the_page(version_report: tuple[str, str]) -> None:
    """The page names its one definition of "% of time" and every state's share reads the
    same wherever it appears: the verdict's words, both groups' diagrams, the time-in-state
    chart's value labels."""
    from quicsm.render.escape import esc
    from quicsm.report.sections import SHARE_OF_TIME

    _, html = version_report
    assert esc(SHARE_OF_TIME) in html
    assert "pooled over the group" not in html  # the diagrams no longer pool
    a, b = _diagram_shares(html)
    assert len(a) >= 5 and len(b) >= 5, (a, b)
    # a state's share (not, say, the time application-limited: the account's own measure)
    said = re.findall(r"\b([A-Z][A-Za-z]+): ([\d.]+%) → ([\d.]+%) of time \(", html)
    assert said, "the verdict states no share of time"
    chart = html[html.index("Time in state and dwell times</h3>") :]
    chart = chart[: chart.index("</svg>")]  # the time-in-state chart
    assert "% of time: mean of per-trace shares (95% CI)" in chart
    labels = re.findall(r'<text class="value"[^>]*>([\d.]+%)</text>', chart)
    for state, in_a, in_b in said:
        assert a[state] == in_a and b[state] == in_b, (state, in_a, in_b, a, b)
        assert in_a in labels and in_b in labels, (state, in_a, in_b, labels)


def test_each_strata_evidence_is_shown_once(version_report: tuple[str, str]) -> None:
    """Changes explained by the same traces and indicators refer to the first one rather than
    repeating its evidence: no evidence line appears twice in the Why section."""
    md, _ = version_report
    why = _section(md, "Why")
    items = [line for line in why.splitlines() if line.startswith("  - ")]
    repeated = [line for line in items if items.count(line) > 1 and "the same traces" not in line]
    assert not repeated, repeated
    assert "the same traces and indicators as for “completion time in jitter" in why


def test_loss_detection_is_broken_down_where_logged(version_report: tuple[str, str]) -> None:
    """Losses by packet threshold, by time threshold, spurious ones and probe timeouts, per
    group over every sender trace and in the representative traces' stratum, from the
    connection account: a count from packets says so."""
    md, html = version_report
    section = _section(md, "Loss detection")
    header = next(line for line in section.splitlines() if line.startswith("| per trace"))
    assert "version=v0.48.2 in jitter (10)" in header and "version=v0.65.0 (40)" in header
    rows = {
        line.split(" | ")[0].lstrip("| "): line.strip("| ").split(" | ")[1:]
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| per trace")
    }
    assert set(rows) == {
        "packets declared lost",
        "losses by packet threshold",
        "losses by time threshold",
        "spurious losses (declared lost, later acknowledged)",
        "probe timeouts",
    }
    # v0.48.2 logs no spurious_loss event: its packets count them (declared lost, then
    # acknowledged), and the cell says so; in jitter, far more than v0.65.0's
    spurious = rows["spurious losses (declared lost, later acknowledged)"]
    assert all(cell.endswith(" (from packets)") for cell in spurious), spurious
    counts = [float(cell.split(" ")[0]) for cell in spurious]
    assert counts[2] > counts[3] > 0
    by_packet = [float(x) for x in rows["losses by packet threshold"]]
    assert by_packet[2] > by_packet[3]  # in jitter, v0.48.2's reordering threshold fires more
    assert "<h4>Loss detection</h4>" in html and "(from packets)" in html


def test_titles_name_the_groups_by_value() -> None:
    from quicsm.report.sections import title_by_value

    assert title_by_value("version=v0.65.0", "version=v0.48.2") == "v0.65.0 vs v0.48.2 (version)"
    assert (
        title_by_value("version=b, scenario=loss1", "version=a, scenario=loss1")
        == "b vs a (version; scenario=loss1)"
    )
    assert title_by_value("new", "old") == "new vs old"  # not key=value: as named
    assert title_by_value("version=b", "stack=a") == "version=b vs stack=a"  # different keys


@given(
    st.dictionaries(st.sampled_from(["version", "stack", "scenario"]),
                    st.text("abc.019", min_size=1, max_size=5), min_size=1),
    st.dictionaries(st.sampled_from(["version", "stack", "scenario"]),
                    st.text("abc.019", min_size=1, max_size=5), min_size=1),
)  # fmt: skip
def test_title_by_value_keeps_every_differing_value(b: dict[str, str], a: dict[str, str]) -> None:
    from quicsm.report.sections import title_by_value

    if a.keys() != b.keys():
        a = {k: a.get(k, "x") for k in b}
    name = lambda d: ", ".join(f"{k}={v}" for k, v in d.items())  # noqa: E731
    title = title_by_value(name(b), name(a))
    left, _, right = title.partition(" vs ")
    for k in b:
        if a[k] != b[k]:
            assert b[k] in left and a[k] in right and k in title
    assert title.count(" vs ") >= 1
