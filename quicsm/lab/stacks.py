"""The instrumented stacks the lab can run, as listed in ``build/stacks.json``.

``instrumentation-patches/build.sh`` writes that file: a list of objects
``{"stack", "version", "server": [argv...], "client": [argv...], "env": {...}}`` (optionally
``"patch"``, ``"controllers"``, and ``"stamp"`` with ``"sources"``). Every program speaks the
same command line (``server --listen HOST:PORT --qlog-dir DIR`` / ``client --connect HOST:PORT
--objects N --object-size BYTES --qlog-dir DIR [--parallel P]``). Relative paths in argv are
resolved against the file's directory.

``"controllers"`` lists the congestion controllers the program can run; each becomes one
:class:`Stack` whose environment sets ``QUICSM_CC`` to it (the programs read it at start-up)
and whose runs are labelled ``cc_algorithm``. An entry without ``controllers`` is one stack
without a ``cc_algorithm`` label.

``"sources"`` are the files a program was built from and ``"stamp"`` the first 16 hex digits
of the SHA-256 of their bytes end to end. The lab computes it again: a stack whose patch or
lab program changed since it was built is *stale*, and planning a run of it is an error that
says to rebuild (a program older than its sources may lack an option the runner passes).
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from quicsm.core.errors import InputError

DEFAULT_STACKS_FILE = Path("build/stacks.json")
#: the environment variable through which every lab program is told its congestion controller
CC_ENV = "QUICSM_CC"
_CC_NAME = re.compile(r"^[a-z0-9][a-z0-9_]*$")


@dataclass(frozen=True, kw_only=True)
class Stack:
    """One built stack at one version."""

    stack: str
    version: str
    server: tuple[str, ...]
    client: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    patch: str = ""
    cc_algorithm: str = ""
    #: why the built program no longer matches its sources ("" when it does, or is unknown)
    stale: str = ""

    @property
    def key(self) -> str:
        base = f"{self.stack}@{self.version}"
        return f"{base}/{self.cc_algorithm}" if self.cc_algorithm else base

    def matches(self, selector: str) -> bool:
        """``"quic-go"`` matches every version and controller, ``"quic-go@v0.65.0"`` every
        controller of one version, ``"quic-go/cubic"`` or ``"quic-go@v0.65.0/cubic"`` one
        controller."""
        rest, _, cc = selector.partition("/")
        name, _, version = rest.partition("@")
        return (
            name == self.stack
            and (not version or version == self.version)
            and (not cc or cc == self.cc_algorithm)
        )


def _argv(value: object, base: Path, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        raise InputError(f"{where}: expected a non-empty list of strings")
    first = Path(value[0])
    if not first.is_absolute() and (base / first).exists():
        value = [str((base / first).resolve()), *value[1:]]
    return tuple(value)


def _controllers(value: object, where: str) -> list[str]:
    if value is None:
        return [""]
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(c, str) and _CC_NAME.match(c) for c in value)
    ):
        raise InputError(
            f"{where}: expected 'controllers' to be a non-empty list of "
            f"lower-case names, got {value!r}"
        )
    if len(set(value)) != len(value):
        raise InputError(f"{where}: 'controllers' lists a name twice: {value!r}")
    return list(value)


def _stale(entry: dict[str, object], where: str) -> str:
    """Why the entry's program is older than its sources, or "" (no ``stamp`` recorded, or
    the same hash)."""
    stamp, sources = entry.get("stamp"), entry.get("sources")
    if stamp is None and sources is None:
        return ""
    if not isinstance(stamp, str) or not isinstance(sources, list) or not sources:
        raise InputError(f"{where}: expected 'stamp' (a string) with 'sources' (a list of paths)")
    digest = hashlib.sha256()
    for source in sources:
        if not isinstance(source, str):
            raise InputError(f"{where}: expected 'sources' to list paths, got {source!r}")
        try:
            digest.update(Path(source).read_bytes())
        except OSError:
            return f"its source {source} is gone"
    if digest.hexdigest()[:16] != stamp:
        names = ", ".join(Path(s).name for s in sources)
        return f"built from other sources than these ({names} changed since)"
    return ""


def load_stacks(path: str | Path = DEFAULT_STACKS_FILE) -> list[Stack]:
    """Read the stacks file; errors name the file and the entry."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: no built stacks (build them with scripts/setup --lab)") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: expected a JSON list of stacks: {exc}") from None
    if not isinstance(raw, list):
        raise InputError(f"{path}: expected a JSON list of stacks, got {type(raw).__name__}")
    stacks = []
    for i, entry in enumerate(raw):
        where = f"{path}: entry {i + 1}"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected an object")
        for key in ("stack", "version"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise InputError(f"{where}: expected a string {key!r}")
        env = entry.get("env") or {}
        if not isinstance(env, dict):
            raise InputError(f"{where}: expected 'env' to be an object")
        controllers = _controllers(entry.get("controllers"), where)
        server = _argv(entry.get("server"), path.parent, f"{where}.server")
        client = _argv(entry.get("client"), path.parent, f"{where}.client")
        stale = _stale(entry, where)
        for cc in controllers:
            stacks.append(
                Stack(
                    stack=entry["stack"],
                    version=entry["version"],
                    server=server,
                    client=client,
                    env={str(k): str(v) for k, v in env.items()} | ({CC_ENV: cc} if cc else {}),
                    patch=str(entry.get("patch", "")),
                    cc_algorithm=cc,
                    stale=f"{where} ({entry['stack']} {entry['version']}): {stale}" * bool(stale),
                )
            )
    return stacks


#: the kernel's TCP as a lab stack (quicsm.lab.tcpperf), always over the IP-level path
KERNEL_TCP = "linux-tcp"
KERNEL_TCP_CONTROLLERS = ("reno", "cubic", "bbr")


def available_tcp_controllers(
    path: str | Path = "/proc/sys/net/ipv4/tcp_available_congestion_control",
) -> list[str]:
    """The kernel's congestion controllers quicsm runs (of reno, cubic, bbr) that it offers."""
    try:
        offered = set(Path(path).read_text().split())
    except OSError:
        return []
    return [cc for cc in KERNEL_TCP_CONTROLLERS if cc in offered]


def kernel_tcp_stacks() -> list[Stack]:
    """``linux-tcp@<kernel release>/<cc>`` for every controller the kernel offers."""
    program = (sys.executable, "-m", "quicsm.lab.tcpperf")
    return [
        Stack(
            stack=KERNEL_TCP,
            version=platform.release(),
            server=program,
            client=program,
            env={CC_ENV: cc},
            patch="",
            cc_algorithm=cc,
        )
        for cc in available_tcp_controllers()
    ]


def needs_built_stacks(selectors: tuple[str, ...]) -> bool:
    """Whether these selectors (none: every built stack) ask for more than the kernel's TCP."""
    return not selectors or any(
        s.partition("@")[0].partition("/")[0] != KERNEL_TCP for s in selectors
    )


def select_stacks(stacks: list[Stack], selectors: tuple[str, ...], *, where: str) -> list[Stack]:
    """The stacks matching any selector (all built ones if none: the kernel's TCP only when
    named); an unmatched selector is an error."""
    if not selectors:
        return [s for s in stacks if s.stack != KERNEL_TCP]
    chosen: list[Stack] = []
    for sel in selectors:
        found = [s for s in stacks if s.matches(sel)]
        if not found:
            known = ", ".join(s.key for s in stacks) or "none"
            raise InputError(f"{where}: stack {sel!r} is not built (built: {known})")
        chosen.extend(s for s in found if s not in chosen)
    return chosen


def refuse_stale(stacks: list[Stack]) -> None:
    """An error naming the first stack whose program is older than its sources."""
    for s in stacks:
        if s.stale:
            raise InputError(
                f"{s.stale}: rebuild it with scripts/setup --lab "
                f"(or instrumentation-patches/build.sh {s.stack})"
            )
