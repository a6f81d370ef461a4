"""`quicsm lab` on the command line: dry runs, packing, and errors as `Error: ...`."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from quicsm.cli import main


def _stacks(tmp_path: Path) -> Path:
    path = tmp_path / "stacks.json"
    path.write_text(
        json.dumps(
            [
                {"stack": "a", "version": "1", "server": ["srv"], "client": ["cli"]},
                {"stack": "b", "version": "2", "server": ["srv"], "client": ["cli"]},
            ]
        )
    )
    return path


def test_dry_run_lists_every_run(tmp_path: Path) -> None:
    scen = tmp_path / "s.toml"
    scen.write_text('[run]\nrepetitions = 2\n[[scenario]]\nname = "x"\n[[scenario]]\nname = "y"\n')
    result = CliRunner().invoke(
        main,
        [
            "lab",
            "run",
            str(scen),
            "--stacks",
            str(_stacks(tmp_path)),
            "-o",
            "out",
            "--dry-run",
            "--only",
            "y",
            "--stack",
            "b",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line.split()[0] for line in lines] == ["out/b/2/y/run-1", "out/b/2/y/run-2"]


def test_unknown_stack_and_bad_scenario_are_errors(tmp_path: Path) -> None:
    scen = tmp_path / "s.toml"
    scen.write_text('[[scenario]]\nname = "x"\nstacks = ["c"]\n')
    result = CliRunner().invoke(
        main, ["lab", "run", str(scen), "--stacks", str(_stacks(tmp_path)), "--dry-run"]
    )
    assert result.exit_code == 1
    # the built stacks, then the kernel's TCP with each controller it offers
    assert "stack 'c' is not built (built: a@1, b@2" in result.output
    scen.write_text('[[scenario]]\nname = "x"\nnetwork = { loss = 5 }\n')
    result = CliRunner().invoke(main, ["lab", "run", str(scen), "--dry-run"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and "loss must be a probability" in result.output


def test_missing_stacks_file_says_how_to_build(tmp_path: Path) -> None:
    scen = tmp_path / "s.toml"
    scen.write_text('[[scenario]]\nname = "x"\n')
    result = CliRunner().invoke(
        main, ["lab", "run", str(scen), "--stacks", str(tmp_path / "none.json")]
    )
    assert result.exit_code == 1
    # outside a checkout (no instrumentation-patches/build.sh beside the file): what to run
    assert "no built stacks. Build them in a checkout of quicsm with scripts/setup --lab" in (
        result.output
    )
    assert "Traceback" not in result.output


def test_missing_stacks_are_built_on_first_use_from_a_checkout(tmp_path: Path) -> None:
    """In a checkout, `quicsm lab run` builds the stacks when build/stacks.json is missing (here
    a stand-in build.sh that fails, as one does without its tools: the error says so)."""
    scen = tmp_path / "s.toml"
    scen.write_text('[[scenario]]\nname = "x"\n')
    build = tmp_path / "instrumentation-patches" / "build.sh"
    build.parent.mkdir()
    build.write_text("#!/bin/sh\necho 'build.sh: ERROR: the Go toolchain is needed' >&2\nexit 1\n")
    build.chmod(0o755)
    stacks = tmp_path / "build" / "stacks.json"
    result = CliRunner().invoke(main, ["lab", "run", str(scen), "--stacks", str(stacks)])
    assert result.exit_code == 1
    assert "no built stacks yet; building them first" in result.output
    assert "build.sh failed (exit code 1)" in result.output


def test_pack_reports_traces_and_skipped_runs(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "a" / "1" / "x" / "run-1"
    run.mkdir(parents=True)
    (run / "server.sqlog").write_bytes(
        b'\x1e{"qlog_version":"0.3","qlog_format":"JSON-SEQ","trace":{}}\n'
        b'\x1e{"time":1,"name":"recovery:congestion_state_updated","data":{"new":"SlowStart"}}\n'
    )
    (run / "run.json").write_text(
        json.dumps({"stack": "a", "status": "ok", "files.server": "server.sqlog"})
    )
    failed = tmp_path / "runs" / "a" / "1" / "x" / "run-2"
    failed.mkdir()
    (failed / "run.json").write_text(json.dumps({"status": "failed", "reason": "boom"}))
    out = tmp_path / "p.qlog"
    result = CliRunner().invoke(main, ["lab", "pack", str(tmp_path / "runs"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "1 traces from 1 runs, 1 events" in result.output
    assert "(1 runs skipped)" in result.output and "status failed: boom" in result.output
    assert out.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"


def test_pack_keeps_only_the_asked_roles_and_events(tmp_path: Path) -> None:
    from quicsm.extract.read import read_metrics, read_traces

    run = tmp_path / "runs" / "a" / "1" / "x" / "run-1"
    run.mkdir(parents=True)
    header = b'\x1e{"qlog_version":"0.3","qlog_format":"JSON-SEQ","trace":{}}\n'
    events = (
        b'\x1e{"time":1,"name":"transport:packet_sent","data":{"header":{"packet_number":0}}}\n'
        b'\x1e{"time":2,"name":"recovery:metrics_updated","data":{"congestion_window":14720}}\n'
        b'\x1e{"time":3,"name":"recovery:packet_lost","data":{"header":{"packet_number":0}}}\n'
    )
    (run / "server.sqlog").write_bytes(header + events)
    (run / "client.sqlog").write_bytes(header + events)
    (run / "run.json").write_text(json.dumps({"stack": "a", "status": "ok"}))
    out = tmp_path / "p.qlog"
    args = ["lab", "pack", str(tmp_path / "runs"), "-o", str(out), "--role", "server"]
    result = CliRunner().invoke(main, [*args, "--events", "metrics_updated,packet_lost"])
    assert result.exit_code == 0, result.output
    assert "1 traces from 1 runs, 2 events" in result.output
    traces = read_traces(str(out))
    assert traces.height == 1
    labels = json.loads(traces["labels"][0])
    assert labels["role"] == "server"
    assert labels["events_kept"] == "metrics_updated,packet_lost"
    assert read_metrics(str(out)).get_column("event").to_list() == ["metrics", "packet_lost"]
