"""The report's static charts (:mod:`quicsm.render.svg_charts`): any valid data gives well-formed
SVG with finite coordinates, every bar, box, band, line and cell inside its plot, no two texts
overlapping and every text inside the drawing, the same bytes for the same data; examples of
what each chart says; and ``quicsm report`` starts no JavaScript engine."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

from diff_helpers import patterned_traces, write_group
from hypothesis import example, given
from hypothesis import strategies as st
from svg_layout import (
    NS,
    canvas,
    classes,
    finite,
    line_box,
    numbers,
    overlapping,
    parse,
    path_box,
    rect_box,
    text_boxes,
)

from quicsm.core.states import CANONICAL_STATES
from quicsm.render import svg_charts
from quicsm.render.colour_vision import VISIONS, delta_e
from quicsm.render.colours import GROUP_COLOURS
from quicsm.render.svg_charts import heatmap, scales
from quicsm.render.svg_charts.text import text_width

# -- strategies -------------------------------------------------------------------------------

#: names as traces and labels give them: letters, digits, punctuation, some non-ASCII
names = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1,
    max_size=60,
)  # fmt: skip
plain_names = st.text(alphabet=st.sampled_from("abcXYZ019_-=./ :#"), min_size=1, max_size=80)
fractions = st.floats(min_value=-0.5, max_value=1.5) | st.just(math.nan)
group_names = st.tuples(plain_names, plain_names)


@st.composite
def bars(draw: st.DrawFn) -> list[svg_charts.Bar]:
    labels = draw(st.lists(names | st.sampled_from(CANONICAL_STATES), min_size=1, max_size=10,
                           unique=True))  # fmt: skip
    return [
        svg_charts.Bar(
            label,
            (draw(fractions), draw(fractions)),
            (draw(fractions), draw(fractions)),
            (draw(fractions), draw(fractions)),
            draw(names),
            draw(st.booleans()),
        )  # fmt: skip
        for label in labels
    ]


quantiles = st.lists(st.floats(min_value=0.0, max_value=1e7), min_size=5, max_size=5).map(sorted)


@st.composite
def boxes(draw: st.DrawFn) -> list[svg_charts.Box]:
    labels = draw(st.lists(names, min_size=1, max_size=10, unique=True))
    return [
        svg_charts.Box(
            label,
            (draw(st.none() | quantiles), draw(st.none() | quantiles)),
            (draw(st.integers(0, 10**6)), draw(st.integers(0, 10**6))),
            draw(names),
            draw(st.booleans()),
        )  # fmt: skip
        for label in labels
    ]


@st.composite
def series(draw: st.DrawFn) -> svg_charts.Series:
    times = sorted(draw(st.lists(st.floats(min_value=0, max_value=1e7), max_size=300)))
    values = st.none() | st.floats(min_value=0, max_value=1e12)
    cwnd = [draw(values) for _ in times]
    flight = [draw(values) for _ in times]
    cuts = sorted(draw(st.lists(st.floats(min_value=0, max_value=1e7), min_size=1, max_size=60)))
    states = st.sampled_from([*CANONICAL_STATES, "Unknown"]) | names
    bands = [(a, b, draw(states)) for a, b in zip(cuts, cuts[1:], strict=False)]
    losses = draw(st.lists(st.floats(min_value=0, max_value=1e7), max_size=50))
    return svg_charts.Series(times, cwnd, flight, losses, [], bands)


@st.composite
def matrices(
    draw: st.DrawFn,
) -> tuple[list[str], list[str], dict[tuple[str, str], svg_charts.Cell]]:
    rows = draw(st.lists(names, min_size=1, max_size=8, unique=True))
    cols = draw(st.lists(names, min_size=1, max_size=5, unique=True))
    percent = st.none() | st.floats(min_value=-1e4, max_value=1e4)
    cells = {
        (r, c): svg_charts.Cell(draw(percent), draw(st.booleans()), draw(names), (1, 1))
        for r in rows
        for c in cols
        if draw(st.booleans())
    }
    return rows, cols, cells


# -- properties -------------------------------------------------------------------------------


def _sound(svg: str) -> tuple[object, list[str]]:
    """Parse ``svg`` and check what every chart owes: an accessible name and description,
    finite coordinates, every text inside the drawing and no two overlapping. Returns the
    root and its classes."""
    root = parse(svg)
    assert root.get("role") == "img"
    title, desc = root.find(f"{NS}title"), root.find(f"{NS}desc")
    assert title is not None and title.text and desc is not None and desc.text
    assert finite(numbers(root))
    boxes = text_boxes(root)
    ticks = sorted(
        (b for b, el in zip(boxes, _texts(root), strict=True)
         if "tick" in classes(el) and el.get("text-anchor") == "middle"),
        key=lambda b: (b.top, b.left),
    )  # fmt: skip
    for a, b in zip(ticks, ticks[1:], strict=False):  # an x axis' labels read apart
        assert a.top != b.top or b.left - a.right >= 4, (a, b)
    page = canvas(root)
    outside = [b.text for b in boxes if not b.within(page)]
    assert not outside, (outside, page)
    assert not overlapping(boxes), overlapping(boxes)
    return root, sorted(classes(root))


def _texts(root: object) -> list[object]:
    """The non-empty text elements, in the order of :func:`svg_layout.text_boxes`."""
    assert hasattr(root, "iter")
    return [t for t in root.iter(f"{NS}text") if (t.text or "").strip()]


def _inside_frames(root: object, marks: tuple[str, ...]) -> int:
    """Every mark of a class in ``marks`` inside the frame of its plot (each panel's own);
    returns how many there were."""
    n = 0
    assert hasattr(root, "iter")
    groups = [g for g in root.iter(f"{NS}g") if "panel" in classes(g)] or [root]
    for group in groups:
        frame = next(r for r in group.iter(f"{NS}rect") if "frame" in classes(r))
        plot = rect_box(frame)
        for el in group.iter():
            if not classes(el) & set(marks):
                continue
            tag = el.tag.removeprefix(NS)
            box = {"rect": rect_box, "line": line_box, "path": path_box}[tag](el)
            assert box.within(plot, slack=0.01), (el.attrib, plot)
            n += 1
    return n


@given(bars(), group_names)
def test_time_in_state_is_sound_for_any_data(
    data: list[svg_charts.Bar], groups: tuple[str, str]
) -> None:
    svg = svg_charts.time_in_state_svg(data, names=groups)
    root, cls = _sound(svg)
    assert cls == ["chart", "time-in-state"]
    drawn = sum(1 for b in data for v in b.values if math.isfinite(v))
    assert _inside_frames(root, ("bar",)) == drawn
    _inside_frames(root, ("whisker",))
    assert svg == svg_charts.time_in_state_svg(data, names=groups)


@given(boxes(), group_names)
def test_dwell_is_sound_for_any_data(data: list[svg_charts.Box], groups: tuple[str, str]) -> None:
    svg = svg_charts.dwell_svg(data, names=groups)
    if svg is None:  # no positive dwell time
        assert all(q <= 0 for b in data for qs in b.quantiles if qs for q in qs)
        return
    root, cls = _sound(svg)
    assert cls == ["chart", "dwell"]
    drawn = sum(1 for b in data for qs in b.quantiles if qs)
    assert _inside_frames(root, ("box",)) == drawn
    _inside_frames(root, ("whisker", "median"))
    assert svg == svg_charts.dwell_svg(data, names=groups)


@given(st.lists(st.tuples(names, names, series()), min_size=1, max_size=3))
@example([("0", "0", svg_charts.Series([], [], [], [0.0], [], []))])  # a loss on the left edge
@example([("0", "0", svg_charts.Series([0.0], [None], [5e-324], [], [], []))])  # a subnormal top
def test_traces_are_sound_for_any_data(data: list[tuple[str, str, svg_charts.Series]]) -> None:
    svg = svg_charts.traces_svg(data)
    root, cls = _sound(svg)
    assert cls == ["chart", "traces"]
    _inside_frames(root, ("band", "line"))
    panels = [g for g in root.iter(f"{NS}g") if "panel" in classes(g)]
    assert len(panels) == len(data)
    for g, (_, _, s) in zip(panels, data, strict=True):
        lines = [p for p in g.iter(f"{NS}path") if "line" in classes(p)]
        logged = [any(v is not None for v in vs) for vs in (s.in_flight_bytes, s.cwnd_bytes)]
        assert len(lines) == sum(logged)
        losses = next(x for x in g.iter(f"{NS}g") if "losses" in classes(x))
        frame = rect_box(next(r for r in g.iter(f"{NS}rect") if "frame" in classes(r)))
        ticks = [line_box(t) for t in losses.iter(f"{NS}line")]
        assert all(t.within(frame, slack=0.01) for t in ticks)
        assert len(ticks) <= len(s.losses_ms) and bool(ticks) == bool(s.losses_ms)
    assert svg == svg_charts.traces_svg(data)


@given(matrices(), names, names, names)
def test_heatmap_is_sound_for_any_data(
    m: tuple[list[str], list[str], dict[tuple[str, str], svg_charts.Cell]],
    row_label: str, col_label: str, title: str,
) -> None:  # fmt: skip
    rows, cols, cells = m
    svg = svg_charts.heatmap_svg(rows, cols, cells, row_label=row_label, col_label=col_label,
                                 title=title)  # fmt: skip
    root, cls = _sound(svg)
    assert cls == ["chart", "heatmap"]
    drawn = [g for g in root.iter(f"{NS}g") if "cell" in classes(g)]
    assert len(drawn) == len(cells)
    rects = [rect_box(next(g.iter(f"{NS}rect"))) for g in drawn]
    assert all(r.within(canvas(root)) for r in rects)
    assert not any(a.overlaps(b) for i, a in enumerate(rects) for b in rects[i + 1 :])
    # every cell's text stands out from its fill: WCAG 4.5:1 (normal text)
    for g in drawn:
        fill = next(g.iter(f"{NS}rect")).get("fill", "")
        for t in g.iter(f"{NS}text"):
            assert heatmap.contrast(t.get("fill", "#222222"), fill) >= 4.5, (fill, t.attrib)
    assert svg == svg_charts.heatmap_svg(rows, cols, cells, row_label=row_label,
                                         col_label=col_label, title=title)  # fmt: skip


@given(st.floats(min_value=0, max_value=1e15), st.floats(min_value=1, max_value=1e15),
       st.integers(2, 12))  # fmt: skip
def test_ticks_lie_in_their_span_and_each_reads_apart(lo: float, span: float, count: int) -> None:
    """Ticks are multiples of one step within the span; written as the axes write them, no
    two read the same (a label never repeats)."""
    hi = lo + span
    values = scales.ticks(lo, hi, count)
    assert values and all(lo - 1e-9 * hi <= v <= hi * (1 + 1e-9) for v in values)
    if hi / span < 1e6:  # the span is not lost in the rounding of lo
        for fmt in (scales.grouped, scales.si):
            written = [fmt(v) for v in values]
            assert len(set(written)) == len(written), written


# -- examples ---------------------------------------------------------------------------------


def test_the_charts_say_what_they_show() -> None:
    """The time-in-state chart: its value labels right of the whiskers, the significant test
    bold and red, the groups' colours and names in the legend, every bar named in its hover
    text and the whole in words; the dwell chart's log axis in decades."""
    bar = svg_charts.Bar("SlowStart", (0.059, 0.148), (0.02, 0.1), (0.09, 0.2), "p = 0.038", True)
    svg = svg_charts.time_in_state_svg([bar], names=("v1", "v2"))
    assert re.findall(r'<text class="value"[^>]*>([^<]+)</text>', svg) == ["5.9%", "14.8%"]
    assert re.search(r'<text class="note significant"[^>]*font-weight="bold" fill="#b00020"'
                     r'>p = 0.038</text>', svg)  # fmt: skip
    assert [f'fill="{c}"' in svg for c in GROUP_COLOURS] == [True, True]
    assert "<title>SlowStart, v1: 5.9% (95% CI 2.0%–9.0%)</title>" in svg
    assert "SlowStart: v1 5.9%, v2 14.8% (p = 0.038)" in svg
    labels = re.findall(r'<text class="tick"[^>]*>([^<]+)</text>', svg)
    assert labels == [f"{10 * i}%" for i in range(11)]
    box = svg_charts.Box("Recovery", ([0.5, 2, 10, 40, 300], None), (12, 0), "n.s.", False)
    dwell = svg_charts.dwell_svg([box], names=("v1", "v2"))
    assert dwell is not None
    assert re.findall(r'<text class="tick"[^>]*>([^<]+)</text>', dwell) == [
        "0.1", "1", "10", "100", "1k"]  # fmt: skip
    assert "median 10 ms" in dwell and "12 visits" in dwell


def test_a_trace_names_its_wide_bands_and_its_axes() -> None:
    s = svg_charts.Series([0, 100, 200, 300], [10_000, 20_000, 40_000, 30_000],
                          [5_000, 15_000, 30_000, None], [150.0], [],
                          [(0, 120, "SlowStart"), (120, 125, "Recovery"),
                           (125, 300, "CongestionAvoidance")])  # fmt: skip
    svg = svg_charts.traces_svg([("A", "trace 1 · 300 ms", s)])
    assert re.findall(r'<text class="band-label"[^>]*>([^<]+)</text>', svg) == [
        "SlowStart", "CongestionAvoidance"]  # fmt: skip
    assert 'aria-label="x axis: time (ms), from 0 to 300"' in svg
    assert 'aria-label="y axis: bytes, from 0 to 40k"' in svg
    assert re.findall(r'<text class="legend-label"[^>]*>([^<]+)</text>', svg) == [
        "SlowStart", "Recovery", "CongestionAvoidance", "cwnd", "bytes in flight",
        "packet declared lost"]  # fmt: skip
    assert "1 packets declared lost" in svg


def test_the_heatmap_scale_reads_in_every_vision() -> None:
    """The diverging scale's two ends stay apart for people with each colour-vision
    deficiency and in greyscale, and lightness carries the size of a difference: each end is
    darker than the middle, and a pale (not significant) cell lighter than a significant one."""
    ends = heatmap.diverging(-100, 100), heatmap.diverging(100, 100)
    middle = heatmap.diverging(0, 100)
    for vision in VISIONS:
        if vision != "greyscale":
            assert delta_e(*ends, vision) >= 20, vision
    for end in ends:
        assert heatmap.luminance(end) < 0.25 * heatmap.luminance(middle)
        assert heatmap.luminance(heatmap.pale(end)) > heatmap.luminance(end)
    shades = [heatmap.luminance(heatmap.diverging(v, 100)) for v in range(0, 101, 10)]
    assert shades == sorted(shades, reverse=True)  # darker as the difference grows
    shades = [heatmap.luminance(heatmap.diverging(-v, 100)) for v in range(0, 101, 10)]
    assert shades == sorted(shades, reverse=True)


def test_long_names_are_cut_and_text_widths_add_up() -> None:
    assert text_width("SlowStart", 12) == sum(text_width(c, 12) for c in "SlowStart")
    assert text_width("W", 12, bold=True) > text_width("W", 12) > text_width("i", 12)
    name = "traces/" + "x" * 300 + ".qlog"
    svg = svg_charts.time_in_state_svg(
        [svg_charts.Bar(name, (0.5, 0.5), (0.4, 0.4), (0.6, 0.6), "", False)], names=(name, name)
    )
    labels = re.findall(r"<text[^>]*>([^<]+)</text>", svg)
    assert any(t.startswith("traces/x") and t.endswith("x.qlog") and "…" in t for t in labels)


def test_the_report_starts_no_javascript_engine(tmp_path: Path) -> None:
    """``quicsm report`` writes its page, four charts included, with the chart renderer's
    JavaScript engine (vl_convert) unimportable."""
    for version, app_ms in (("1.0", 30), ("2.0", 300)):
        traces = patterned_traces(6, prefix=f"t{version}", app_ms=app_ms)
        labels = {"version": version, "completion_ms": 100 + app_ms}
        write_group(tmp_path / f"v{version}", traces, labels=labels)
    out = tmp_path / "report.html"
    blocked = (
        "import sys\n"
        "class NoEngine:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'vl_convert':\n"
        "            raise ImportError('vl_convert is blocked')\n"
        "sys.meta_path.insert(0, NoEngine())\n"
        "from quicsm.cli import main\n"
        "sys.exit(main())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", blocked, "report", str(tmp_path / "v1.0"), "--vs",
         str(tmp_path / "v2.0"), "--no-cache", "-o", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    page = out.read_text(encoding="utf-8")
    charts = re.findall(r'<svg [^>]*class="chart ([\w-]+)"', page)
    assert charts == ["time-in-state", "dwell", "traces", "heatmap"], charts
    # the block works: the renderer's own drawing fails the same way
    proc = subprocess.run(
        [sys.executable, "-c", blocked.replace("from quicsm.cli import main\nsys.exit(main())\n",
         "import vl_convert\n")], capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode != 0 and "vl_convert is blocked" in proc.stderr


def test_groups_and_band_names_read_in_every_vision() -> None:
    """The two groups' colours stay far apart in normal vision and each simulated dichromacy
    (in greyscale they are told apart by place: A's bar or box above B's in every row); a
    band's name is dark text on its band at WCAG's 4.5:1 on every state's tint."""
    from quicsm.render.colours import STATE_COLOURS, STATE_TINT, tint
    from quicsm.render.svg_charts.draw import INK

    for vision in VISIONS:
        if vision != "greyscale":
            assert delta_e(*GROUP_COLOURS, vision) >= 30, vision
    for state, colour in STATE_COLOURS.items():
        assert heatmap.contrast(INK, tint(colour, STATE_TINT)) >= 4.5, state
    bar = svg_charts.Bar("Init", (0.2, 0.3), (0.1, 0.2), (0.3, 0.4), "", False)
    root = parse(svg_charts.time_in_state_svg([bar], names=("A", "B")))
    a, b = (rect_box(r) for r in root.iter(f"{NS}rect") if "bar" in classes(r))
    assert a.bottom <= b.top
