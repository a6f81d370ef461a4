"""The eight states' colours stay apart for people with colour-vision deficiencies: every two of
them, as drawn (tinted on white), differ by a CIEDE2000 of at least MIN_DELTA_E in normal vision
and under simulated protanopia, deuteranopia and tritanopia (Machado et al. 2009), the full
colours in greyscale too; the colour-difference formula reproduces the published test data."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quicsm.core.states import PAPER_STATES as STATES
from quicsm.render.colour_vision import MACHADO, ciede2000, delta_e, simulate
from quicsm.render.colours import (
    MIN_DELTA_E,
    MIN_GREY_DELTA_E,
    STATE_TINT,
    state_colour,
    tint,
)

#: Sharma, Wu and Dalal (2005), Table 1: pairs of CIELAB colours and their CIEDE2000
SHARMA = [
    ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
    ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),
    ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
    ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ((22.7233, 20.0904, -46.6940), (23.0331, 14.9730, -42.5619), 2.0373),
    ((2.0776, 0.0795, -1.1350), (0.9033, -0.0636, -0.5514), 0.9082),
]


@pytest.mark.parametrize(("one", "two", "expected"), SHARMA)
def test_ciede2000_matches_the_published_test_data(one, two, expected) -> None:  # type: ignore[no-untyped-def]
    assert ciede2000(one, two) == pytest.approx(expected, abs=1e-4)
    assert ciede2000(two, one) == pytest.approx(expected, abs=1e-4)


def _pairs(colours: dict[str, str], vision: str) -> list[tuple[float, str, str]]:
    return sorted(
        (delta_e(colours[a], colours[b], vision), a, b)
        for a, b in itertools.combinations(colours, 2)
    )


@pytest.mark.parametrize("vision", ["normal", "protanopia", "deuteranopia", "tritanopia"])
def test_state_bands_stay_apart_under_colour_blindness(vision: str) -> None:
    bands = {s: tint(state_colour(s), STATE_TINT) for s in STATES}
    assert len(bands) == 8
    closest = _pairs(bands, vision)[0]
    assert closest[0] >= MIN_DELTA_E, closest


@pytest.mark.parametrize(
    "vision", ["normal", "protanopia", "deuteranopia", "tritanopia", "greyscale"]
)
def test_full_state_colours_stay_apart_in_every_vision(vision: str) -> None:
    full = {s: state_colour(s) for s in STATES}
    closest = _pairs(full, vision)[0]
    assert closest[0] >= MIN_GREY_DELTA_E, closest


def test_the_old_palette_fails_the_check() -> None:
    """The check can fail: the previous SlowStart and Recovery (ΔE 1.2 under deuteranopia as
    drawn) are refused."""
    old = {"SlowStart": "#4e79a7", "Recovery": "#7570b3"}
    bands = {s: tint(c, 0.32) for s, c in old.items()}
    assert _pairs(bands, "deuteranopia")[0][0] < 2


rgb = st.tuples(*(st.integers(0, 255),) * 3).map(lambda c: "#{:02x}{:02x}{:02x}".format(*c))


@given(rgb, rgb, st.sampled_from(["normal", *MACHADO, "greyscale"]))
def test_difference_is_a_symmetric_distance(a: str, b: str, vision: str) -> None:
    d = delta_e(a, b, vision)
    assert d >= 0 and d == pytest.approx(delta_e(b, a, vision), abs=1e-9)
    assert delta_e(a, a, vision) == 0


@given(rgb)
def test_greyscale_is_grey_and_simulations_stay_in_gamut(colour: str) -> None:
    r, g, b = simulate(colour, "greyscale")
    assert r == g == b
    for vision in MACHADO:
        assert all(0 <= c <= 1 for c in simulate(colour, vision))
    # white and black look the same to everyone (each matrix row sums to 1)
    for vision in MACHADO:
        assert simulate("#ffffff", vision) == pytest.approx((1, 1, 1), abs=1e-3)
