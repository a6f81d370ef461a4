"""Device profiles: starve the receiving client of CPU, as the paper's MotoG vs desktop.

A profile caps the client process tree at ``cpu_percent`` of one core. The mechanism is chosen
at run time, in this order, and recorded in run.json (``device.mechanism``):

1. ``cgroup-v2`` — a child cgroup with ``cpu.max = "<quota> <period>"`` on a cgroup2 mount
   whose ``cgroup.controllers`` offers ``cpu``;
2. ``cgroup-v1`` — a child cgroup of the v1 ``cpu`` controller with ``cpu.cfs_quota_us`` /
   ``cpu.cfs_period_us``;
3. ``duty-cycle`` (fallback, no privileges needed) — the runner sends ``SIGCONT`` / ``SIGSTOP``
   to the client's process group so it runs ``cpu_percent`` % of every 50 ms period (what
   ``cpulimit`` does). Unlike a cgroup quota this also stops the client while it is idle,
   so its timers fire late too; results are comparable between runs of the same mechanism.

Both cgroup variants need write access to the cgroup file system (root, or a delegated
subtree). ``QUICSM_DEVICE_MECHANISM=cgroup-v2|cgroup-v1|duty-cycle`` forces one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from quicsm.core.errors import LabError

#: named profiles -> share of one core the client may use (None: unlimited)
PROFILES: dict[str, float | None] = {
    "desktop": None,
    "slow": 5.0,
}

MECHANISMS = ("cgroup-v2", "cgroup-v1", "duty-cycle")

#: cgroup CPU bandwidth period and the duty-cycle period, microseconds
PERIOD_US = 50_000


@dataclass(frozen=True, kw_only=True)
class DeviceProfile:
    """A named device: ``cpu_percent`` of one core for the client (None = unlimited)."""

    name: str
    cpu_percent: float | None


def device_profile(name: object, *, cpu_percent: object = None) -> DeviceProfile:
    """Look up a named profile; ``cpu_percent`` overrides its CPU share."""
    if not isinstance(name, str) or (name not in PROFILES and cpu_percent is None):
        raise LabError(
            f"unknown device profile {name!r} (known: {', '.join(sorted(PROFILES))}; "
            "or give cpu_percent for a custom one)"
        )
    pct = PROFILES.get(name) if cpu_percent is None else cpu_percent
    if pct is not None and (
        isinstance(pct, bool) or not isinstance(pct, int | float) or not 0 < pct <= 100
    ):
        raise LabError(f"cpu_percent must be a number in (0, 100], got {pct!r}")
    return DeviceProfile(name=name, cpu_percent=None if pct is None else float(pct))


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fstype, super options) of the cgroup mounts of this process."""
    out: list[tuple[str, str, set[str]]] = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) > 4 and len(rfields) >= 3 and rfields[0] in ("cgroup", "cgroup2"):
            out.append((fields[4], rfields[0], set(rfields[2].split(","))))
    return out


def _try_cgroup_v2(name: str) -> Path | None:
    for mount, fstype, _ in _mounts():
        if fstype != "cgroup2":
            continue
        root = Path(mount)
        try:
            if "cpu" not in (root / "cgroup.controllers").read_text().split():
                continue
            if "cpu" not in (root / "cgroup.subtree_control").read_text().split():
                (root / "cgroup.subtree_control").write_text("+cpu")
            parent = root / "quicsm"
            parent.mkdir(exist_ok=True)
            if "cpu" not in (parent / "cgroup.subtree_control").read_text().split():
                (parent / "cgroup.subtree_control").write_text("+cpu")
            group = parent / name
            group.mkdir(exist_ok=True)
            if (group / "cpu.max").exists():
                return group
        except OSError:
            continue
    return None


def _try_cgroup_v1(name: str) -> Path | None:
    for mount, fstype, opts in _mounts():
        if fstype != "cgroup" or "cpu" not in opts:
            continue
        group = Path(mount) / f"quicsm-{name}"
        try:
            group.mkdir(exist_ok=True)
            if (group / "cpu.cfs_quota_us").exists():
                return group
        except OSError:
            continue
    return None


class CpuLimiter:
    """Limits one client process tree; use as a context manager around the client's life.

    ``wrap(argv)`` returns the command to start (cgroup variants join the group before
    ``exec``); ``attach(pid)`` must be called with the started process (the duty cycle
    needs it; the process must lead its own process group).
    """

    def __init__(self, profile: DeviceProfile, *, name: str, mechanism: str | None = None) -> None:
        self.profile = profile
        self._group: Path | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._pgid: int | None = None
        forced = mechanism or os.environ.get("QUICSM_DEVICE_MECHANISM") or None
        if forced is not None and forced not in MECHANISMS:
            known = ", ".join(MECHANISMS)
            raise LabError(f"unknown device mechanism {forced!r} (known: {known})")
        pct = profile.cpu_percent
        if pct is None:
            self.mechanism = "none"
            return
        quota_us = max(1000, round(PERIOD_US * pct / 100))
        candidates = [forced] if forced else list(MECHANISMS)
        for cand in candidates:
            if cand == "cgroup-v2" and (group := _try_cgroup_v2(name)) is not None:
                (group / "cpu.max").write_text(f"{quota_us} {PERIOD_US}")
                self._group, self.mechanism = group, cand
                return
            if cand == "cgroup-v1" and (group := _try_cgroup_v1(name)) is not None:
                (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (group / "cpu.cfs_quota_us").write_text(str(quota_us))
                self._group, self.mechanism = group, cand
                return
            if cand == "duty-cycle":
                self.mechanism = cand
                return
        raise LabError(f"device mechanism {forced!r} is not available on this machine")

    def wrap(self, argv: list[str]) -> list[str]:
        if self._group is None:
            return list(argv)
        procs = self._group / "cgroup.procs"
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs), *argv]

    def attach(self, pid: int) -> None:
        if self.mechanism != "duty-cycle" or self.profile.cpu_percent is None:
            return
        self._pgid = pid
        on_s = PERIOD_US * self.profile.cpu_percent / 100 / 1e6
        off_s = PERIOD_US / 1e6 - on_s

        def cycle() -> None:
            while not self._stop.is_set():
                if not self._signal(signal.SIGCONT) or self._stop.wait(on_s):
                    break
                if not self._signal(signal.SIGSTOP):
                    break
                self._stop.wait(off_s)
            self._signal(signal.SIGCONT)

        self._thread = threading.Thread(target=cycle, name="quicsm-duty-cycle", daemon=True)
        self._thread.start()

    def _signal(self, sig: int) -> bool:
        if self._pgid is None:
            return False
        try:
            os.killpg(self._pgid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def close(self) -> None:
        """Stop limiting; remove the cgroup (its processes must have exited or are killed)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._group is not None:
            procs = self._group / "cgroup.procs"
            for _ in range(50):
                with contextlib.suppress(OSError):
                    for pid in procs.read_text().split():
                        with contextlib.suppress(OSError):
                            os.kill(int(pid), signal.SIGKILL)
                try:
                    self._group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
            self._group = None

    def __enter__(self) -> CpuLimiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
