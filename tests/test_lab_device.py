"""Device profiles: a CPU-starved child really gets about its share of one core."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


def test_motog_profile_is_the_papers_phone() -> None:
    """36% of one core (1.2 GHz against the desktop's 3.3 GHz) and an application reading at
    (1 - 0.58) * 50 Mbit/s = 21 Mbit/s (docs/lab.md, "Device profiles")."""
    motog = device_profile("motog")
    assert motog.cpu_percent == 36.0 == round(1.2 / 3.3 * 100)
    assert motog.read_mbit == 21.0 == round((1 - 0.58) * 50, 1)
    assert motog.client_args() == ["--read-mbit", "21.0", "--read-interval-ms", "20.0"]
    assert motog.labels()["device.read_mbit"] == 21.0
    desktop = device_profile("desktop")
    assert desktop.client_args() == [] and "device.read_mbit" not in desktop.labels()


@given(
    st.floats(min_value=1e-3, max_value=1e4, allow_nan=False),
    st.floats(min_value=1e-3, max_value=1000, allow_nan=False),
)
def test_client_args_carry_the_read_rate_exactly(mbit: float, every: float) -> None:
    profile = device_profile("custom", read_mbit=mbit, read_interval_ms=every)
    flag, rate, flag2, interval = profile.client_args()
    assert (flag, flag2) == ("--read-mbit", "--read-interval-ms")
    assert (float(rate), float(interval)) == (mbit, every)
    assert profile.cpu_percent is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"read_mbit": 0}, "read_mbit must be a number > 0, got 0"),
        ({"read_mbit": "fast"}, "read_mbit must be a number > 0, got 'fast'"),
        ({"read_mbit": 5, "read_interval_ms": 0}, "read_interval_ms must be a number in (0, 1000]"),
        ({"read_mbit": True}, "read_mbit must be a number > 0, got True"),
    ],
)
def test_read_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(LabError) as info:
        device_profile("custom", **kwargs)  # type: ignore[arg-type]
    assert message in str(info.value)
