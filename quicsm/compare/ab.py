"""A/B experiments in the lab: two builds, a scenario set, runs in pairs until each scenario is
decided (:mod:`quicsm.stats.sequential`).

Per scenario, pair ``n`` is run ``n`` of build A and run ``n`` of build B, both with the relay
seed of repetition ``n`` (the same random losses and jitter draws), in an order drawn from
(seed, scenario, pair) — so drift over time cannot pose as an effect, and a rerun of the same
command draws the same orders. Rounds go over the undecided scenarios, one pair each. After
every pair the scenario's sequential tests are updated on the pairs whose two runs succeeded;
the scenario stops at a change, at equivalence within the margins, or when ``max_pairs`` pairs
were attempted. A failed run is kept (its ``run.json`` says why) and its pair leaves the test.

The runs are ordinary lab runs under ``OUT/A/…`` and ``OUT/B/…`` (so that two identical builds
do not share directories), each ``run.json`` carrying ``ab.arm``, ``ab.pair`` and
``ab.position`` (1 or 2 within the pair). ``OUT/ab.json`` holds the experiment's settings:
running the same command again resumes from the runs on disk — a finished run is never rerun,
an interrupted one is — and different settings for the same directory are an error
(``OUT/.ab.lock`` keeps a second process out while one runs, until its packs are written). At
the end the two arms are packed (``OUT/A.qlog``, ``OUT/B.qlog``: ``quicsm diff``/``report`` read
them) and the decisions are written to ``OUT/ab-result.json``.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from quicsm.core.errors import InputError
from quicsm.core.states import BBR_STATES, PAPER_STATES
from quicsm.lab.runner import Labels, RunSpec, execute, run_seed
from quicsm.lab.scenario import Plan, Scenario
from quicsm.lab.stacks import Stack
from quicsm.stats.sequential import (
    Quantity,
    ScenarioState,
    change_wealth,
    decide,
    equivalence_wealth,
    threshold,
)

ARMS = ("A", "B")
SETTINGS_FILE = "ab.json"
LOCK_FILE = ".ab.lock"
RESULT_FILE = "ab-result.json"
COMPLETION = "completion time"
SHARE = " share"


@dataclass(frozen=True, kw_only=True)
class AbConfig:
    """The experiment's settings: level, margins (time share in points of 1; completion time
    relative), the budget in pairs per scenario, and the seed of the pair orders."""

    alpha: float = 0.05
    share_margin: float = 0.05
    time_margin: float = 0.10
    max_pairs: int = 30
    seed: int = 1

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise InputError(f"--alpha: expected a level in (0, 1), got {self.alpha}")
        if not 0 < self.share_margin < 1:
            raise InputError(f"--margin: expected a time share in (0, 1), got {self.share_margin}")
        if not self.time_margin > 0:
            raise InputError(f"--time-margin: expected a positive ratio, got {self.time_margin}")
        if self.max_pairs < 1:
            raise InputError(f"--max-runs: expected at least 1, got {self.max_pairs}")


def quantities(a: Stack, b: Stack, config: AbConfig) -> list[Quantity]:
    """The primary quantities of every scenario: each paper state's time share (and BBR's
    phases' when a build runs BBR) and the completion time (log ratio, B over A)."""
    bbr = any("bbr" in (s.cc_algorithm or "") for s in (a, b))
    states = (*PAPER_STATES, *(BBR_STATES if bbr else ()))
    return [Quantity(name=f"{s}{SHARE}", margin=config.share_margin) for s in states] + [
        Quantity(name=COMPLETION, margin=math.log1p(config.time_margin))
    ]


def pair_order(seed: int, scenario: str, pair: int) -> tuple[str, str]:
    """Which build runs first in a pair: a fair coin seeded by (seed, scenario, pair)."""
    rng = np.random.default_rng([seed, zlib.crc32(scenario.encode()), pair])
    return ("A", "B") if rng.random() < 0.5 else ("B", "A")


def run_values(run_dir: Path, names: Sequence[str]) -> dict[str, float] | None:
    """A finished run's quantities (time shares from the server's qlog, the sender's; log
    completion time from ``run.json``), or None for a failed run."""
    from quicsm.extract.read import read_transitions
    from quicsm.stats.descriptive import time_in_state

    labels = json.loads((run_dir / "run.json").read_text())
    if labels.get("status") != "ok":
        return None
    files = [f for f in str(labels.get("files.server") or "").split(",") if f]
    completion = labels.get("completion_ms")
    if not files or not isinstance(completion, int | float) or completion <= 0:
        return None
    tis = time_in_state(read_transitions([run_dir / f for f in files]))
    spent = {
        str(s): float(ms)
        for s, ms in tis.group_by(pl.col("state").cast(pl.String))
        .agg(pl.col("duration_ms").sum())
        .iter_rows()
    }
    total = sum(spent.values())
    out = {
        n: (spent.get(n.removesuffix(SHARE), 0.0) / total if total > 0 else 0.0)
        for n in names
        if n.endswith(SHARE)
    }
    out[COMPLETION] = math.log(float(completion))
    return out


@dataclass(kw_only=True)
class Pair:
    """One pair of runs: its number, order, and each arm's quantities (None: failed)."""

    pair: int
    order: tuple[str, str]
    values: dict[str, dict[str, float] | None] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(self.values.get(arm) is not None for arm in ARMS)

    def differences(self) -> dict[str, float]:
        a, b = self.values["A"], self.values["B"]
        assert a is not None and b is not None
        return {k: b[k] - a[k] for k in a}


@dataclass(kw_only=True)
class ScenarioProgress:
    """A scenario's pairs so far and its sequential state."""

    scenario: str
    pairs: list[Pair]
    state: ScenarioState

    @property
    def failed(self) -> int:
        return sum(not p.ok for p in self.pairs)

    @property
    def decided(self) -> bool:
        return self.state.verdict != "continue"


class AbExperiment:
    """Two builds over a plan's scenarios (see the module docstring)."""

    def __init__(
        self,
        plan: Plan,
        a: Stack,
        b: Stack,
        *,
        out_dir: Path,
        config: AbConfig,
    ) -> None:
        self.plan, self.a, self.b, self.out_dir, self.config = plan, a, b, out_dir, config
        self.scenarios: tuple[Scenario, ...] = plan.scenarios
        if not self.scenarios:
            raise InputError("no scenario to run")
        self.quantities = quantities(a, b, config)
        self.names = [q.name for q in self.quantities]
        self.hypotheses = len(self.scenarios) * len(self.quantities)
        self._values: dict[Path, dict[str, float] | None] = {}
        self._lock_handle: Any = None

    # -- the experiment's identity -------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        return {
            "a": self.a.key,
            "b": self.b.key,
            "scenarios": [s.name for s in self.scenarios],
            "plan_seed": self.plan.seed,
            "alpha": self.config.alpha,
            "share_margin": self.config.share_margin,
            "time_margin": self.config.time_margin,
            "max_pairs": self.config.max_pairs,
            "seed": self.config.seed,
            "quantities": self.names,
            "hypotheses": self.hypotheses,
        }

    def claim_directory(self) -> bool:
        """Write ``ab.json``, or check that the one there has the same settings; True when
        resuming."""
        path = self.out_dir / SETTINGS_FILE
        mine = self.settings()
        self._lock()
        if path.is_file():
            try:
                theirs = json.loads(path.read_text())
            except ValueError as exc:
                self.close()
                raise InputError(f"{path}: expected the experiment's settings: {exc}") from None
            # the budget may change: the tests are valid at any stopping time, so a scenario
            # stopped at its budget can go on (or stop earlier) without harm
            changed = sorted(
                k
                for k in set(mine) | set(theirs)
                if k != "max_pairs" and mine.get(k) != theirs.get(k)
            )
            if changed:
                self.close()
                detail = "; ".join(
                    f"{k}: {theirs.get(k)!r} on disk, {mine.get(k)!r} now" for k in changed
                )
                raise InputError(
                    f"{path}: this directory holds an experiment with other settings ({detail}); "
                    "resume it with the same command or use another --out directory"
                )
            if theirs.get("max_pairs") != mine["max_pairs"]:
                path.write_text(json.dumps(mine, indent=1) + "\n")
            return True
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(mine, indent=1) + "\n")
        return False

    def _lock(self) -> None:
        """Hold ``OUT/.ab.lock`` for this process's lifetime: two experiments writing the
        same runs would overwrite each other's (the second one is refused)."""
        import fcntl

        self.out_dir.mkdir(parents=True, exist_ok=True)
        fh = (self.out_dir / LOCK_FILE).open("a")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            raise InputError(
                f"{self.out_dir}: another quicsm lab ab is running in this directory; wait for "
                "it to finish (or stop it) before resuming"
            ) from None
        self._lock_handle = fh

    def close(self) -> None:
        """Release the directory (its lock)."""
        if self._lock_handle is not None:
            self._lock_handle.close()
            self._lock_handle = None

    # -- runs on disk ----------------------------------------------------------------------

    def spec(self, scenario: Scenario, arm: str, pair: int) -> RunSpec:
        stack = self.a if arm == "A" else self.b
        return RunSpec(
            stack=stack,
            scenario=scenario,
            run=pair,
            seed=run_seed(self.plan.seed, scenario.name, pair),
        )

    def run_dir(self, scenario: Scenario, arm: str, pair: int) -> Path:
        return self.spec(scenario, arm, pair).directory(self.out_dir / arm)

    def _finished(self, run_dir: Path) -> bool:
        path = run_dir / "run.json"
        if not path.is_file():
            return False
        try:
            labels = json.loads(path.read_text())
        except ValueError:
            return False  # written halfway: run again
        return isinstance(labels, dict) and labels.get("reason") != "interrupted"

    def _pair(self, scenario: Scenario, n: int) -> Pair | None:
        """Pair ``n`` as on disk, or None if one of its runs is missing or was interrupted."""
        pair = Pair(pair=n, order=pair_order(self.config.seed, scenario.name, n))
        for arm in ARMS:
            d = self.run_dir(scenario, arm, n)
            if not self._finished(d):
                return None
            if d not in self._values:  # a finished run's quantities never change
                self._values[d] = run_values(d, self.names)
            pair.values[arm] = self._values[d]
            if pair.values[arm] is None:
                labels = json.loads((d / "run.json").read_text())
                pair.reasons[arm] = str(labels.get("reason") or "no result")
        return pair

    def progress(self, scenario: Scenario) -> ScenarioProgress:
        """The scenario's finished pairs, up to the pair that decided it (the e-processes are
        predictable, so their paths over every pair on disk give each prefix's e-values at
        once), and its state there."""
        pairs: list[Pair] = []
        n = 1
        while (pair := self._pair(scenario, n)) is not None:
            pairs.append(pair)
            n += 1
        return ScenarioProgress(
            scenario=scenario.name,
            pairs=(kept := self._until_decided(pairs)),
            state=self._decide(kept),
        )

    def _until_decided(self, pairs: list[Pair]) -> list[Pair]:
        """The shortest prefix of ``pairs`` at which the scenario is decided (all of them if
        it is not)."""
        t = threshold(self.config.alpha, self.hypotheses)
        ok = [p.differences() for p in pairs if p.ok]
        change = np.zeros(len(ok), dtype=bool)
        equivalent = np.ones(len(ok), dtype=bool)
        for q in self.quantities:
            d = np.array([x[q.name] for x in ok], dtype=float)
            change |= change_wealth(d, floor=q.bet_floor) >= t
            equivalent &= equivalence_wealth(d, margin=q.margin, floor=q.bet_floor) >= t
        seen = 0
        for k, pair in enumerate(pairs, start=1):
            seen += pair.ok
            if k >= self.config.max_pairs:
                return pairs[:k]
            if seen and (change[seen - 1] or equivalent[seen - 1]):
                return pairs[:k]
        return pairs

    def _decide(self, pairs: list[Pair]) -> ScenarioState:
        ok = [p.differences() for p in pairs if p.ok]
        diffs = {q: [d[q] for d in ok] for q in self.names}
        failed = len(pairs) - len(ok)
        return decide(
            diffs,
            self.quantities,
            alpha=self.config.alpha,
            hypotheses=self.hypotheses,
            max_pairs=max(self.config.max_pairs - failed, len(ok)),
        )

    # -- running -------------------------------------------------------------------------

    def run(
        self,
        *,
        on_run: Callable[[Scenario, str, int, int], None] | None = None,
        on_pair: Callable[[ScenarioProgress], None] | None = None,
        qlog_linger_s: float | None = None,
    ) -> list[ScenarioProgress]:
        """Run pairs, round by round over the undecided scenarios, until every scenario is
        decided. ``on_run(scenario, arm, pair, position)`` before a run, ``on_pair(progress)``
        after each pair (and once per scenario for what was on disk)."""
        from quicsm.lab.procs import stop_all
        from quicsm.lab.runner import SERVER_QLOG_LINGER_S, sigterm_as_interrupt

        linger = SERVER_QLOG_LINGER_S if qlog_linger_s is None else qlog_linger_s
        state = {s.name: self.progress(s) for s in self.scenarios}
        if on_pair is not None:
            for p in state.values():
                on_pair(p)
        with sigterm_as_interrupt():
            try:
                while True:
                    todo = [s for s in self.scenarios if not state[s.name].decided]
                    if not todo:
                        break
                    for scenario in todo:
                        n = len(state[scenario.name].pairs) + 1
                        order = pair_order(self.config.seed, scenario.name, n)
                        for position, arm in enumerate(order, start=1):
                            d = self.run_dir(scenario, arm, n)
                            if self._finished(d):
                                continue  # done before an interruption: never rerun
                            if on_run is not None:
                                on_run(scenario, arm, n, position)
                            execute(
                                self.spec(scenario, arm, n),
                                out_dir=self.out_dir / arm,
                                qlog_linger_s=linger,
                                extra=_ab_labels(arm, n, position),
                            )
                        state[scenario.name] = self.progress(scenario)
                        if on_pair is not None:
                            on_pair(state[scenario.name])
            finally:
                stop_all()
        return [state[s.name] for s in self.scenarios]


def _ab_labels(arm: str, pair: int, position: int) -> Labels:
    return {"ab.arm": arm, "ab.pair": pair, "ab.position": position}


def result_table(progress: Sequence[ScenarioProgress]) -> pl.DataFrame:
    """One row per scenario and quantity: the decision, its reason, pairs, and the quantity's
    estimate (mean difference B − A), interval and e-values."""
    rows = []
    for p in progress:
        for q in p.state.quantities:
            rows.append(
                {
                    "scenario": p.scenario,
                    "verdict": p.state.verdict,
                    "reason": p.state.reason(),
                    "pairs": len(p.pairs),
                    "failed_pairs": p.failed,
                    "quantity": q.name,
                    "estimate": q.estimate,
                    "ci_low": q.ci_low,
                    "ci_high": q.ci_high,
                    "margin": q.margin,
                    "e_change": q.e_change,
                    "e_equivalent": q.e_equivalent,
                    "threshold": p.state.threshold,
                    "changed": q.name in p.state.changed,
                }
            )
    return pl.DataFrame(rows)


def write_result(out_dir: Path, settings: dict[str, Any], table: pl.DataFrame) -> Path:
    """``ab-result.json``: the settings and the result table (non-finite numbers as null)."""

    def clean(v: object) -> object:
        return None if isinstance(v, float) and not math.isfinite(v) else v

    rows = [{k: clean(v) for k, v in r.items()} for r in table.iter_rows(named=True)]
    path = out_dir / RESULT_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"settings": settings, "rows": rows}, indent=1) + "\n")
    tmp.replace(path)
    return path
