"""scripts/setup as a user meets it: quiet when everything is in place (no build-backend, pip or
debconf chatter), and its options documented by --help."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_setup_again_is_quiet() -> None:
    """A second run (what every scripts/test run does) rebuilds the package with its native core
    and prints one line: no warnings, no build output."""
    env = dict(os.environ)
    proc = subprocess.run(
        [str(ROOT / "scripts" / "setup")], capture_output=True, text=True, env=env, timeout=900,
        check=False, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "setup: done\n", proc.stdout
    assert proc.stderr == "", proc.stderr


def test_setup_help_names_every_option() -> None:
    proc = subprocess.run(
        [str(ROOT / "scripts" / "setup"), "--help"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0
    for option in ("--test", "--lab", "--all"):
        assert option in proc.stdout
    bad = subprocess.run(
        [str(ROOT / "scripts" / "setup"), "--nope"], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2 and "unknown option --nope" in bad.stderr


@pytest.mark.slow
def test_setup_without_rust_finishes_with_the_python_deriver(tmp_path: Path) -> None:
    """On a machine without cargo, scripts/setup still sets quicsm up (its Python deriver), says
    so in one line, and the README's first command reaches a model."""
    clone = tmp_path / "quicsm"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=300)
    home = tmp_path / "home"  # no ~/.cargo here
    home.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    for tool in ("cargo", "rustc"):
        assert subprocess.run(["bash", "-c", f"command -v {tool}"], env=env,
                              capture_output=True, check=False).returncode != 0
    proc = subprocess.run(
        ["bash", "-c", "scripts/setup && .venv/bin/quicsm infer traces/*.qlog -o out -q"
                       " && .venv/bin/quicsm --version"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=1200, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    notes = [line for line in proc.stdout.splitlines() if line.startswith("setup: note:")]
    assert len(notes) == 1 and "Python deriver" in notes[0] and "rustup" in notes[0]
    assert "state deriver: Python (the native core was not built" in proc.stdout
    assert (clone / "out" / "model.svg").stat().st_size > 0
