"""One colour per state, shared by every drawing (connection plots, report charts, diagrams).

The eight states of the model stay apart for people with colour-vision deficiencies: as drawn
(:data:`STATE_TINT` of the colour on white: plot bands, diagram nodes, table swatches) every two
of them differ by a CIEDE2000 of at least :data:`MIN_DELTA_E` in normal vision and under
simulated protanopia, deuteranopia and tritanopia, and the full colours (legends, node borders)
by at least :data:`MIN_GREY_DELTA_E` in greyscale too (:mod:`quicsm.render.colour_vision`;
tests/test_colours.py). The palette was found by a seeded search that maximises the smallest of
those differences while keeping every band light enough for dark lines (3:1 contrast).
Greyscale bands cannot hold eight light colours apart, so static plots label their bands with
the state's name as well.
"""

from __future__ import annotations

from typing import Final

#: fill colour of each state (bands, legends, diagram nodes); unknown names get grey
STATE_COLOURS: Final[dict[str, str]] = {
    "Init": "#f7fff7",
    "SlowStart": "#0c80cc",
    "CongestionAvoidance": "#237218",
    "CongestionAvoidanceMaxed": "#a0b953",
    "ApplicationLimited": "#03e9f9",
    "RetransmissionTimeout": "#223622",
    "Recovery": "#e8688b",
    "TailLossProbe": "#0930d7",
    "Startup": "#76b7b2",
    "Drain": "#edc948",
    "ProbeBW": "#9c755f",
    "ProbeRTT": "#bab0ac",
    "Unknown": "#d4d4d4",
    # ApplicationLimited split by cause (split_app_limited): the application keeps its colour
    "ApplicationLimited (application)": "#03e9f9",
    "ApplicationLimited (flow control)": "#9b59d0",
    "ApplicationLimited (pacing)": "#f0a202",
    "ApplicationLimited (unknown)": "#a9c9cc",
}
OTHER_STATE_COLOUR: Final[str] = "#cccccc"
#: line colour of each plotted metric: dark, none of them close to a state's hue at band tint
LINE_COLOURS: Final[dict[str, str]] = {
    "cwnd_bytes": "#a50f15",
    "bytes_in_flight": "#08519c",
    "ssthresh_bytes": "#252525",
    "smoothed_rtt_ms": "#54278f",
    "min_rtt_ms": "#00441b",
    "pacing_rate_bps": "#5a2a0a",
}
#: a packet declared lost, wherever it is marked
LOSS_COLOUR: Final[str] = "#a50f15"
#: colours of group A and group B in every chart (blue and red: apart in every dichromacy)
GROUP_COLOURS: Final[tuple[str, str]] = ("#4e79a7", "#e15759")
#: how strongly a state's colour fills a band or a node (0 = white, 1 = the colour)
STATE_TINT: Final[float] = 0.45
#: the smallest CIEDE2000 between two of the eight states at :data:`STATE_TINT`, in normal
#: vision and each simulated dichromacy (a difference of about 2 is just noticeable side by
#: side; bands are seen side by side, with a legend)
MIN_DELTA_E: Final[float] = 7.5
#: the smallest CIEDE2000 between two of the eight full colours in greyscale
MIN_GREY_DELTA_E: Final[float] = 7.5


def state_colour(state: str) -> str:
    return STATE_COLOURS.get(state, OTHER_STATE_COLOUR)


def tint(colour: str, amount: float) -> str:
    """``colour`` (``#rrggbb``) mixed with white: 0 = white, 1 = the colour itself."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    mixed = (round(255 + (c - 255) * amount) for c in (r, g, b))
    return "#" + "".join(f"{c:02x}" for c in mixed)
