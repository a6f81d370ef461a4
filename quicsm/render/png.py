"""SVG to PNG with a headless Chromium (Debian package ``chromium``, which ``scripts/setup``
installs): the browser draws the SVG exactly as the HTML output shows it."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Final

from quicsm.core.errors import QuicsmError

#: browsers tried, in order
BROWSERS: Final[tuple[str, ...]] = ("chromium", "chromium-browser", "google-chrome")
#: longest a screenshot may take, in seconds
TIMEOUT_S: Final[float] = 120.0
#: pixels per SVG unit
SCALE: Final[int] = 2

_SIZE = re.compile(r'<svg[^>]*?\swidth="([\d.]+)"[^>]*?\sheight="([\d.]+)"')


def browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def svg_to_png(svg: str) -> bytes:
    """The PNG of an SVG document whose root has ``width`` and ``height`` attributes."""
    size = _SIZE.search(svg)
    if size is None:
        raise QuicsmError("cannot make a PNG: the SVG has no width and height")
    width, height = (round(float(v)) for v in size.groups())
    exe = browser()
    if exe is None:
        raise QuicsmError(
            "PNG output needs a headless Chromium (Debian package chromium, which scripts/setup "
            "installs), which is not on PATH; write SVG or HTML instead (--format svg or html)"
        )
    with tempfile.TemporaryDirectory(prefix="quicsm-png-") as tmp:
        page = Path(tmp) / "plot.svg"
        shot = Path(tmp) / "plot.png"
        page.write_text(svg, encoding="utf-8")
        argv = [
            exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", "--disable-extensions", "--disable-background-networking",
            f"--user-data-dir={Path(tmp) / 'profile'}", f"--force-device-scale-factor={SCALE}",
            f"--window-size={width},{height}", "--default-background-color=ffffffff",
            f"--screenshot={shot}", page.as_uri(),
        ]  # fmt: skip
        try:
            done = subprocess.run(argv, capture_output=True, timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise QuicsmError(f"Chromium did not draw the PNG within {TIMEOUT_S:.0f} s") from None
        if done.returncode != 0 or not shot.is_file():
            err = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
            raise QuicsmError(
                f"Chromium could not draw the PNG (exit {done.returncode}): {' '.join(err)}"
            )
        return shot.read_bytes()
