"""Device profiles: the receiving client as the paper's MotoG or desktop saw the sender.

A profile has two parts. ``read_mbit`` (with ``read_interval_ms``) is the receiving
application: it reads the response in bursts, every ``read_interval_ms`` as much as
``read_mbit`` allows, so the flow-control credit it returns (MAX_DATA / MAX_STREAM_DATA) comes
only as fast as it reads. That is wall-clock paced, so a busy machine does not change it. The
lab client gets ``--read-mbit`` / ``--read-interval-ms`` (see ``client_args``); only stacks
whose lab program implements them can run such a profile. ``cpu_percent`` caps the client's
CPU. The numbers of the named profiles and what they rest on are in docs/lab.md ("Device
profiles").

The CPU cap limits the client process tree at ``cpu_percent`` of one core. The mechanism is chosen
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
    # the MotoG's 1.2 GHz cores against the desktop's 3.3 GHz Core i5 (the paper, §3.1)
    "motog": 36.0,
}

#: named profiles -> the receiving application's read rate, Mbit/s (absent: reads at once).
#: MotoG: Fig. 13's sender at 50 Mbit/s was ApplicationLimited 58% of the time, so it sent at
#: most (1 - 0.58) * 50 = 21 Mbit/s on average: what the phone's application took.
READ_MBIT: dict[str, float] = {"motog": 21.0}

#: the stacks whose lab client implements --read-mbit (the others' clients would ignore it)
PACED_READERS = frozenset({"quic-go", "aioquic"})

#: how often a rate-limited reader reads, milliseconds (a modelling choice, not the paper's)
READ_INTERVAL_MS = 20.0

MECHANISMS = ("cgroup-v2", "cgroup-v1", "duty-cycle")

#: cgroup CPU bandwidth period and the duty-cycle period, microseconds
PERIOD_US = 50_000


@dataclass(frozen=True, kw_only=True)
class DeviceProfile:
    """A named device: ``cpu_percent`` of one core for the client (None = unlimited), and the
    receiving application's read rate ``read_mbit`` (None = it reads as data arrives), one
    read burst every ``read_interval_ms``."""

    name: str
    cpu_percent: float | None
    read_mbit: float | None = None
    read_interval_ms: float = READ_INTERVAL_MS

    def client_args(self) -> list[str]:
        """Options for the lab client program (none when the application reads at once)."""
        if self.read_mbit is None:
            return []
        return [
            "--read-mbit",
            repr(self.read_mbit),
            "--read-interval-ms",
            repr(self.read_interval_ms),
        ]

    def labels(self) -> dict[str, str | float | None]:
        out: dict[str, str | float | None] = {
            "device": self.name,
            "device.cpu_percent": self.cpu_percent,
        }
        if self.read_mbit is not None:
            out["device.read_mbit"] = self.read_mbit
            out["device.read_interval_ms"] = self.read_interval_ms
        return out


def _positive(value: object, key: str, *, most: float | None = None) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not value > 0
        or (most is not None and value > most)
    ):
        bound = f"in (0, {most:g}]" if most is not None else "> 0"
        raise LabError(f"{key} must be a number {bound}, got {value!r}")
    return float(value)


def device_profile(
    name: object,
    *,
    cpu_percent: object = None,
    read_mbit: object = None,
    read_interval_ms: object = None,
) -> DeviceProfile:
    """Look up a named profile; ``cpu_percent``, ``read_mbit`` and ``read_interval_ms``
    override its values (a custom name needs ``cpu_percent`` or ``read_mbit``)."""
    if not isinstance(name, str) or (
        name not in PROFILES and cpu_percent is None and read_mbit is None
    ):
        raise LabError(
            f"unknown device profile {name!r} (known: {', '.join(sorted(PROFILES))}; "
            "or give cpu_percent or read_mbit for a custom one)"
        )
    pct = PROFILES.get(name) if cpu_percent is None else cpu_percent
    rate = READ_MBIT.get(name) if read_mbit is None else read_mbit
    interval = READ_INTERVAL_MS if read_interval_ms is None else read_interval_ms
    return DeviceProfile(
        name=name,
        cpu_percent=None if pct is None else _positive(pct, "cpu_percent", most=100),
        read_mbit=None if rate is None else _positive(rate, "read_mbit"),
        read_interval_ms=_positive(interval, "read_interval_ms", most=1000),
    )


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
