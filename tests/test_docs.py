"""The docs tell the truth: the CLI reference matches --help and every command is documented."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from quicsm.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parent.parent


def _load_gen() -> object:
    spec = importlib.util.spec_from_loader(
        "gen_cli_docs",
        importlib.machinery.SourceFileLoader(
            "gen_cli_docs", str(ROOT / "scripts" / "gen_cli_docs")
        ),
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_current() -> None:
    gen = _load_gen()
    assert (ROOT / "docs" / "cli.md").read_text() == gen.render(), (  # type: ignore[attr-defined]
        "docs/cli.md is stale: run scripts/gen_cli_docs"
    )


def test_every_command_is_in_the_reference_and_user_guide() -> None:
    reference = (ROOT / "docs" / "cli.md").read_text()
    guide = (ROOT / "docs" / "guide.md").read_text()
    for name in COMMANDS:
        assert f"`quicsm {name}`" in reference
        assert f"quicsm {name}" in guide, f"docs/guide.md does not mention `quicsm {name}`"


def test_every_command_has_help() -> None:
    runner = CliRunner()
    for name in COMMANDS:
        result = runner.invoke(main, [name, "--help"])
        assert result.exit_code == 0, result.output
        assert "Usage:" in result.output


def test_readme_commands_are_the_ones_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    blocks = re.findall(r"```(?:sh|bash|console)\n(.*?)```", readme, re.S)
    commands = [line for b in blocks for line in b.splitlines() if line.strip()]
    assert "scripts/test" in commands, "README must give the test command scripts/test"
    assert "scripts/test" in ci


def test_module_entry_point_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "quicsm", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("quicsm, version ")
    assert "state deriver: native (quicsm._native " in out.stdout  # scripts/setup built it


def test_unknown_command_is_a_clean_error() -> None:
    result = CliRunner().invoke(main, ["no-such-command"])
    assert result.exit_code == 2
    assert "No such command 'no-such-command'" in result.output
    assert isinstance(main, click.Group)


def test_one_version_everywhere() -> None:
    """quicsm's version as the package says it, as pyproject.toml (what maturin builds) says it,
    and as the native crate says it."""
    import tomllib

    from quicsm import _native
    from quicsm.core.version import __version__

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    crate = tomllib.loads((ROOT / "native" / "Cargo.toml").read_text())["package"]
    assert project["version"] == __version__ == crate["version"] == _native.__version__
