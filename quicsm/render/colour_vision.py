"""How colours look to people with colour-vision deficiencies, and how far apart two colours are.

- :func:`simulate`: an sRGB colour as seen with protanopia, deuteranopia or tritanopia (the
  full-severity matrices of Machado, Oliveira and Fernandes, "A Physiologically-based Model for
  Simulation of Color Vision Deficiency", IEEE TVCG 15(6), 2009, Table 1, applied to linear
  RGB), or in greyscale (the CIE luminance Y as a grey);
- :func:`delta_e` : the CIEDE2000 colour difference (Sharma, Wu and Dalal, "The CIEDE2000
  Color-Difference Formula: Implementation Notes, Supplementary Test Data, and Mathematical
  Observations", Color Research and Application 30(1), 2005) between two sRGB colours in
  CIELAB under D65.

The state palette (:mod:`quicsm.render.colours`) is checked with these in tests/test_colours.py.
"""

from __future__ import annotations

import math
from typing import Final

RGB = tuple[float, float, float]

#: Machado et al. 2009, severity 1.0: linear RGB -> linear RGB as seen with each deficiency
MACHADO: Final[dict[str, tuple[RGB, RGB, RGB]]] = {
    "protanopia": (
        (0.152286, 1.052583, -0.204868),
        (0.114503, 0.786281, 0.099216),
        (-0.003882, -0.048116, 1.051998),
    ),
    "deuteranopia": (
        (0.367322, 0.860646, -0.227968),
        (0.280085, 0.672501, 0.047413),
        (-0.011820, 0.042940, 0.968881),
    ),
    "tritanopia": (
        (1.255528, -0.076749, -0.178779),
        (-0.078411, 0.930809, 0.147602),
        (0.004733, 0.691367, 0.303900),
    ),
}
#: the ways of seeing a test checks: normal vision, the three dichromacies, greyscale
VISIONS: Final[tuple[str, ...]] = ("normal", *MACHADO, "greyscale")


def _linear(c: float) -> float:
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _encoded(c: float) -> float:
    c = min(max(c, 0.0), 1.0)
    return 12.92 * c if c <= 0.0031308 else 1.055 * c ** (1 / 2.4) - 0.055


def parse(colour: str) -> RGB:
    """``#rrggbb`` -> sRGB components in [0, 1]."""
    if len(colour) != 7 or colour[0] != "#":
        raise ValueError(f"not a #rrggbb colour: {colour!r}")
    r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return r, g, b


def simulate(colour: str, vision: str) -> RGB:
    """sRGB components of ``colour`` as seen with ``vision`` (one of :data:`VISIONS`)."""
    rgb = parse(colour)
    if vision == "normal":
        return rgb
    lin = tuple(_linear(c) for c in rgb)
    if vision == "greyscale":
        y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
        g = _encoded(y)
        return g, g, g
    if vision not in MACHADO:
        raise ValueError(f"unknown vision {vision!r}; known: {', '.join(VISIONS)}")
    m = MACHADO[vision]
    out = (sum(m[i][j] * lin[j] for j in range(3)) for i in range(3))
    r, g, b = (_encoded(c) for c in out)
    return r, g, b


def lab(rgb: RGB) -> RGB:
    """sRGB components -> CIELAB (D65 white)."""
    r, g, b = (_linear(c) for c in rgb)
    x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    fx, fy, fz = f(x), f(y), f(z)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def ciede2000(lab1: RGB, lab2: RGB) -> float:
    """The CIEDE2000 difference of two CIELAB colours (kL = kC = kH = 1)."""
    l1, a1, b1 = lab1
    l2, a2, b2 = lab2
    c_bar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_bar**7 / (c_bar**7 + 25**7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360 if c1p else 0.0
    h2p = math.degrees(math.atan2(b2, a2p)) % 360 if c2p else 0.0
    dl = l2 - l1
    dc = c2p - c1p
    if c1p * c2p == 0:
        dh = 0.0
    elif abs(h2p - h1p) <= 180:
        dh = h2p - h1p
    elif h2p - h1p > 180:
        dh = h2p - h1p - 360
    else:
        dh = h2p - h1p + 360
    dhh = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dh / 2))
    l_bar = (l1 + l2) / 2
    cp_bar = (c1p + c2p) / 2
    if c1p * c2p == 0:
        h_bar = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        h_bar = (h1p + h2p) / 2
    elif h1p + h2p < 360:
        h_bar = (h1p + h2p + 360) / 2
    else:
        h_bar = (h1p + h2p - 360) / 2
    t = (
        1
        - 0.17 * math.cos(math.radians(h_bar - 30))
        + 0.24 * math.cos(math.radians(2 * h_bar))
        + 0.32 * math.cos(math.radians(3 * h_bar + 6))
        - 0.20 * math.cos(math.radians(4 * h_bar - 63))
    )
    d_theta = 30 * math.exp(-(((h_bar - 275) / 25) ** 2))
    rc = 2 * math.sqrt(cp_bar**7 / (cp_bar**7 + 25**7))
    sl = 1 + 0.015 * (l_bar - 50) ** 2 / math.sqrt(20 + (l_bar - 50) ** 2)
    sc = 1 + 0.045 * cp_bar
    sh = 1 + 0.015 * cp_bar * t
    rt = -math.sin(math.radians(2 * d_theta)) * rc
    return math.sqrt(
        (dl / sl) ** 2 + (dc / sc) ** 2 + (dhh / sh) ** 2 + rt * (dc / sc) * (dhh / sh)
    )


def delta_e(a: str, b: str, vision: str = "normal") -> float:
    """CIEDE2000 difference of ``#rrggbb`` colours ``a`` and ``b`` as seen with ``vision``."""
    return ciede2000(lab(simulate(a, vision)), lab(simulate(b, vision)))
