"""build/stacks.json: one Stack per (program, congestion controller), selectors, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quicsm.core.errors import InputError, QuicsmError
from quicsm.lab.runner import RunSpec, plan_runs
from quicsm.lab.scenario import load_plan
from quicsm.lab.stacks import CC_ENV, Stack, load_stacks, select_stacks

ROOT = Path(__file__).resolve().parent.parent


def _write(tmp_path: Path, entries: object) -> Path:
    path = tmp_path / "stacks.json"
    path.write_text(json.dumps(entries))
    return path


def _entry(**over: object) -> dict[str, object]:
    return {
        "stack": "quinn",
        "version": "0.11.12",
        "server": ["/bin/q"],
        "client": ["/bin/q"],
        "env": {"X": "1"},
        "patch": "quinn/p.patch",
        **over,
    }


def test_controllers_become_one_stack_each_with_quicsm_cc(tmp_path: Path) -> None:
    stacks = load_stacks(_write(tmp_path, [_entry(controllers=["newreno", "cubic", "bbr"])]))
    assert [s.key for s in stacks] == [
        "quinn@0.11.12/newreno",
        "quinn@0.11.12/cubic",
        "quinn@0.11.12/bbr",
    ]
    assert [s.env for s in stacks] == [{"X": "1", CC_ENV: cc} for cc in ("newreno", "cubic", "bbr")]
    assert {s.cc_algorithm for s in stacks} == {"newreno", "cubic", "bbr"}


def test_entry_without_controllers_is_one_unlabelled_stack(tmp_path: Path) -> None:
    (stack,) = load_stacks(_write(tmp_path, [_entry()]))
    assert (stack.key, stack.cc_algorithm, stack.env) == ("quinn@0.11.12", "", {"X": "1"})


@pytest.mark.parametrize(
    ("controllers", "message"),
    [
        ([], "non-empty list"),
        ("cubic", "non-empty list"),
        (["Cubic"], "lower-case names"),
        (["cubic", ""], "lower-case names"),
        (["cubic", "cubic"], "lists a name twice"),
    ],
)
def test_bad_controllers_name_file_and_entry(
    tmp_path: Path, controllers: object, message: str
) -> None:
    path = _write(tmp_path, [_entry(), _entry(controllers=controllers)])
    with pytest.raises(InputError, match=message) as info:
        load_stacks(path)
    assert f"{path}: entry 2" in str(info.value)
    assert isinstance(info.value, QuicsmError)


@pytest.mark.parametrize(
    ("selector", "keys"),
    [
        ("quinn", ["quinn@0.11.12/newreno", "quinn@0.11.12/bbr"]),
        ("quinn/bbr", ["quinn@0.11.12/bbr"]),
        ("quinn@0.11.12/newreno", ["quinn@0.11.12/newreno"]),
        ("quinn@0.11.12", ["quinn@0.11.12/newreno", "quinn@0.11.12/bbr"]),
        ("quiche", ["quiche@0.30.0/bbr2"]),
    ],
)
def test_selectors(tmp_path: Path, selector: str, keys: list[str]) -> None:
    stacks = load_stacks(
        _write(
            tmp_path,
            [
                _entry(controllers=["newreno", "bbr"]),
                _entry(stack="quiche", version="0.30.0", controllers=["bbr2"]),
            ],
        )
    )
    assert [s.key for s in select_stacks(stacks, (selector,), where="w")] == keys


def test_unknown_selector_lists_what_is_built(tmp_path: Path) -> None:
    stacks = load_stacks(_write(tmp_path, [_entry(controllers=["newreno"])]))
    built = r"'quinn/cubic' is not built \(built: quinn@0.11.12/newreno\)"
    with pytest.raises(InputError, match=built):
        select_stacks(stacks, ("quinn/cubic",), where="w")


names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)


@given(st.lists(names, min_size=1, max_size=5, unique=True), names)
def test_every_stack_matches_its_own_key_and_only_its_controller(
    controllers: list[str], other: str
) -> None:
    stacks = [
        Stack(
            stack="s", version="1", server=("x",), client=("x",), cc_algorithm=cc, env={CC_ENV: cc}
        )
        for cc in controllers
    ]
    for s in stacks:
        assert [t for t in stacks if t.matches(s.key)] == [s]
        assert s.matches("s") and s.matches("s@1")
        assert s.matches(f"s/{other}") == (other == s.cc_algorithm)


def test_run_directory_and_labels_carry_the_controller(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[run]\nrepetitions = 1\n[[scenario]]\nname = "a"\n')
    stack = Stack(
        stack="quiche",
        version="0.30.0",
        server=("s",),
        client=("c",),
        cc_algorithm="bbr2",
        env={CC_ENV: "bbr2"},
    )
    (spec,) = plan_runs(load_plan(path), [stack])
    assert isinstance(spec, RunSpec)
    assert spec.directory(tmp_path) == tmp_path / "quiche/0.30.0/bbr2/a/run-1"


def test_cross_implementation_scenarios_cover_every_condition() -> None:
    """lab/scenarios/stacks.toml: the six conditions, for every built stack and controller."""
    plan = load_plan(ROOT / "lab" / "scenarios" / "stacks.toml")
    names = {s.name for s in plan.scenarios}
    assert names == {"baseline", "loss1", "jitter", "ratecap", "outage", "slowdevice"}
    assert all(s.stacks == () for s in plan.scenarios)  # () = every built stack and controller
    by_name = {s.name: s for s in plan.scenarios}
    assert by_name["loss1"].up.loss == pytest.approx(0.01)
    assert by_name["jitter"].down.jitter_ms > 0
    assert by_name["ratecap"].down.rate_mbit == pytest.approx(10)
    assert by_name["outage"].down.outages
    assert by_name["slowdevice"].device.cpu_percent is not None


def test_kernel_tcp_runs_only_when_named(tmp_path: Path) -> None:
    from quicsm.lab.stacks import KERNEL_TCP, kernel_tcp_stacks, needs_built_stacks

    quic = Stack(stack="quic-go", version="1", server=("s",), client=("c",))
    kernel = kernel_tcp_stacks()
    assert {s.cc_algorithm for s in kernel} <= {"reno", "cubic", "bbr"}
    assert all(s.stack == KERNEL_TCP and s.env["QUICSM_CC"] == s.cc_algorithm for s in kernel)
    scen = tmp_path / "s.toml"
    scen.write_text('[run]\nrepetitions = 1\n[[scenario]]\nname = "x"\n')
    plan = load_plan(scen)
    # a scenario for "every stack" means every built QUIC stack ...
    assert [r.stack for r in plan_runs(plan, [quic, *kernel])] == [quic]
    # ... and the kernel's TCP when it is named
    named = plan_runs(plan, [quic, *kernel], only=("linux-tcp/cubic",))
    assert [r.stack.key for r in named] == [s.key for s in kernel if s.cc_algorithm == "cubic"]
    assert not needs_built_stacks(("linux-tcp", "linux-tcp@6/bbr"))
    assert needs_built_stacks(()) and needs_built_stacks(("linux-tcp", "quinn"))


def _stamp(*paths: Path) -> str:
    import hashlib

    return hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()[:16]


def test_a_stack_built_from_changed_sources_is_refused_when_planned(tmp_path: Path) -> None:
    patch, lab = tmp_path / "v1.patch", tmp_path / "main.go"
    patch.write_text("--- a\n+++ b\n")
    lab.write_text("package main\n")
    sources = [str(patch), str(lab)]
    entry = _entry(controllers=["cubic"], stamp=_stamp(patch, lab), sources=sources)
    (fresh,) = load_stacks(_write(tmp_path, [entry]))
    assert fresh.stale == ""
    scen = tmp_path / "s.toml"
    scen.write_text('[run]\nrepetitions = 1\n[[scenario]]\nname = "x"\n')
    assert [r.stack for r in plan_runs(load_plan(scen), [fresh])] == [fresh]

    lab.write_text("package main\n// a flag added since the build\n")
    (old,) = load_stacks(_write(tmp_path, [entry]))
    assert "quinn 0.11.12" in old.stale and "v1.patch, main.go changed since" in old.stale
    refused = r"entry 1 \(quinn 0.11.12\).*rebuild it with scripts/setup"
    with pytest.raises(InputError, match=refused):
        plan_runs(load_plan(scen), [old])
    # a stack not planned is not in the way
    other = Stack(stack="quic-go", version="1", server=("s",), client=("c",))
    assert [r.stack for r in plan_runs(load_plan(scen), [other, old], only=("quic-go",))] == [other]

    lab.unlink()
    (gone,) = load_stacks(_write(tmp_path, [entry]))
    assert f"its source {lab} is gone" in gone.stale


@pytest.mark.parametrize(
    "over",
    [{"stamp": "ab"}, {"sources": ["/x"]}, {"stamp": 1, "sources": ["/x"]},
     {"stamp": "a", "sources": []}, {"stamp": "a", "sources": [1]}],
)  # fmt: skip
def test_a_malformed_stamp_names_file_and_entry(tmp_path: Path, over: dict[str, object]) -> None:
    with pytest.raises(InputError, match=r"stacks.json: entry 1: expected .*sources"):
        load_stacks(_write(tmp_path, [_entry(**over)]))


def test_build_script_records_the_stamp_the_lab_checks(tmp_path: Path) -> None:
    """The shell's built_from and hash_of, run as build.sh defines them, give the members the
    lab reads and a stamp it computes again."""
    import subprocess

    script = (ROOT / "instrumentation-patches" / "build.sh").read_text()
    helpers = "\n".join(
        line for line in script.splitlines() if line.startswith(("hash_of()", "built_from()"))
    )
    start = script.index("built_from() {")
    body = script[start : script.index("\n}\n", start) + 3]
    a, b = tmp_path / "one.patch", tmp_path / "lab" / "main.rs"
    b.parent.mkdir()
    a.write_text("one\n")
    b.write_text("two\n")
    shell = (
        f"{helpers.splitlines()[0]}\n{body}\n"
        f'stamp="$(hash_of {a} {b})"\n'
        'printf \'[{"stack": "s", "version": "1", "server": ["/bin/q"], '
        '"client": ["/bin/q"]%s}]\' '
        f'"$(built_from "$stamp" {a} {b})"\n'
    )
    out = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, check=True).stdout
    entry = json.loads(out)[0]
    assert entry["sources"] == [str(a), str(b)] and entry["stamp"] == _stamp(a, b)
    path = tmp_path / "stacks.json"
    path.write_text(out)
    assert load_stacks(path)[0].stale == ""
