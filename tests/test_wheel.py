"""The package as users install it: `maturin build` makes one abi3 wheel holding quicsm and its
native core, and that wheel installs into a clean virtualenv and runs `quicsm infer` on the
shipped traces with no Rust toolchain on PATH."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _run(argv: list[str | Path], **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(a) for a in argv],
        capture_output=True,
        text=True,
        check=False,
        **kw,  # type: ignore[call-overload]
    )
    assert proc.returncode == 0, f"{argv}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_the_wheel_installs_and_runs_without_rust(tmp_path: Path) -> None:
    maturin = Path(sys.executable).parent / "maturin"
    assert maturin.exists(), "maturin is part of the test extra"
    env = dict(os.environ, CARGO_TARGET_DIR=str(ROOT / "build" / "native-target"))
    if (Path.home() / ".cargo" / "bin").is_dir():
        env["PATH"] = f"{env['PATH']}:{Path.home() / '.cargo' / 'bin'}"
    dist = tmp_path / "dist"
    _run([maturin, "build", "--release", "--quiet", "-o", dist], cwd=ROOT, env=env)
    wheels = list(dist.glob("*.whl"))
    assert len(wheels) == 1, wheels
    wheel = wheels[0]
    assert "-cp311-abi3-" in wheel.name, wheel.name  # one wheel for every CPython >= 3.11
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("quicsm/_native") and n.endswith(".so") for n in names)
    assert "quicsm/core/tables.json" in names and "quicsm/py.typed" in names
    assert not any(n.startswith(("tests/", "native/", "traces/")) for n in names)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv])
    _run(
        [
            venv / "bin" / "python",
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            wheel,
        ]
    )
    # no cargo, no rustc: only the system's directories and the new venv
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CARGO", "RUST"))}
    clean["PATH"] = f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin"
    clean.pop("PYTHONPATH", None)
    version = _run([venv / "bin" / "quicsm", "--version"], env=clean, cwd=tmp_path)
    assert "state deriver: native (quicsm._native " in version.stdout
    out = tmp_path / "out"
    _run(
        [venv / "bin" / "quicsm", "infer", ROOT / "traces" / "aioquic-1.7.2.qlog", "-o", out, "-q"],
        env=clean,
        cwd=tmp_path,
    )
    assert (out / "model.svg").read_bytes().lstrip().startswith((b"<?xml", b"<svg"))
    assert (out / "model.json").stat().st_size > 0
