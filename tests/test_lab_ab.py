"""`quicsm lab ab`: pair orders, settings and resuming; end to end with a real stack (tiny
transfers, small budget), interrupted and resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from quicsm.cli import main
from quicsm.compare.ab import AbConfig, AbExperiment, pair_order, quantities
from quicsm.core.errors import InputError
from quicsm.extract.read import read_traces
from quicsm.lab.scenario import load_plan
from quicsm.lab.stacks import Stack

ROOT = Path(__file__).resolve().parent.parent
STACKS_FILE = ROOT / "build" / "stacks.json"
SCENARIO = (
    "[run]\ntimeout_s = 60\n"
    '[[scenario]]\nname = "tiny"\n'
    "network = { rate_mbit = 50, delay_ms = 10, loss = 0.01 }\n"
    "workload = { objects = 1, object_size = 150_000 }\n"
)


def _stack(name: str, version: str, cc: str = "") -> Stack:
    return Stack(stack=name, version=version, server=("srv",), client=("cli",), cc_algorithm=cc)


def test_pair_orders_are_seeded_and_fair() -> None:
    orders = [pair_order(1, "jitter", n) for n in range(1, 2001)]
    assert orders == [pair_order(1, "jitter", n) for n in range(1, 2001)]
    first_a = sum(o == ("A", "B") for o in orders)
    assert 900 < first_a < 1100  # a fair coin (binomial sd 22)
    assert set(orders) == {("A", "B"), ("B", "A")}
    assert [pair_order(2, "jitter", n) for n in range(1, 50)] != orders[:49]


def test_quantities_are_the_primary_family() -> None:
    q = quantities(_stack("a", "1"), _stack("b", "2"), AbConfig())
    names = [x.name for x in q]
    assert names[-1] == "completion time" and len(names) == 9
    assert "Recovery share" in names and "ProbeBW share" not in names
    q = quantities(_stack("a", "1", "bbr"), _stack("b", "2"), AbConfig())
    assert "ProbeBW share" in [x.name for x in q]


def test_bad_settings_are_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--margin"):
        AbConfig(share_margin=5)
    with pytest.raises(InputError, match="--alpha"):
        AbConfig(alpha=0)
    scen = tmp_path / "s.toml"
    scen.write_text(SCENARIO)
    plan = load_plan(scen)
    a, b = _stack("a", "1"), _stack("b", "2")
    out = tmp_path / "out"
    for resuming in (False, True):
        e = AbExperiment(plan, a, b, out_dir=out, config=AbConfig())
        assert e.claim_directory() is resuming
        e.close()
    # a longer budget continues the same experiment
    longer = AbExperiment(plan, a, b, out_dir=out, config=AbConfig(max_pairs=60))
    assert longer.claim_directory() is True
    assert json.loads((out / "ab.json").read_text())["max_pairs"] == 60
    longer.close()  # releases the directory's lock
    other = AbExperiment(plan, a, b, out_dir=out, config=AbConfig(share_margin=0.1))
    with pytest.raises(InputError, match=r"share_margin: 0.05 on disk, 0.1 now"):
        other.claim_directory()


def test_a_selector_naming_two_builds_is_an_error(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks.json"
    stacks.write_text(
        json.dumps(
            [
                {
                    "stack": "a",
                    "version": "1",
                    "server": ["srv"],
                    "client": ["cli"],
                    "controllers": ["newreno", "cubic"],
                }
            ]
        )
    )
    scen = tmp_path / "s.toml"
    scen.write_text(SCENARIO)
    result = CliRunner().invoke(
        main, ["lab", "ab", str(scen), "a", "a/cubic", "--stacks", str(stacks), "-o", "x"]
    )
    assert result.exit_code == 1
    assert "A: 'a' names 2 builds (a@1/newreno, a@1/cubic); name one" in result.output
    assert not (tmp_path / "x").exists()


def _built() -> None:
    if not STACKS_FILE.exists():
        build = ROOT / "instrumentation-patches" / "build.sh"
        proc = subprocess.run([str(build)], capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not STACKS_FILE.exists():
            pytest.fail(f"instrumentation-patches/build.sh failed:\n{proc.stderr[-4000:]}")


def _cmd(scen: Path, out: Path, max_runs: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "quicsm",
        "lab",
        "ab",
        str(scen),
        "quic-go@v0.65.0/newreno",
        "quic-go@v0.65.0/newreno",
        "--stacks",
        str(STACKS_FILE),
        "-o",
        str(out),
        "--max-runs",
        str(max_runs),
    ]


@pytest.mark.lab
def test_ab_end_to_end_interrupted_and_resumed(tmp_path: Path) -> None:
    """Two identical builds, 2 pairs: interrupted during the second run of pair 1, resumed
    without rerunning the finished run; the runs are packed for diff and the report gives the
    stopping reason (a budget this small cannot show anything: no false finding)."""
    _built()
    scen = tmp_path / "s.toml"
    scen.write_text(SCENARIO)
    out = tmp_path / "ab"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        _cmd(scen, out, 2),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    order = pair_order(1, "tiny", 1)
    first = out / order[0] / "quic-go" / "v0.65.0" / "newreno" / "tiny" / "run-1"
    second = out / order[1] / "quic-go" / "v0.65.0" / "newreno" / "tiny" / "run-1"
    deadline = time.monotonic() + 120
    while not ((first / "run.json").exists() and second.exists()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the first run did not finish"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "the same command resumes" in err
    done = (first / "run.json").read_text()
    assert json.loads(done)["status"] == "ok"
    assert json.loads((second / "run.json").read_text())["reason"] == "interrupted"

    res = subprocess.run(
        _cmd(scen, out, 2), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr
    assert "resuming from the runs on disk" in res.stderr
    assert (first / "run.json").read_text() == done  # never rerun
    assert f"tiny pair 1: run 1/2 = {order[0]}" not in res.stderr
    assert f"tiny pair 1: run 2/2 = {order[1]}" in res.stderr
    second_labels = json.loads((second / "run.json").read_text())
    assert second_labels["status"] == "ok"
    assert (second_labels["ab.arm"], second_labels["ab.pair"], second_labels["ab.position"]) == (
        order[1],
        1,
        2,
    )
    assert "tiny: 2/2 pairs (4 runs)" in res.stderr
    result = json.loads((out / "ab-result.json").read_text())
    rows = result["rows"]
    assert {r["verdict"] for r in rows} == {"budget"}
    assert not any(r["changed"] for r in rows)
    assert "| tiny | budget | 2 | budget of 2 pairs reached" in res.stdout
    assert res.stdout == (out / "ab-report.md").read_text()
    # the packs hold the runs with their labels: what diff and report read
    for arm in ("A", "B"):
        traces = read_traces([out / f"{arm}.qlog"])
        assert traces.height == 4  # 2 runs x (server, client)
    r = CliRunner().invoke(main, ["diff", str(out / "A.qlog"), "--vs", str(out / "B.qlog")])
    assert r.exit_code == 0, r.output


def test_progress_line_and_report_say_why_a_scenario_stopped() -> None:
    import math

    import numpy as np

    from quicsm.compare.ab import Pair, ScenarioProgress, result_table
    from quicsm.render.ab_text import progress_line, report_markdown
    from quicsm.stats.sequential import Quantity, decide

    q = [
        Quantity(name="Recovery share", margin=0.05),
        Quantity(name="completion time", margin=math.log(1.1)),
    ]
    rng = np.random.default_rng(1)
    n = 12
    diffs = {"Recovery share": list(0.2 + rng.normal(0, 0.01, n)), "completion time": [-3.2] * n}
    state = decide(diffs, q, alpha=0.05, hypotheses=2, max_pairs=30)
    pairs = [
        Pair(
            pair=i + 1,
            order=("A", "B"),
            values={"A": dict.fromkeys(diffs, 0.0), "B": {k: v[i] for k, v in diffs.items()}},
        )
        for i in range(n)
    ]
    assert all(p.ok for p in pairs) and pairs[3].differences()["completion time"] == -3.2
    p = ScenarioProgress(scenario="jitter", pairs=pairs, state=state)
    line = progress_line(p, max_pairs=30)
    assert line.startswith("jitter: 12/30 pairs (24 runs); ")
    assert "completion time -95.9% [" in line and "| CHANGE: change shown in" in line
    table = result_table([p])
    assert table.height == 2 and set(table["verdict"]) == {"change"}
    settings = {
        "a": "x@1",
        "b": "x@2",
        "alpha": 0.05,
        "hypotheses": 2,
        "share_margin": 0.05,
        "time_margin": 0.1,
        "max_pairs": 30,
        "seed": 1,
    }
    text = report_markdown(settings, table)
    assert "| jitter | change | 12 | change shown in Recovery share, completion time" in text
    assert "| jitter | Recovery share | +20." in text and "| change |" in text
    assert report_markdown(settings, table) == text  # deterministic


def test_the_progress_line_names_no_quantity_while_every_e_is_1() -> None:
    """After one pair no e-value has moved: the line does not name one quantity as nearer a
    change (it did, the first in order of the estimate's size)."""
    from quicsm.compare.ab import Pair, ScenarioProgress
    from quicsm.render.ab_text import progress_line
    from quicsm.stats.sequential import Quantity, decide

    q = [Quantity(name="Recovery share", margin=0.05), Quantity(name="completion time", margin=0.1)]
    diffs = {"Recovery share": [0.03], "completion time": [0.0]}
    state = decide(diffs, q, alpha=0.05, hypotheses=2, max_pairs=30)
    values = {"A": dict.fromkeys(diffs, 0.0), "B": {k: v[0] for k, v in diffs.items()}}
    p = ScenarioProgress(
        scenario="s", pairs=[Pair(pair=1, order=("A", "B"), values=values)], state=state
    )
    line = progress_line(p, max_pairs=30)
    assert line.startswith(
        "s: 1/30 pairs (2 runs); no quantity nearer a change than at the start "
        "(every e(change) ≤ 1); completion time "
    )
    assert "Recovery share +3.0 pt" not in line and "change: every e ≤ 1" in line


def test_a_second_process_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    scen = tmp_path / "s.toml"
    scen.write_text(SCENARIO)
    plan = load_plan(scen)
    a, b = _stack("a", "1"), _stack("b", "2")
    first = AbExperiment(plan, a, b, out_dir=tmp_path / "out", config=AbConfig())
    first.claim_directory()  # held until first.close()
    code = (
        "import sys; from pathlib import Path\n"
        "from quicsm.compare.ab import AbConfig, AbExperiment\n"
        "from quicsm.lab.scenario import load_plan\n"
        "from quicsm.lab.stacks import Stack\n"
        "from quicsm.core.errors import InputError\n"
        "s = lambda n, v: Stack(stack=n, version=v, server=('srv',), client=('cli',))\n"
        f"e = AbExperiment(load_plan({str(scen)!r}), s('a', '1'), s('b', '2'), "
        f"out_dir=Path({str(tmp_path / 'out')!r}), config=AbConfig())\n"
        "try:\n    e.claim_directory()\nexcept InputError as exc:\n    print(exc); sys.exit(7)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert res.returncode == 7, res.stderr
    assert "another quicsm lab ab is running in this directory" in res.stdout
    first.close()


def test_the_decision_is_taken_at_the_first_pair_that_reaches_it(tmp_path: Path) -> None:
    """Resuming reads every pair on disk and stops at the first decided prefix, the same one
    pair-by-pair decisions reach; failed pairs count against the budget."""
    import numpy as np

    from quicsm.compare.ab import Pair

    scen = tmp_path / "s.toml"
    scen.write_text(SCENARIO)
    e = AbExperiment(
        load_plan(scen), _stack("a", "1"), _stack("b", "2"), out_dir=tmp_path, config=AbConfig()
    )
    rng = np.random.default_rng(4)

    def pairs(shift: float, n: int, failed: frozenset[int] = frozenset()) -> list[Pair]:
        out = []
        for i in range(n):
            b = {q: shift + float(rng.normal(0, 0.01)) for q in e.names}
            out.append(
                Pair(
                    pair=i + 1,
                    order=("A", "B"),
                    values={"A": dict.fromkeys(e.names, 0.0), "B": None if i in failed else b},
                )
            )
        return out

    for ps in (pairs(0.2, 25), pairs(0.0, 40), pairs(0.2, 25, frozenset({1, 2}))):
        kept = e._until_decided(ps)
        k = next(
            (i for i in range(1, len(ps) + 1) if e._decide(ps[:i]).verdict != "continue"),
            len(ps),
        )
        assert len(kept) == k and k < len(ps)
    assert e._decide(e._until_decided(pairs(0.2, 25))).verdict == "change"
    assert e._decide(e._until_decided(pairs(0.0, 40))).verdict == "equivalent"
    short = AbExperiment(
        load_plan(scen),
        _stack("a", "1"),
        _stack("b", "2"),
        out_dir=tmp_path,
        config=AbConfig(max_pairs=4),
    )
    ps = pairs(0.2, 25, frozenset({0, 1}))
    assert len(short._until_decided(ps)) == 4
    assert short._decide(ps[:4]).verdict == "budget"


@pytest.mark.slow
def test_a_second_lab_ab_into_a_directory_being_packed_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    """The directory stays locked until OUT/A.qlog and OUT/B.qlog are written: a second
    invocation while the first packs gets one line (it used to take the released lock, pack
    the same runs and crash on the first one's ``A.qlog.tmp``). The first one's runs are on
    disk (a finished budget of one pair), each with a large real qlog, so packing takes a
    while; no stack runs."""
    from quicsm.cli.lab import _one_stack
    from quicsm.lab.stacks import load_stacks
    from quicsm.testing.large import repeated_contained

    stacks_file = tmp_path / "stacks.json"
    entry = {"stack": "quic-go", "version": "v0.65.0", "server": ["srv"], "client": ["cli"]}
    stacks_file.write_text(json.dumps([{**entry, "env": {}, "controllers": ["newreno"]}]))
    scen = tmp_path / "s.toml"
    scen.write_text(SCENARIO)
    out = tmp_path / "ab"
    plan = load_plan(scen)
    stack = _one_stack(load_stacks(stacks_file), "quic-go@v0.65.0/newreno", where="A")
    layout = AbExperiment(plan, stack, stack, out_dir=out, config=AbConfig(max_pairs=1))
    for position, arm in enumerate(pair_order(1, "tiny", 1), start=1):
        run_dir = layout.run_dir(plan.scenarios[0], arm, 1)
        run_dir.mkdir(parents=True)
        repeated_contained(run_dir / "server.qlog", 12 << 20)
        labels = {"status": "ok", "completion_ms": 250.0, "files.server": "server.qlog"}
        labels |= {"ab.arm": arm, "ab.pair": 1, "ab.position": position}
        (run_dir / "run.json").write_text(json.dumps(labels))
    cmd = [*_cmd(scen, out, 1)]
    cmd[cmd.index("--stacks") + 1] = str(stacks_file)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 300
        while not (out / "A.qlog.tmp").exists():
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first invocation did not start packing"
            time.sleep(0.01)
        second = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        packing = first.poll() is None
        _, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert packing, "the first invocation ended before the second was refused: packs too small"
    assert second.returncode == 1, second.stderr
    assert second.stderr == (
        f"Error: {out}: another quicsm lab ab is running in this directory; wait for it to "
        "finish (or stop it) before resuming\n"
    )
    assert second.stdout == ""
    assert first.returncode == 0, err
    for arm in ("A", "B"):
        assert f"{out / arm}.qlog: 1 traces from 1 runs" in err
        assert read_traces([out / f"{arm}.qlog"]).height == 1
    assert not list(out.glob("*.tmp"))
