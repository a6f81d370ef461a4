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
        [str(ROOT / "scripts" / "setup")],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
        cwd=ROOT,
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
        assert (
            subprocess.run(
                ["bash", "-c", f"command -v {tool}"], env=env, capture_output=True, check=False
            ).returncode
            != 0
        )
    proc = subprocess.run(
        [
            "bash",
            "-c",
            "scripts/setup && .venv/bin/quicsm infer traces/*.qlog -o out -q"
            " && .venv/bin/quicsm --version",
        ],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    notes = [line for line in proc.stdout.splitlines() if line.startswith("setup: note:")]
    assert len(notes) == 1 and "Python deriver" in notes[0] and "rustup" in notes[0]
    assert "state deriver: Python (the native core was not built" in proc.stdout
    assert (clone / "out" / "model.svg").stat().st_size > 0


# holds an fcntl lock on argv[1] (as apt and dpkg do) until killed, after saying so
_HOLD = (
    "import fcntl, sys, time\n"
    "f = open(sys.argv[1], 'r+'); fcntl.lockf(f, fcntl.LOCK_EX)\n"
    "print('held', flush=True); time.sleep(float(sys.argv[2]))\n"
)


def _hold(lock: Path, seconds: float) -> subprocess.Popen[str]:
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(lock), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def _wait_for_apt(lock: Path, wait_s: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QUICSM_APT_LOCKS": str(lock), "QUICSM_APT_LOCK_WAIT": str(wait_s)}
    return subprocess.run(
        [str(ROOT / "scripts" / "wait_for_apt")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_setup_waits_for_another_package_manager_then_goes_on(tmp_path: Path) -> None:
    """Another apt or dpkg holding the lock (unattended upgrades on a fresh machine) is waited
    for with one line naming it, then set-up goes on; nothing held, nothing said."""
    import time

    lock = tmp_path / "lock-frontend"
    lock.write_bytes(b"")
    free = _wait_for_apt(lock, 30)
    assert (free.returncode, free.stdout, free.stderr) == (0, "", "")
    holder = _hold(lock, 3)
    start = time.monotonic()
    proc = _wait_for_apt(lock, 30)
    waited = time.monotonic() - start
    holder.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"setup: another package manager (pid {holder.pid}, python")
    assert "holds the dpkg lock; waiting for it (at most 30 s" in lines[0]
    assert lines[1].startswith("setup: the dpkg lock was released after ")
    assert len(lines) == 2 and proc.stderr == ""
    assert waited >= 1.5, waited


def test_setup_gives_up_on_a_lock_held_past_its_timeout_in_one_line(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    lock.write_bytes(b"")
    holder = _hold(lock, 60)
    try:
        proc = _wait_for_apt(lock, 1)
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 1
    assert proc.stderr == (
        f"setup: ERROR: the dpkg lock is still held by pid {holder.pid} after 1 s; re-run "
        "scripts/setup when it is done (or raise QUICSM_APT_LOCK_WAIT)\n"
    )
