"""Scenario files: what the lab runs, as TOML.

A scenario file holds run settings, defaults and a list of scenarios; each scenario may carry
a ``matrix`` that expands it into one scenario per combination of values::

    include = ["baseline.toml"]          # scenarios of other files (their [run] is ignored)

    [run]
    repetitions = 5                      # runs per scenario and stack, back to back
    seed = 1                             # base seed of the relay's random streams
    stacks = ["quic-go@v0.48.2", "quinn/bbr"]  # "stack[@version][/cc]"; [] = all built
    timeout_s = 60                       # per client run
    path = "udp"                         # "udp": the UDP relay on 127.0.0.1 (QUIC only);
                                         # "ip": the IP-level path (quicsm.lab.ippath)

    [defaults]                           # merged into every scenario of this file
    network = { rate_mbit = 100, delay_ms = 10, queue_packets = 300 }
    workload = { objects = 1, object_size = 2_000_000 }

    [[scenario]]
    name = "maxcwnd"
    env = { QUICSM_MAX_CWND_PACKETS = 430 }
    network.down = { loss = 0.01 }       # per-direction overrides: up (client->server), down
    device = { profile = "slow" }
    matrix = { "env.QUICSM_MAX_CWND_PACKETS" = [430, 2000] }

Network keys (both directions, or under ``up``/``down``) are those of
:func:`quicsm.lab.link.link_config_from_dict`; ``delay_ms`` is one-way, per direction.
Every error names the file and the key.
"""

from __future__ import annotations

import copy
import itertools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quicsm.core.errors import InputError, LabError
from quicsm.lab.device import DeviceProfile, device_profile
from quicsm.lab.link import LinkConfig, link_config_from_dict, link_config_to_dict

Scalar = str | int | float | bool | None

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.=+-]*$")
_TOP_KEYS = {"include", "run", "defaults", "scenario"}
_RUN_KEYS = {"repetitions", "seed", "stacks", "timeout_s", "path", "order"}
#: run orders: every repetition of a scenario before the next ("scenario"), or repetition n of
#: every scenario before repetition n + 1 ("interleaved": paired runs share the machine's load)
ORDERS = ("scenario", "interleaved")
#: the paths a scenario can run over (quicsm.lab.relay, quicsm.lab.ippath)
PATHS = ("udp", "ip")
_SCENARIO_KEYS = {
    "name",
    "description",
    "network",
    "device",
    "workload",
    "env",
    "matrix",
    "repetitions",
    "stacks",
    "timeout_s",
    "path",
}
_SECTION_KEYS = {"network", "device", "workload", "env"}
_WORKLOAD_KEYS = {"objects", "object_size", "parallel"}


@dataclass(frozen=True, kw_only=True)
class Workload:
    """What the client fetches: ``objects`` objects of ``object_size`` bytes each."""

    objects: int = 1
    object_size: int = 2_000_000
    parallel: int = 1

    @property
    def transfer_bytes(self) -> int:
        return self.objects * self.object_size


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """One fully resolved scenario (one matrix cell)."""

    name: str
    description: str
    up: LinkConfig
    down: LinkConfig
    device: DeviceProfile
    workload: Workload
    env: dict[str, str]
    repetitions: int
    stacks: tuple[str, ...]
    timeout_s: float
    source: Path
    #: "udp" (the UDP relay) or "ip" (the IP-level path); kernel TCP always runs over "ip"
    path: str = "udp"

    def labels(self) -> dict[str, Scalar]:
        """Every parameter as flat ``dotted.key -> scalar`` labels (for run.json)."""
        out: dict[str, Scalar] = {
            "scenario": self.name,
            "scenario.description": self.description,
            "scenario.file": self.source.name,
            **self.device.labels(),
            "objects": self.workload.objects,
            "object_size": self.workload.object_size,
            "parallel": self.workload.parallel,
            "transfer_bytes": self.workload.transfer_bytes,
            "repetitions": self.repetitions,
            "path": self.path,
        }
        for direction, link in (("up", self.up), ("down", self.down)):
            out.update(_flatten(link_config_to_dict(link), f"network.{direction}"))
        for key, value in sorted(self.env.items()):
            out[f"env.{key}"] = value
        return out


@dataclass(frozen=True, kw_only=True)
class Plan:
    """Everything a scenario file asks for."""

    source: Path
    seed: int
    scenarios: tuple[Scenario, ...]
    order: str = "scenario"


def _flatten(d: dict[str, Any], prefix: str) -> dict[str, Scalar]:
    out: dict[str, Scalar] = {}
    for key, value in d.items():
        name = f"{prefix}.{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name))
        elif isinstance(value, list):
            out[name] = repr(value)
        else:
            out[name] = value
    return out


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _err(file: Path, where: str, msg: str) -> InputError:
    return InputError(f"{file}: {where}: {msg}")


def _table(value: object, file: Path, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _err(file, where, f"expected a table, got {value!r}")
    return value


def _check(d: dict[str, Any], allowed: set[str], file: Path, where: str) -> None:
    unknown = sorted(set(d) - allowed)
    if unknown:
        key = f"{where}.{unknown[0]}" if where else unknown[0]
        raise _err(file, key, f"unknown key (expected one of: {', '.join(sorted(allowed))})")


def _int(value: object, file: Path, where: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _err(file, where, f"expected an integer >= {minimum}, got {value!r}")
    return value


def _positive(value: object, file: Path, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise _err(file, where, f"expected a number > 0, got {value!r}")
    return float(value)


def _stacks(value: object, file: Path, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
        raise _err(
            file,
            where,
            f'expected a list of "stack", "stack@version" or "stack@version/cc", got {value!r}',
        )
    return tuple(value)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: scenario file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read scenario file: {exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: invalid TOML: {exc}") from None


def _set_dotted(d: dict[str, Any], dotted: str, value: object) -> None:
    *parents, leaf = dotted.split(".")
    for p in parents:
        d = d.setdefault(p, {})
    d[leaf] = value


def _cell_suffix(assignment: dict[str, object]) -> str:
    parts = []
    for key, value in assignment.items():
        leaf = key.rsplit(".", 1)[-1].lower()
        parts.append(f"{leaf}={value}")
    return "-".join(parts)


def _resolve(raw: dict[str, Any], *, file: Path, where: str, run: dict[str, Any]) -> Scenario:
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise _err(
            file, f"{where}.name", f"expected a name of letters, digits and _.=+- , got {name!r}"
        )
    where = f"{where} ({name})"
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise _err(file, f"{where}.description", f"expected a string, got {description!r}")

    network = _table(raw.get("network", {}), file, f"{where}.network")
    both = {k: v for k, v in network.items() if k not in ("up", "down")}
    links = {}
    for direction in ("up", "down"):
        own = _table(network.get(direction, {}), file, f"{where}.network.{direction}")
        try:
            links[direction] = link_config_from_dict(
                _merge(both, own), where=f"network.{direction}"
            )
        except LabError as exc:
            raise _err(file, where, str(exc)) from None

    device_raw = _table(raw.get("device", {}), file, f"{where}.device")
    _check(
        device_raw,
        {"profile", "cpu_percent", "read_mbit", "read_interval_ms"},
        file,
        f"{where}.device",
    )
    try:
        device = device_profile(
            device_raw.get("profile", "desktop"),
            cpu_percent=device_raw.get("cpu_percent"),
            read_mbit=device_raw.get("read_mbit"),
            read_interval_ms=device_raw.get("read_interval_ms"),
        )
    except LabError as exc:
        raise _err(file, f"{where}.device", str(exc)) from None

    wl = _table(raw.get("workload", {}), file, f"{where}.workload")
    _check(wl, _WORKLOAD_KEYS, file, f"{where}.workload")
    workload = Workload(
        objects=_int(wl.get("objects", 1), file, f"{where}.workload.objects", minimum=1),
        object_size=_int(
            wl.get("object_size", 2_000_000), file, f"{where}.workload.object_size", minimum=1
        ),
        parallel=_int(wl.get("parallel", 1), file, f"{where}.workload.parallel", minimum=1),
    )

    env_raw = _table(raw.get("env", {}), file, f"{where}.env")
    env: dict[str, str] = {}
    for key, value in env_raw.items():
        if isinstance(value, dict | list) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise _err(file, f"{where}.env.{key}", "expected NAME = scalar value")
        env[key] = str(value).lower() if isinstance(value, bool) else str(value)

    reps = raw.get("repetitions", run.get("repetitions", 5))
    timeout = raw.get("timeout_s", run.get("timeout_s", 60))
    stacks = raw.get("stacks", run.get("stacks", []))
    path = raw.get("path", run.get("path", "udp"))
    if path not in PATHS:
        raise _err(file, f"{where}.path", f"expected one of {', '.join(PATHS)}, got {path!r}")
    return Scenario(
        name=name,
        description=description,
        up=links["up"],
        down=links["down"],
        device=device,
        workload=workload,
        env=env,
        repetitions=_int(reps, file, f"{where}.repetitions", minimum=1),
        stacks=_stacks(stacks, file, f"{where}.stacks"),
        timeout_s=_positive(timeout, file, f"{where}.timeout_s"),
        source=file,
        path=path,
    )


def _expand(raw: dict[str, Any], *, file: Path, where: str) -> list[tuple[str, dict[str, Any]]]:
    """Expand a scenario's matrix into (where, raw scenario) pairs, in file order."""
    matrix = _table(raw.get("matrix", {}), file, f"{where}.matrix")
    base = {k: v for k, v in raw.items() if k != "matrix"}
    if not matrix:
        return [(where, base)]
    keys = list(matrix)
    for key in keys:
        section = key.split(".", 1)[0]
        if (
            section not in _SECTION_KEYS
            or "." not in key
            or not isinstance(matrix[key], list)
            or not matrix[key]
        ):
            raise _err(
                file,
                f"{where}.matrix.{key}",
                "expected 'section.key = [values...]' with section one of "
                f"{', '.join(sorted(_SECTION_KEYS))}",
            )
    out = []
    for values in itertools.product(*(matrix[k] for k in keys)):
        assignment = dict(zip(keys, values, strict=True))
        cell = copy.deepcopy(base)
        for key, value in assignment.items():
            _set_dotted(cell, key, value)
        cell["name"] = f"{base.get('name')}-{_cell_suffix(assignment)}"
        out.append((f"{where}[{_cell_suffix(assignment)}]", cell))
    return out


def _file_scenarios(
    path: Path, *, run: dict[str, Any] | None, seen: tuple[Path, ...]
) -> tuple[dict[str, Any], list[Scenario]]:
    path = path.resolve() if path.is_absolute() else path
    if path.resolve() in seen:
        raise InputError(f"{path}: include cycle through {' -> '.join(str(p) for p in seen)}")
    doc = _read_toml(path)
    _check(doc, _TOP_KEYS, path, "")
    run_table = _table(doc.get("run", {}), path, "run")
    _check(run_table, _RUN_KEYS, path, "run")
    effective_run = run_table if run is None else run
    scenarios: list[Scenario] = []
    includes = doc.get("include", [])
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise _err(path, "include", f"expected a list of file names, got {includes!r}")
    for inc in includes:
        _, inc_scenarios = _file_scenarios(
            path.parent / inc, run=effective_run, seen=(*seen, path.resolve())
        )
        scenarios.extend(inc_scenarios)
    defaults = _table(doc.get("defaults", {}), path, "defaults")
    _check(defaults, _SECTION_KEYS, path, "defaults")
    items = doc.get("scenario", [])
    if not isinstance(items, list):
        raise _err(path, "scenario", "expected [[scenario]] tables")
    for i, item in enumerate(items):
        where = f"scenario[{i + 1}]"
        item = _table(item, path, where)
        _check(item, _SCENARIO_KEYS, path, where)
        for cell_where, cell in _expand(_merge(defaults, item), file=path, where=where):
            scenarios.append(_resolve(cell, file=path, where=cell_where, run=effective_run))
    return run_table, scenarios


def load_plan(path: str | Path) -> Plan:
    """Read a scenario file (and its includes) into a :class:`Plan`; errors name file and key."""
    path = Path(path)
    run, scenarios = _file_scenarios(path, run=None, seen=())
    if not scenarios:
        raise InputError(f"{path}: no scenarios (add [[scenario]] tables or include = [...])")
    names: dict[str, Path] = {}
    for s in scenarios:
        if s.name in names:
            raise InputError(
                f"{s.source}: scenario name {s.name!r} is used twice (also in {names[s.name]})"
            )
        names[s.name] = s.source
    seed = run.get("seed", 1)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise _err(path, "run.seed", f"expected an integer, got {seed!r}")
    order = run.get("order", "scenario")
    if order not in ORDERS:
        raise _err(path, "run.order", f"expected one of {', '.join(ORDERS)}, got {order!r}")
    return Plan(source=path, seed=seed, scenarios=tuple(scenarios), order=order)
