"""Every benchmark says what its options mean, and running one with its defaults changes nothing
tracked: results go under build/ (or benchmarks/results/, ignored) unless a file is named, so a
trial run never overwrites the numbers the docs quote."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
#: the benchmarks, and the modules some of them share (``_*.py``: imported, never run)
SCRIPTS = [
    p
    for p in sorted((ROOT / "benchmarks").glob("*.py")) + sorted((ROOT / "benchmarks").glob("*.sh"))
    if not p.name.startswith("_")
]
SHARED = sorted((ROOT / "benchmarks").glob("_*.py"))


def _options_without_help(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    missing = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
            and not any(k.arg == "help" for k in node.keywords)
        ):
            missing.append(f"{path.name}:{node.lineno}: {ast.unparse(node.args[0])}")
    return missing


def test_every_benchmark_option_has_help() -> None:
    assert len(SCRIPTS) > 20
    assert SHARED  # the options two benchmarks share are checked where they are added
    py = [path for path in [*SCRIPTS, *SHARED] if path.suffix == ".py"]
    missing = [m for path in py for m in _options_without_help(path)]
    assert missing == []


def test_the_help_check_finds_an_option_without_help(tmp_path: Path) -> None:
    script = tmp_path / "b.py"
    script.write_text('ap.add_argument("--x", type=int)\nap.add_argument("--y", help="y")\n')
    assert _options_without_help(script) == ["b.py:1: '--x'"]


@given(st.text(alphabet="01", max_size=40), st.lists(st.integers(0, 40), max_size=6))
def test_parts_laid_over_one_another_are_the_whole_run(whole: str, cuts: list[int]) -> None:
    """``--combine`` of the simulation benchmarks: a run split at any repetitions, its parts
    laid over one another in order, is the run; a part laid again changes nothing; a part
    past the end names the repetitions missing."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from _repeated_runs import laid_over
    finally:
        sys.path.pop(0)
    starts = sorted({0, *(c for c in cuts if c < len(whole))})
    ends = [*starts[1:], len(whole)]
    got = ""
    for a, b in zip(starts, ends, strict=True):
        got = "".join(laid_over(got, whole[a:b], a, where=""))
    assert got == whole
    a, b = starts[-1], ends[-1]
    assert "".join(laid_over(got, whole[a:b], a, where="")) == whole
    with pytest.raises(SystemExit, match=f"x: repetitions {len(whole)} to {len(whole)} missing"):
        laid_over(whole, "1", len(whole) + 1, where="x: ")


def _tracked_copy(tmp_path: Path) -> Path:
    """benchmarks/, docs/ and the tests' helpers as committed files of a repository of their
    own (with this checkout's .gitignore), so that whatever a benchmark writes there shows in
    git status."""
    copy = tmp_path / "quicsm"
    skip = shutil.ignore_patterns("results", "data", "fixtures", "golden", "__pycache__")
    for part in ("benchmarks", "docs", "tests"):
        shutil.copytree(ROOT / part, copy / part, ignore=skip)
    shutil.copy(ROOT / ".gitignore", copy / ".gitignore")
    git = ["git", "-C", str(copy), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "copy"], check=True)
    return copy


def _status(copy: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(copy), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


#: a tiny run of each benchmark whose results the docs quote, with its default output
TINY = {
    "ab_sequential.py": [
        "--repetitions",
        "4",
        "--scenarios",
        "1",
        "--max-pairs",
        "12",
        "--fixed-pairs",
        "16",
        "--only",
        "null",
    ],
    "diff_power.py": ["--repetitions", "1", "--sizes", "3", "--alpha", "0.05"],
    "diff_calibration.py": ["--repetitions", "1", "--permutations", "19"],
}


@pytest.mark.slow
def test_benchmarks_with_their_defaults_change_nothing_tracked(tmp_path: Path) -> None:
    """Each benchmark's --help (which must not start the benchmark), and a tiny run with the
    default output of each one whose results the docs quote."""
    copy = _tracked_copy(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for path in SCRIPTS:
        argv = [str(copy / "benchmarks" / path.name), "--help"]
        if path.suffix == ".py":
            argv.insert(0, sys.executable)
        proc = subprocess.run(
            argv, capture_output=True, text=True, env=env, timeout=120, check=False
        )
        assert proc.returncode == 0, f"{path.name} --help: {proc.stderr[-2000:]}"
        assert proc.stdout.strip(), f"{path.name} --help printed nothing"
    for name, args in TINY.items():
        proc = subprocess.run(
            [sys.executable, str(copy / "benchmarks" / name), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=False,
        )
        assert proc.returncode == 0, f"{name}: {proc.stderr[-2000:]}"
        stem = name.removesuffix(".py")
        assert f"written: {copy / 'build' / 'benchmarks' / stem}.json" in proc.stderr
    assert _status(copy) == ""
