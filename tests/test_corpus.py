"""The shipped corpus (traces/): its size budget and the cross-implementation pack's coverage."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path
from types import ModuleType

from quicsm.core.states import PAPER_STATES
from quicsm.lab.scenario import load_plan

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "traces"
STACKS_PACK = TRACES / "stacks" / "stacks.qlog"
BUDGET_BYTES = 20 * 1000 * 1000


def _script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader(
        "corpus_states", str(ROOT / "scripts" / "corpus_states")
    )
    spec = importlib.util.spec_from_loader("corpus_states", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_corpus_fits_its_budget() -> None:
    sizes = {str(p.relative_to(TRACES)): p.stat().st_size for p in TRACES.rglob("*") if p.is_file()}
    assert "stacks/stacks.qlog" in sizes
    assert sum(sizes.values()) <= BUDGET_BYTES, sizes


def test_cross_implementation_pack_covers_every_pair_with_five_paper_states() -> None:
    counts, traces = _script().states_by_pair([str(STACKS_PACK)])
    pairs = set(counts)
    assert len({stack for stack, _, _ in pairs}) >= 4
    families = {"newreno": "reno", "reno": "reno", "cubic": "cubic", "bbr": "bbr", "bbr2": "bbr"}
    assert {families[cc] for _, _, cc in pairs} == {"reno", "cubic", "bbr"}
    # every pair of lab/scenarios/stacks.toml: one trace per scenario (6 scenarios)
    scenarios = load_plan(ROOT / "lab" / "scenarios" / "stacks.toml").scenarios
    assert set(traces.values()) == {len(scenarios)}
    for pair, c in counts.items():
        seen = {s for s in PAPER_STATES if c[s]}
        assert len(seen) >= 5, (pair, sorted(seen))
        assert {"Init", "Recovery", "TailLossProbe", "RetransmissionTimeout"} <= seen, pair
