"""Device profiles: a CPU-starved child really gets about its share of one core."""

from __future__ import annotations

import subprocess
import sys

import pytest

from quicsm.core.errors import LabError
from quicsm.lab.device import MECHANISMS, CpuLimiter, device_profile

# burns CPU for a fixed wall time and prints the CPU share it got
BURNER = (
    "import time\n"
    "t, c = time.monotonic(), time.process_time()\n"
    "while time.monotonic() - t < 1.0: pass\n"
    "print((time.process_time() - c) / (time.monotonic() - t))\n"
)


def _available(mechanism: str) -> bool:
    try:
        with CpuLimiter(device_profile("slow"), name="probe", mechanism=mechanism):
            return True
    except LabError:
        return False


def _cpu_shares(limiter: CpuLimiter) -> tuple[float, float]:
    """The CPU shares a limited burner and an unlimited twin, started together, got over the
    same second (the twin says how much CPU this machine had free for one process)."""
    twin = subprocess.Popen([sys.executable, "-c", BURNER], stdout=subprocess.PIPE, text=True)
    proc = subprocess.Popen(
        limiter.wrap([sys.executable, "-c", BURNER]),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    limiter.attach(proc.pid)
    out, _ = proc.communicate(timeout=120)
    twin_out, _ = twin.communicate(timeout=120)
    return float(out), float(twin_out)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_limited_child_gets_about_its_cpu_share(mechanism: str) -> None:
    if not _available(mechanism):
        # not a skip: an unavailable mechanism must say so, and the default must fall back
        with pytest.raises(LabError, match=f"'{mechanism}' is not available on this machine"):
            CpuLimiter(device_profile("slow"), name="x", mechanism=mechanism)
        with CpuLimiter(device_profile("slow"), name="x") as fallback:
            assert fallback.mechanism != mechanism and _available(fallback.mechanism)
        return
    profile = device_profile("custom", cpu_percent=20)
    with CpuLimiter(profile, name="test", mechanism=mechanism) as limiter:
        assert limiter.mechanism == mechanism
        share, free = _cpu_shares(limiter)
    # at most 20% of one core (scheduling granularity and start-up make it approximate); at
    # least a fair part of it, or of what the machine gave the unlimited twin when that was
    # less (~1.0 on an idle machine, ~2/L at load average L on two cores): a starved machine
    # makes both smaller, never the limited one larger
    assert share < 0.35, (share, free)
    assert share > 0.2 * min(0.2, free), (share, free)


def test_desktop_profile_is_unlimited() -> None:
    with CpuLimiter(device_profile("desktop"), name="test") as limiter:
        assert limiter.mechanism == "none"
        assert limiter.wrap(["x", "y"]) == ["x", "y"]


def test_duty_cycle_is_always_available() -> None:
    assert _available("duty-cycle")


@pytest.mark.parametrize(
    ("name", "pct", "message"),
    [
        ("toaster", None, "unknown device profile 'toaster'"),
        ("custom", 0, "cpu_percent must be a number in (0, 100]"),
        ("custom", 150, "cpu_percent must be a number in (0, 100]"),
        ("slow", "x", "cpu_percent must be a number"),
    ],
)
def test_profile_errors(name: str, pct: object, message: str) -> None:
    with pytest.raises(LabError) as info:
        device_profile(name, cpu_percent=pct)
    assert message in str(info.value)


def test_unknown_mechanism_is_an_error() -> None:
    with pytest.raises(LabError, match="unknown device mechanism 'magic'"):
        CpuLimiter(device_profile("slow"), name="x", mechanism="magic")
