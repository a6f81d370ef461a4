"""Paths are input too: names that are not UTF-8, hold a NUL or are too long, and FIFOs and
devices are InputError for every reader and the CLI (no traceback, no blocking read); every
output goes through one atomic writer that does not follow a symbolic link at the final path,
and the leftovers of a killed run are removed by the next one."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from quicsm.cli import main
from quicsm.core.atomic import TEMP_PREFIX, clean_stale, write_file
from quicsm.core.errors import InputError
from quicsm.extract.read import read_metrics, read_traces, read_transitions
from quicsm.qlog.inspect import inspect_file

FIXTURE = Path(__file__).parent / "fixtures" / "qlog" / "quicgo_0.3.sqlog"
READERS: list[Callable[[str], object]] = [read_transitions, read_metrics, read_traces, inspect_file]


def _hostile_paths(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """name -> (path, what the error says)."""
    odd = tmp_path / os.fsdecode(b"bad\xff.sqlog")
    odd.write_bytes(FIXTURE.read_bytes())
    fifo = tmp_path / "fifo.sqlog"
    os.mkfifo(fifo)
    folder = tmp_path / os.fsdecode(b"dir\xfe")
    folder.mkdir()
    (folder / "t.sqlog").write_bytes(FIXTURE.read_bytes())
    return {
        "not-utf8": (str(odd), r"bad\\xff\.sqlog'?: file names must be UTF-8"),
        "not-utf8-dir": (str(folder), r"dir\\xfe.*file names must be UTF-8"),
        "too-long": (str(tmp_path / ("a" * 5000 + ".sqlog")), r"aaa.*(too long|no such file)"),
        "nul": (str(tmp_path / "x\0y.sqlog"), r"x\\x00y\.sqlog'?: a path may not contain a NUL"),
        "fifo": (str(fifo), r"fifo\.sqlog'?:? (is neither a file|cannot read: not a regular)"),
        "device": ("/dev/null", r"/dev/null'?:? (is neither a file|cannot read: not a regular)"),
    }


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.__name__)
def test_hostile_paths_are_input_errors_for_every_reader(
    tmp_path: Path, reader: Callable[[str], object]
) -> None:
    for name, (path, message) in _hostile_paths(tmp_path).items():
        if reader is inspect_file and name == "not-utf8-dir":
            continue  # inspect takes one file
        with pytest.raises(InputError, match=message):
            reader(path)


@pytest.mark.parametrize("command", ["infer", "inspect", "states"])
def test_hostile_paths_are_one_error_line_in_the_cli(tmp_path: Path, command: str) -> None:
    for name, (path, _) in _hostile_paths(tmp_path).items():
        if command == "inspect" and name == "not-utf8-dir":
            continue
        args = [command, path] + (["-o", str(tmp_path / "out")] if command == "infer" else [])
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 1, (name, result.output)
        assert result.stderr.startswith("Error: ") and "Traceback" not in result.output, name
        result.stderr.encode("utf-8")  # printable: no surrogate escapes


def test_a_fifo_does_not_block_a_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "f.sqlog"
    os.mkfifo(fifo)
    code = (
        "import sys\nfrom quicsm.core.errors import InputError\n"
        "from quicsm.qlog.inspect import inspect_file\nfrom quicsm.qlog.source import read_qlog\n"
        "from pathlib import Path\n"
        f"for read in (inspect_file, read_qlog):\n"
        f"    try:\n        read(Path({str(fifo)!r}))\n"
        "    except InputError as exc:\n        print('INPUT', exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    ).stdout
    assert out.count("INPUT") == 2, out


# -- outputs -------------------------------------------------------------------------------------


def test_write_file_replaces_atomically_and_keeps_permissions(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    write_file(target, "one")
    assert target.read_text() == "one"
    target.chmod(0o640)
    write_file(target, b"two")
    assert target.read_bytes() == b"two"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_write_file_does_not_follow_a_symbolic_link_unless_asked(tmp_path: Path) -> None:
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("precious")
    link = tmp_path / "report.html"
    link.symlink_to(victim)
    with pytest.raises(InputError, match=r"report\.html: is a symbolic link"):
        write_file(link, "report")
    assert victim.read_text() == "precious" and link.is_symlink()
    write_file(link, "report", follow_symlinks=True)
    assert victim.read_text() == "report" and link.is_symlink()
    (tmp_path / "d").mkdir()
    with pytest.raises(InputError, match="not a regular file"):
        write_file(tmp_path / "d", "x")


def test_report_cli_refuses_a_symbolic_link_at_its_output(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "report.md"
    link.symlink_to(victim)
    result = CliRunner().invoke(
        main, ["report", str(FIXTURE), "--vs", str(FIXTURE), "-o", str(link)]
    )
    assert result.exit_code == 1, result.output
    assert "is a symbolic link" in result.stderr and "Traceback" not in result.output
    assert victim.read_text() == "precious"


@pytest.mark.parametrize(
    ("command", "name", "written"),
    [
        (["report", str(FIXTURE), "--vs", str(FIXTURE)], "report.md", "# "),
        (
            ["diff", str(FIXTURE), "--vs", str(FIXTURE), "--format", "md"],
            "diff.md",
            "## quicsm diff",
        ),
        (["plot", f"{FIXTURE}#0"], "plot.html", "<!DOCTYPE html>"),
    ],
    ids=["report", "diff", "plot"],
)
def test_follow_symlinks_writes_the_file_a_link_at_the_output_names(
    tmp_path: Path, command: list[str], name: str, written: str
) -> None:
    """Every command writing one file (-o FILE) refuses a link there before any work, and with
    --follow-symlinks replaces the file the link points to (the link stays a link)."""
    victim = tmp_path / "elsewhere" / "target.txt"
    victim.parent.mkdir()
    victim.write_text("precious")
    victim.chmod(0o640)
    link = tmp_path / name
    link.symlink_to(victim)
    refused = CliRunner().invoke(main, [*command, "-o", str(link)])
    assert refused.exit_code == 1, refused.output
    assert f"{link}: is a symbolic link" in refused.stderr and "Traceback" not in refused.output
    assert victim.read_text() == "precious"
    followed = CliRunner().invoke(main, [*command, "-o", str(link), "--follow-symlinks"])
    assert followed.exit_code == 0, followed.output
    assert link.is_symlink() and link.resolve() == victim.resolve()
    assert victim.read_text().lstrip().startswith(written), victim.read_text()[:200]
    assert stat.S_IMODE(victim.stat().st_mode) == 0o640  # the replaced file's permissions
    assert sorted(p.name for p in victim.parent.iterdir()) == ["target.txt"]  # no leftovers


def _killed_while_writing(directory: Path, name: str) -> None:
    """A child process that starts writing ``name`` into ``directory`` and is killed (SIGKILL)
    before it finishes: what it leaves behind is what a killed run leaves."""
    code = (
        "import os, signal, tempfile\n"
        "from quicsm.core.atomic import temp_prefix\n"
        f"fd, p = tempfile.mkstemp(prefix=temp_prefix({name!r}), dir={str(directory)!r})\n"
        "os.write(fd, b'partial')\n"
        f"tempfile.mkdtemp(prefix=temp_prefix('outputs'), dir={str(directory)!r})\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert proc.returncode == -signal.SIGKILL


def test_the_leftovers_of_a_killed_run_are_removed_by_the_next(tmp_path: Path) -> None:
    _killed_while_writing(tmp_path, "report.html")
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 2 and all(n.startswith(TEMP_PREFIX) for n in left)
    # another process's temporary file that is still running is left alone
    alive = tmp_path / f"{TEMP_PREFIX}{os.getppid()}-x-abc"
    alive.write_text("in progress")
    write_file(tmp_path / "report.html", "done")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["report.html", alive.name])
    assert clean_stale(tmp_path) == []


def test_infer_removes_what_a_killed_infer_left(tmp_path: Path) -> None:
    out = tmp_path / "model"
    first = CliRunner().invoke(main, ["infer", str(FIXTURE), "-o", str(out), "--format", "dot"])
    assert first.exit_code == 0, first.output
    _killed_while_writing(out, "model.json")  # killed while replacing the outputs
    _killed_while_writing(tmp_path, "model")  # killed while creating the directory
    assert any(p.name.startswith(TEMP_PREFIX) for p in out.iterdir())
    again = CliRunner().invoke(main, ["infer", str(FIXTURE), "-o", str(out), "--format", "dot"])
    assert again.exit_code == 0, again.output
    assert not [p for p in out.iterdir() if p.name.startswith(TEMP_PREFIX)]
    new = tmp_path / "model2"
    third = CliRunner().invoke(main, ["infer", str(FIXTURE), "-o", str(new), "--format", "dot"])
    assert third.exit_code == 0, third.output
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(TEMP_PREFIX)]
