"""The comparison report's static charts, drawn as SVG here: no JavaScript engine, no cache,
the same data the same bytes.

- :func:`time_in_state_svg`: per state, each group's mean share of time with its 95% interval;
- :func:`dwell_svg`: per state, each group's dwell times per visit as a box on a log axis;
- :func:`traces_svg`: a representative trace per group as small multiples (states as bands,
  cwnd and bytes in flight, losses);
- :func:`heatmap_svg`: the scenario matrix on a diverging colour scale.

Every chart is one ``<svg role="img">`` with a ``<title>`` and a ``<desc>`` that says in words
what it shows, a ``<title>`` on each bar, box, band and cell (shown on hover), and stable
classes for what it draws (``chart time-in-state``, ``row``, ``bar``, ``whisker``, ``value``,
``note``, ``axis x``, ``legend``, ``panel``, ``band``, ``line cwnd``, ``cell``, ...). Text is
laid out with the widths of :mod:`quicsm.render.svg_charts.text`, so it has room in the fonts
a browser picks. The interactive plot, PNG export and notebooks draw with Vega-Lite
(:mod:`quicsm.render.charts`).
"""

from quicsm.render.svg_charts.data import Bar, Box, Cell, Series
from quicsm.render.svg_charts.heatmap import heatmap_svg
from quicsm.render.svg_charts.rows import dwell_svg, time_in_state_svg
from quicsm.render.svg_charts.traces import traces_svg

__all__ = [
    "Bar",
    "Box",
    "Cell",
    "Series",
    "dwell_svg",
    "heatmap_svg",
    "time_in_state_svg",
    "traces_svg",
]
