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
TCP_PACK = TRACES / "tcp" / "linux-tcp.qlog"
#: the per-version, notebook, cross-implementation and kernel TCP packs; notebook 02's device
#: comparison (13.2 MB of 10 MB transfers) lives in benchmarks/corpora/ instead
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
    """The shipped traces stay within BUDGET_BYTES."""
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


def test_kernel_tcp_pack_has_two_runs_of_each_controller_per_scenario_in_the_eight_states() -> None:
    """traces/tcp/linux-tcp.qlog (scripts/make_tcp_corpus): reno, cubic and bbr, two runs of
    every scenario of lab/scenarios/tcp.toml, read into the paper's states (BBR's phases read
    as docs/states.md says: Startup as SlowStart, the others as CongestionAvoidance)."""
    import json

    from quicsm.extract.read import read_traces, read_transitions

    scenarios = {s.name for s in load_plan(ROOT / "lab" / "scenarios" / "tcp.toml").scenarios}
    traces = read_traces([str(TCP_PACK)])
    labels = {t: json.loads(lab) for t, lab in traces.select("trace", "labels").iter_rows()}
    runs: dict[tuple[str, str], set[int]] = {}
    for lab in labels.values():
        assert lab["stack"] == "linux-tcp" and lab["status"] == "ok" and lab["path"] == "ip"
        runs.setdefault((lab["cc_algorithm"], lab["scenario"]), set()).add(int(lab["run"]))
    assert set(runs) == {(cc, s) for cc in ("reno", "cubic", "bbr") for s in scenarios}
    assert all(r == {1, 2} for r in runs.values()), runs
    fold = {
        "Startup": "SlowStart",
        "Drain": "CongestionAvoidance",
        "ProbeBW": "CongestionAvoidance",
        "ProbeRTT": "CongestionAvoidance",
    }
    seen: dict[tuple[str, str], set[str]] = {}
    for trace, state in read_transitions([str(TCP_PACK)]).select("trace", "state").iter_rows():
        lab = labels[trace]
        seen.setdefault((lab["cc_algorithm"], lab["scenario"]), set()).add(fold.get(state, state))
    for cc in ("reno", "cubic", "bbr"):
        every = set().union(*(seen[(cc, s)] for s in scenarios))
        assert {"Init", "SlowStart", "CongestionAvoidance", "Recovery"} <= every, (cc, every)
        # the outage's back-to-back timeouts: TailLossProbe, then RetransmissionTimeout
        assert {"TailLossProbe", "RetransmissionTimeout"} <= seen[(cc, "outage")], cc
        assert "Recovery" in seen[(cc, "loss1")], cc
