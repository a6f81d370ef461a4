"""Rich HTML for Jupyter: models and diffs display as HTML through IPython's formatter, SVGs
scale to their cell, significant rows are highlighted, and side-by-side models share a layout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from test_model import fig13_transitions

import quicsm
from quicsm.compare.diff import diff
from quicsm.model.inference import infer
from quicsm.render.notebook import diff_html, model_html, side_by_side

XSS = "<script>alert(1)</script>"


@pytest.fixture
def shell():  # type: ignore[no-untyped-def]
    sh = InteractiveShell.instance()
    quicsm.register_jupyter(sh)
    yield sh
    InteractiveShell.clear_instance()


def _halves():  # type: ignore[no-untyped-def]
    t = fig13_transitions()
    traces = sorted(t["trace"].unique().to_list())
    a = t.filter(t["trace"].is_in(traces[: len(traces) // 2]))
    b = t.filter(t["trace"].is_in(traces[len(traces) // 2 :]))
    return a, b


def test_model_displays_as_html(shell) -> None:  # type: ignore[no-untyped-def]
    model = infer(fig13_transitions(), algorithm="observed")
    data, _ = shell.display_formatter.format(model)
    page = data["text/html"]
    assert page == model_html(model)
    svg = re.search(r"<svg\b[^>]*>", page)
    assert svg is not None and 'width="100%"' in svg.group() and 'pt"' not in svg.group()
    assert "<?xml" not in page
    rows = re.findall(r"<tr><td>", page)
    assert len(rows) == model.stats.time_in_state.height
    assert "image/svg+xml" in data  # the plain diagram is still offered


def test_diff_displays_as_html_with_significant_rows_marked(shell) -> None:  # type: ignore[no-untyped-def]
    a, b = _halves()
    result = diff(a, b, names=("first half", XSS))
    data, _ = shell.display_formatter.format(result)
    page = data["text/html"]
    assert page == diff_html(result)
    assert XSS not in page and "&lt;script&gt;" in page
    n_sig = sum(
        getattr(result, t).filter(getattr(result, t)["significant"]).height
        for t in ("states", "sources", "edges", "dwell")
    )
    assert page.count("<tr class=sig>") == n_sig
    # the header is one line of text and each prose section a list of its sentences
    assert "<p>A = first half" in page and "<h4>What changed</h4><ul><li><b>" in page
    assert "('What changed'" not in page and "<br>" not in page


def test_side_by_side_shares_one_layout() -> None:
    a, b = _halves()
    page = side_by_side({"A": infer(a, algorithm="observed"), "B": infer(b, algorithm="observed")})
    svgs = re.findall(r"<svg\b.*?</svg>", page, re.S)
    assert len(svgs) == 2

    def places(svg: str) -> dict[str, tuple[str, str]]:
        return dict(
            (m.group(1), (m.group(2), m.group(3)))
            for m in re.finditer(
                r"<title>([^<]+)</title>\s*<ellipse[^>]*?cx=\"([\d.-]+)\" cy=\"([\d.-]+)\"", svg
            )
        )

    pa, pb = places(svgs[0]), places(svgs[1])
    assert len(pa) >= 5 and pa == pb
    assert all('width="100%"' in re.search(r"<svg\b[^>]*>", s).group() for s in svgs)  # type: ignore[union-attr]


def test_inline_svg_drops_the_fixed_size() -> None:
    from quicsm.render.dot import inline_svg

    svg = inline_svg("digraph { a -> b }")
    head = re.search(r"<svg\b[^>]*>", svg).group()  # type: ignore[union-attr]
    assert svg.startswith('<svg class="fsm"') and "<?xml" not in svg
    assert 'width="100%"' in head and 'pt"' not in head and "viewBox" in head


def test_plot_in_a_notebook_is_the_chart_of_quicsm_plot() -> None:
    """quicsm.plot draws the notebooks' connections with the chart module `quicsm plot` uses,
    and displays as PNG."""
    import quicsm
    from quicsm.core.errors import InputError

    server = Path(__file__).parent / "fixtures" / "real" / "quic-go-v0.65.0" / "server.sqlog.zst"
    transitions = quicsm.read_transitions([server])
    metrics = quicsm.read_metrics([server])
    trace = str(transitions["trace"][0])
    chart = quicsm.plot(transitions, metrics, [trace], titles=["a <b>title</b>"])
    png = chart._repr_mimebundle_()["image/png"]
    assert isinstance(png, str) and png.startswith("iVBORw0KGgo")  # base64 of a PNG
    svg = chart.svg()
    assert svg.startswith("<svg") and "a &lt;b&gt;title&lt;/b&gt;" in svg
    assert (
        ">RetransmissionTimeout</text>" in svg and ">packet lost, time threshold (39)</text>" in svg
    )
    assert ">packets by 1-RTT" not in svg  # no packets given
    packets = quicsm.read_packet_timelines([server], [trace])
    svg = quicsm.plot(transitions, metrics, [trace], packets=packets).svg()
    assert ">packets by 1-RTT packet number (line: largest acknowledged): 290 sent" in svg
    with pytest.raises(InputError, match="1 traces but 2 titles"):
        quicsm.plot(transitions, metrics, [trace], titles=["a", "b"])
