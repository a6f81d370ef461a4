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
