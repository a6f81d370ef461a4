"""Every shell example in README.md and docs/*.md works — the examples of every command's
``--help`` included (docs/cli.md is generated from them).

Each command line of a ```sh block (``\\`` continuations joined, trailing ``# comments``
dropped) is one test case; an ``&&`` chain runs only when every command in it can, else every
command in it is checked as below:

- ``quicsm ...`` runs, in a scratch directory holding a copy of the shipped corpus ``traces/``
  (and ``lab/``), and must exit 0 — or 3 with ``--fail-on-significant`` — with no traceback;
- ``quicsm lab run`` (minutes of emulated transfers through the built stacks) and the
  benchmarks are too long for a unit test: their program must exist and every option the
  example uses must be one its ``--help`` lists (so must those of the commands chained to them);
  the notebook runner must exist and its arguments must name notebooks;
- ``scripts/setup``, ``scripts/test`` and ``instrumentation-patches/build.sh`` are what CI itself
  runs (``.ci/run``); their example must name an executable file;
- building and installing the wheel (``maturin build``, ``pip``/``pipx install``) is what
  ``tests/test_wheel.py`` does; ``maturin build`` must list the options the example uses;
- shell plumbing (``rm``, ``.``) is left alone; any other program fails the test, so a new kind
  of example has to be classified here.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
TIMEOUT_S = 600
#: the exit status of `quicsm diff --fail-on-significant` when something differs
EXIT_SIGNIFICANT = 3
#: what a CI job runs itself
CI_SCRIPTS = {"scripts/setup", "scripts/test", "instrumentation-patches/build.sh"}
SHELL_PLUMBING = {"rm", ".", "source", "cd"}
#: building and installing the wheel: tests/test_wheel.py does what these examples show
PACKAGING = {".venv/bin/maturin", "maturin", "pipx", "pip"}


@dataclass(frozen=True)
class Example:
    where: str  # file:line
    command: str  # one line, perhaps an && chain

    @property
    def parts(self) -> list[str]:
        return [p.strip() for p in self.command.split("&&")]

    def __str__(self) -> str:
        return f"{self.where}: {self.command}"


def _blocks(path: Path, text: str) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of each shell block; in docs/cli.md (the ``--help`` texts)
    the example lines of every block."""
    out = []
    if path.name == "cli.md":
        for block in re.finditer(r"```text\n(.*?)```", text, re.S):
            first = text.count("\n", 0, block.start(1)) + 1
            lines = block.group(1).splitlines()
            i = 0
            while i < len(lines):
                if re.match(r"\s+quicsm \w", lines[i]):
                    j = i
                    while lines[j].rstrip().endswith("\\"):
                        j += 1
                    out.append((first + i, [x.strip() for x in lines[i : j + 1]]))
                    i = j
                i += 1
        return out
    for block in re.finditer(r"```(?:sh|bash|shell)\n(.*?)```", text, re.S):
        out.append((text.count("\n", 0, block.start(1)) + 1, block.group(1).splitlines()))
    return out


def examples() -> list[Example]:
    out = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for first_line, lines in _blocks(path, text):
            i = 0
            while i < len(lines):
                start = i
                line = lines[i]
                while line.rstrip().endswith("\\") and i + 1 < len(lines):
                    i += 1
                    line = line.rstrip()[:-1] + " " + lines[i].strip()
                i += 1
                line = re.sub(r"\s+#\s.*$", "", line).strip()
                if not line:
                    continue
                out.append(Example(f"{path.relative_to(ROOT)}:{first_line + start}", line))
    return out


EXAMPLES = examples()


def test_examples_were_found() -> None:
    assert len(EXAMPLES) > 15
    assert any(e.command.startswith("quicsm plot") or "quicsm plot" in e.command for e in EXAMPLES)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import shutil

    root = tmp_path_factory.mktemp("docs-examples")
    # copies: an example that writes into traces/ must not change the repository's corpus
    shutil.copytree(ROOT / "traces", root / "traces")
    shutil.copytree(ROOT / "lab", root / "lab")
    return root


def _tokens(command: str) -> list[str]:
    return shlex.split(command)


def _program(tokens: list[str]) -> str:
    program = tokens[0]
    return "quicsm" if program in ("quicsm", ".venv/bin/quicsm") else program


def _options(tokens: list[str]) -> list[str]:
    return [t.split("=", 1)[0] for t in tokens if t.startswith("-") and t != "-"]


def _help_lists_options(argv: list[str], options: list[str], example: Example) -> None:
    done = subprocess.run(
        [*argv, "--help"], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )
    assert done.returncode == 0, f"{example}: {' '.join(argv)} --help failed: {done.stderr}"
    for option in options:
        assert re.search(rf"(^|[\s,\[]){re.escape(option)}\b", done.stdout), (
            f"{example}: {option} is not an option of {' '.join(argv)}"
        )


def _runnable(tokens: list[str]) -> bool:
    program = _program(tokens)
    return program in SHELL_PLUMBING or (program == "quicsm" and tokens[1:3] != ["lab", "run"])


def _check_statically(tokens: list[str], example: Example) -> None:
    program = _program(tokens)
    if program in SHELL_PLUMBING:
        return
    if program in CI_SCRIPTS:
        assert os.access(ROOT / program, os.X_OK), f"{example}: {program} is not executable"
        return
    if program in PACKAGING:
        if program.endswith("maturin"):
            assert tokens[1] == "build", example
            _help_lists_options([str(BIN / "maturin"), "build"], _options(tokens[2:]), example)
        else:
            assert tokens[1] == "install" and tokens[-1].endswith(".whl"), example
        return
    if program.endswith("/python") or program == "python":
        rest = tokens[1:]
        if rest[:2] == ["-m", "pytest"]:
            assert all((ROOT / t).exists() for t in rest[2:] if not t.startswith("-")), example
            return
        script = ROOT / rest[0]
        assert script.is_file(), f"{example}: no such script {rest[0]}"
        if rest[0] == "scripts/run_notebooks":
            for pattern in rest[1:]:
                assert list((ROOT / "notebooks").glob(pattern)), f"{example}: no {pattern}"
            return
        _help_lists_options([sys.executable, str(script)], _options(rest[1:]), example)
        return
    assert program == "quicsm", f"{example}: unknown program {program!r}; classify it here"
    sub = [t for t in tokens[1:3] if not t.startswith("-")]
    sub = sub[:2] if sub[:1] == ["lab"] else sub[:1]
    _help_lists_options([str(BIN / "quicsm"), *sub], _options(tokens[1 + len(sub) :]), example)
    assert all((ROOT / a).exists() for a in tokens if a.endswith(".toml")), example


@pytest.mark.parametrize("example", EXAMPLES, ids=str)
def test_example(example: Example, scratch: Path) -> None:
    parts = [_tokens(p) for p in example.parts]
    if not all(_runnable(t) for t in parts) or all(_program(t) in SHELL_PLUMBING for t in parts):
        for tokens in parts:
            _check_statically(tokens, example)
        return
    command = " && ".join(re.sub(r"^(\.venv/bin/)?quicsm\b", "quicsm", p) for p in example.parts)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    allowed = {0, EXIT_SIGNIFICANT} if "--fail-on-significant" in command else {0}
    assert done.returncode in allowed, f"{example}: exit {done.returncode}\n{done.stderr}"
    assert "Traceback" not in done.stderr, f"{example}:\n{done.stderr}"


def test_static_checks_can_fail() -> None:
    bad = Example("x.md:1", ".venv/bin/python benchmarks/bench_stats.py --no-such-option")
    with pytest.raises(AssertionError, match="--no-such-option is not an option"):
        _check_statically(_tokens(bad.command), bad)
    bad = Example("x.md:1", "quicsm lab run lab/scenarios/none.toml --nope")
    with pytest.raises(AssertionError):
        _check_statically(_tokens(bad.command), bad)
    bad = Example("x.md:1", "curl http://example")
    with pytest.raises(AssertionError, match="unknown program"):
        _check_statically(_tokens(bad.command), bad)


def test_node_counts_quoted_in_model_md() -> None:
    """docs/model.md quotes how many nodes each picture of the shipped corpus has."""
    from quicsm.extract.read import read_transitions
    from quicsm.model.inference import infer

    text = " ".join((ROOT / "docs" / "model.md").read_text().split())
    quoted = re.search(
        r"on the shipped corpus (\d+) state nodes instead of (\d+) \(each picture adds INITIAL "
        r"and TERMINAL\), (\w+) of them (\w+)",
        text,
    )
    assert quoted is not None, "docs/model.md no longer quotes the node counts"
    synoptic_n, observed_n, split_n, state = quoted.groups()
    # the literal main job: the top-level packs (traces/stacks/ holds the cross-stack pack)
    transitions = read_transitions(sorted((ROOT / "traces").glob("*.qlog")))
    synoptic = infer(transitions, algorithm="synoptic")
    observed = infer(transitions, algorithm="observed")
    words = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
    assert synoptic.nodes.height == int(synoptic_n) + 2  # INITIAL and TERMINAL
    assert observed.nodes.height == int(observed_n) + 2
    assert synoptic.nodes.filter(synoptic.nodes["state"] == state).height == words[split_n]
