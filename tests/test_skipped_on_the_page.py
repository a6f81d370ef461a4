"""What a lenient read skipped is said in the output itself, not only on stderr: ``quicsm
report --lenient`` (HTML: a box above the comparisons and an item of Methods; Markdown: a quote
under the byline and the Methods item) and ``quicsm diff --lenient`` (JSON: a ``skipped`` object
a script can read; Markdown and text: a block before the diff). Each names how many records of
which file were skipped and the first reasons (file, record, line, what was expected, trace);
when nothing was skipped the output is byte for byte the strict one. On a real quic-go trace
cut short in two records (:mod:`test_skipped_once`); in a real browser in
:mod:`test_report_browser`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_skipped_once import BAD_LOSS, BAD_PACKET, _broken

from quicsm.cli import main
from quicsm.core.diagnostics import Diagnostics
from quicsm.render.skipped import skipped_dict, skipped_summary

LOSS_GOT = '{"time":12.5,"name":"recovery:packet_los'
PACKET_GOT = '{"time":13.5,"name":"transport:packet_se'


def _reason(path: Path, record: int, got: str) -> str:
    return (
        f"{path}: record {record} (line {record}): expected a JSON text, got {got!r} "
        f"(trace {path}#0000)"
    )


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A damaged file (records 100 and 101 cut short) and an undamaged one."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    monkeypatch.setenv("QUICSM_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "bad").mkdir()
    (tmp_path / "clean").mkdir()
    return _broken(tmp_path / "bad", BAD_LOSS, BAD_PACKET), _broken(tmp_path / "clean")


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_report_html_says_what_was_skipped(files: tuple[Path, Path], tmp_path: Path) -> None:
    bad, clean = files
    out = tmp_path / "r.html"
    _run("report", str(bad), "--vs", str(clean), "--lenient", "--states", "derived",
         "-o", str(out))  # fmt: skip
    page = out.read_text()
    box = page[page.index('<div class="card" id="skipped"') :]
    box = box[: box.index("</div>") + 6]
    assert f"skipped 2 records (2 of {bad})" in box
    for record, got in ((100, LOSS_GOT), (101, PACKET_GOT)):
        assert _esc(_reason(bad, record, got)) in box
    # above the first comparison, and again in Methods
    assert page.index('id="skipped"') < page.index('class="comparison"')
    assert f"<b>Skipped input</b>: skipped 2 records (2 of {bad})" in page


def _esc(text: str) -> str:
    from quicsm.render.escape import esc

    return esc(text)


def test_report_markdown_says_what_was_skipped(files: tuple[Path, Path], tmp_path: Path) -> None:
    bad, clean = files
    out = tmp_path / "r.md"
    _run("report", str(bad), "--vs", str(clean), "--lenient", "-o", str(out))
    text = out.read_text()
    head = text[: text.index("## quicsm diff")]
    assert f"> **Skipped input (lenient reading):** skipped 2 records (2 of {bad})" in head
    assert f"> - {_reason(bad, 101, PACKET_GOT)}" in head.replace("\\", "")
    assert f"- **Skipped input**: skipped 2 records (2 of {bad})" in text


@pytest.mark.parametrize("suffix", ["html", "md"])
def test_report_of_undamaged_input_is_unchanged(
    files: tuple[Path, Path], tmp_path: Path, suffix: str
) -> None:
    """Nothing skipped: the lenient report is the strict one, byte for byte, with no box."""
    _, clean = files
    other = tmp_path / "clean2.sqlog"
    other.write_bytes(clean.read_bytes())
    pages = []
    for mode in ([], ["--lenient"]):
        out = tmp_path / f"r{len(mode)}.{suffix}"
        _run("report", str(clean), "--vs", str(other), *mode, "-o", str(out))
        pages.append(out.read_bytes())
    assert pages[0] == pages[1]
    assert b"Skipped input" not in pages[1] and b'id="skipped"' not in pages[1]


def test_diff_json_carries_the_skipped_records(files: tuple[Path, Path]) -> None:
    bad, clean = files
    doc = json.loads(
        _run(
            "diff",
            str(bad),
            "--vs",
            str(clean),
            "--lenient",
            "--states",
            "derived",
            "--format",
            "json",
        )  # fmt: skip
    )
    skipped = doc["skipped"]
    assert skipped["records"] == 2 and skipped["files"] == 0
    assert skipped["records_by_file"] == {str(bad): 2}
    assert len(skipped["record_keys"][str(bad)]) == 2
    assert skipped["records_not_placed"] == 0 and skipped["files_skipped_whole"] == []
    assert skipped["reasons"] == [
        _reason(bad, 100, LOSS_GOT),
        _reason(bad, 101, PACKET_GOT),
    ]
    # --by: the groups' one read skips the same records
    by = json.loads(
        _run("diff", str(bad), str(clean), "--by", "vantage", "--lenient", "--format", "json")
    )
    assert by["skipped"]["records_by_file"] == {str(bad): 2}


@pytest.mark.parametrize("fmt", ["json", "md", "table"])
def test_diff_of_undamaged_input_is_unchanged(files: tuple[Path, Path], fmt: str) -> None:
    _, clean = files
    outputs = [
        _run("diff", str(clean), "--vs", str(clean), *mode, "--format", fmt)
        for mode in ([], ["--lenient"])
    ]
    assert outputs[0] == outputs[1]
    assert "skipped" not in outputs[1].lower()


@pytest.mark.parametrize("fmt", ["md", "table"])
def test_diff_text_says_what_was_skipped(files: tuple[Path, Path], fmt: str) -> None:
    bad, clean = files
    text = _run("diff", str(bad), "--vs", str(clean), "--lenient", "--format", fmt)
    first = text.splitlines()[0]
    assert first.startswith(f"{'> **' if fmt == 'md' else 'LENIENT: '}"), text
    assert f"skipped 2 records (2 of {bad})" in first, text
    assert _reason(bad, 101, PACKET_GOT) in text.replace("\\", "")


def test_summary_names_every_kind_of_skip() -> None:
    d = Diagnostics()
    d.skip_records("a.sqlog", skipped=3, keys={7, 9}, reasons=[(7, "a.sqlog: record 1")])
    d.skip_records("b.sqlog", skipped=1, keys={"traces[0].events[2]"}, reasons=[])
    d.skipped_files = 2
    d.skipped_file_names = {"junk.sqlog"}
    assert skipped_summary(d) == (
        "skipped 4 records (2 of a.sqlog; 1 of b.sqlog; 1 not placed in a file) and 2 files "
        "whole (junk.sqlog; 1 not named); what they hold is not counted"
    )
    assert skipped_dict(d)["record_keys"] == {"a.sqlog": [7, 9], "b.sqlog": ["traces[0].events[2]"]}
    json.dumps(skipped_dict(d))  # JSON-ready
