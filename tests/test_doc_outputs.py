"""Every command output quoted in docs/diff.md is what the command prints today, and the
calibration numbers quoted there reproduce (scripts/gen_doc_outputs regenerates them)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _gen() -> object:
    loader = importlib.machinery.SourceFileLoader(
        "gen_doc_outputs", str(ROOT / "scripts" / "gen_doc_outputs")
    )
    spec = importlib.util.spec_from_loader("gen_doc_outputs", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


GEN = _gen()
DIFF_MD = (ROOT / "docs" / "diff.md").read_text(encoding="utf-8")
BLOCKS = list(GEN.BLOCK.finditer(DIFF_MD))  # type: ignore[attr-defined]
#: the other docs whose quoted outputs the script keeps current
OTHER_BLOCKS = [
    (path.name, m)
    for path in GEN.DOCS  # type: ignore[attr-defined]
    if path.name != "diff.md"
    for m in GEN.BLOCK.finditer(path.read_text(encoding="utf-8"))  # type: ignore[attr-defined]
]


def test_docs_quote_command_outputs() -> None:
    assert len(BLOCKS) >= 4
    assert any("diff_calibration.py --markdown" in m["command"] for m in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=[m["command"][:60] for m in BLOCKS])
def test_quoted_output_is_current(block: re.Match[str]) -> None:
    got = GEN.run(block["command"])  # type: ignore[attr-defined]
    assert got == block["body"], (
        f"docs/diff.md: the output of {block['command']!r} changed; run scripts/gen_doc_outputs"
    )


@pytest.mark.parametrize(
    "doc_block", OTHER_BLOCKS, ids=[f"{n}: {m['command'][:50]}" for n, m in OTHER_BLOCKS]
)
def test_quoted_output_of_other_docs_is_current(doc_block: tuple[str, re.Match[str]]) -> None:
    name, block = doc_block
    got = GEN.run(block["command"])  # type: ignore[attr-defined]
    assert got == block["body"], (
        f"docs/{name}: the output of {block['command']!r} changed; run scripts/gen_doc_outputs"
    )


def test_root_causing_quotes_what_its_commands_print() -> None:
    assert any(n == "root-causing.md" for n, _ in OTHER_BLOCKS)
    assert any("diff_power.py --markdown" in m["command"] for n, m in OTHER_BLOCKS)


def test_power_results_reproduce() -> None:
    """The stored power/calibration outcomes of the transition-level tests are what the
    benchmark computes: its first repetition, re-run, gives the same outcome everywhere."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import diff_power
    finally:
        sys.path.pop(0)
    results = json.loads(diff_power.RESULTS.read_text())
    assert [r["settings"]["alpha"] for r in results["runs"]] == list(diff_power.ALPHAS)
    assert all(r["settings"]["repetitions"] >= 200 for r in results["runs"])
    assert diff_power.check(results, 1) == []


def test_no_number_outside_a_quoted_output_claims_a_measurement() -> None:
    """Prose may explain, but rates and p-values come from the quoted outputs."""
    prose = GEN.BLOCK.sub("", DIFF_MD)  # type: ignore[attr-defined]
    prose = re.sub(r"```.*?```", "", prose, flags=re.S)
    prose = prose.replace("95%", "")  # the confidence level of an interval is a setting
    assert not re.findall(r"\d+(?:\.\d+)?%", prose), re.findall(r".{30}\d+(?:\.\d+)?%.{10}", prose)
    assert not re.findall(r"p [=<] 0\.\d", prose)


def test_calibration_results_reproduce() -> None:
    """The stored calibration outcomes are what the benchmark computes: its first repetitions,
    re-run, give the same outcome in every setting."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import diff_calibration
    finally:
        sys.path.pop(0)
    results = json.loads(diff_calibration.RESULTS.read_text())
    assert results["settings"]["repetitions"] >= 200
    assert diff_calibration.check(results, 2) == []


def test_calibration_results_back_the_claim() -> None:
    """docs/diff.md says every family and their union stay within α + 0.02 on every design and
    size of the stored run (at least 300 repetitions): the stored outcomes say so."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import diff_calibration
    finally:
        sys.path.pop(0)
    results = json.loads(diff_calibration.RESULTS.read_text())
    assert results["settings"]["repetitions"] >= 300
    assert {k.split("/")[0] for k in results["outcomes"]} >= set(diff_calibration.DESIGNS)
    assert diff_calibration.worst(results) <= results["settings"]["alpha"] + 0.02
    claim = "every row, the union included, stays within it on every design and size"
    assert claim in " ".join(DIFF_MD.split())


PICTURE_COMMANDS = [
    c
    for doc in GEN.DOCS  # type: ignore[attr-defined]
    for c in GEN.pictures(doc.read_text(encoding="utf-8"))  # type: ignore[attr-defined]
]


def test_docs_show_pictures_made_by_commands() -> None:
    assert any("quicsm plot" in c for c in PICTURE_COMMANDS)
    assert any("report_pictures" in c for c in PICTURE_COMMANDS)
    for doc in GEN.DOCS:  # type: ignore[attr-defined]
        for name in re.findall(r"\]\(pictures/([^)]+)\)", doc.read_text(encoding="utf-8")):
            assert (ROOT / "docs" / "pictures" / name).is_file(), name


def _browser_shot_matches(made: bytes, committed: bytes) -> bool:
    """A browser's screenshot is the committed one up to the browser's own rasterising: the
    same size, and under 3 % of its 8x8-pixel blocks differing by 16/255 or more on average.
    Text anti-aliased a pixel apart (another browser build) changes about 1 % of blocks; the
    same page zoomed to its middle tenth changes 13 %."""
    import io

    from PIL import Image, ImageChops

    a = Image.open(io.BytesIO(made)).convert("L")
    b = Image.open(io.BytesIO(committed)).convert("L")
    if a.size != b.size:
        return False
    blocks = (max(1, a.size[0] // 8), max(1, a.size[1] // 8))
    histogram = ImageChops.difference(
        a.resize(blocks, Image.Resampling.BOX), b.resize(blocks, Image.Resampling.BOX)
    ).histogram()
    return sum(histogram[16:]) < 0.03 * sum(histogram)


def test_browser_shots_tell_a_changed_page_from_anti_aliasing() -> None:
    """The tolerance above is neither blind nor strict: the zoomed page is not the whole page,
    and the whole page moved by one pixel still is."""
    import io

    from PIL import Image, ImageChops

    whole = (ROOT / "docs" / "pictures" / "plot-page-quiche.png").read_bytes()
    zoomed = (ROOT / "docs" / "pictures" / "plot-page-quiche-zoomed.png").read_bytes()
    buffer = io.BytesIO()
    ImageChops.offset(Image.open(io.BytesIO(whole)).convert("RGB"), 1, 0).save(buffer, "PNG")
    assert _browser_shot_matches(whole, whole)
    assert _browser_shot_matches(buffer.getvalue(), whole)
    assert not _browser_shot_matches(zoomed, whole)


@pytest.mark.slow
@pytest.mark.parametrize("command", PICTURE_COMMANDS, ids=[c[:60] for c in PICTURE_COMMANDS])
def test_pictures_are_current(command: str, tmp_path: Path) -> None:
    """Each picture regenerates (into a temporary directory) byte for byte, except a browser's
    screenshot (scripts/plot_screenshots), which regenerates up to the browser's rasterising."""
    GEN.run(command.replace("docs/pictures", str(tmp_path)))  # type: ignore[attr-defined]
    made = sorted(tmp_path.iterdir())
    assert made
    shot = "plot_screenshots" in command
    for path in made:
        committed = ROOT / "docs" / "pictures" / path.name
        same = (
            _browser_shot_matches(path.read_bytes(), committed.read_bytes())
            if shot
            else path.read_bytes() == committed.read_bytes()
        )
        assert same, f"docs/pictures/{path.name} is stale: run scripts/gen_doc_outputs"
