"""One colour per state, shared by every drawing (connection plots, report charts, diagrams).

The three loss states are far apart in hue and lightness — Recovery slate purple, TailLossProbe
magenta, RetransmissionTimeout dark red — so they stay distinguishable next to each other and in
a state band; the rest follow the Tableau 10 palette.
"""

from __future__ import annotations

from typing import Final

#: fill colour of each state (bands, legends, diagram nodes); unknown names get grey
STATE_COLOURS: Final[dict[str, str]] = {
    "Init": "#9e9e9e",
    "SlowStart": "#4e79a7",
    "CongestionAvoidance": "#59a14f",
    "CongestionAvoidanceMaxed": "#a0cbe8",
    "ApplicationLimited": "#f28e2b",
    "RetransmissionTimeout": "#b2182b",
    "Recovery": "#7570b3",
    "TailLossProbe": "#e7298a",
    "Startup": "#76b7b2",
    "Drain": "#edc948",
    "ProbeBW": "#9c755f",
    "ProbeRTT": "#bab0ac",
    "Unknown": "#d4d4d4",
}
OTHER_STATE_COLOUR: Final[str] = "#cccccc"


def state_colour(state: str) -> str:
    return STATE_COLOURS.get(state, OTHER_STATE_COLOUR)


def tint(colour: str, amount: float) -> str:
    """``colour`` (``#rrggbb``) mixed with white: 0 = white, 1 = the colour itself."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    mixed = (round(255 + (c - 255) * amount) for c in (r, g, b))
    return "#" + "".join(f"{c:02x}" for c in mixed)
