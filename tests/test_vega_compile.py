"""quicsm.render.vega_compile: a Vega-Lite specification compiled once per shape (without its
data) gives the Vega the whole specification compiles to, on the pages of real traces and on
any rows; the kept shape is read back, and a damaged or unwritable cache only means compiling
again."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import vl_convert
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from quicsm.cli import main
from quicsm.extract.read import read_metrics, read_transitions
from quicsm.render import charts
from quicsm.render.connection import connection_series
from quicsm.render.vega_compile import MARK, compile_vega, with_data, without_data

REAL = Path(__file__).parent / "fixtures" / "real"
SERVER = REAL / "quic-go-v0.65.0" / "server.sqlog.zst"
QUICHE = Path(__file__).parent / "fixtures" / "qlog" / "quiche_quic.sqlog"
VERSION = version("vl-convert-python")


def text(spec: Any) -> str:
    """JSON text that tells an integer from a float (``1 == 1.0`` in Python)."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


class Counting:
    """The renderer's own compiler, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, spec: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        out: dict[str, Any] = vl_convert.vegalite_to_vega(spec)
        return out


def page_specs() -> list[dict[str, Any]]:
    """The specifications interactive pages compile: one connection (quic-go with losses and
    PTOs; quiche with a pacing rate), and three as small multiples."""
    out = []
    for paths in ([SERVER], [QUICHE], sorted(REAL.glob("*/server.sqlog.zst"))):
        transitions, metrics = read_transitions(paths), read_metrics(paths)
        series = [
            connection_series(transitions, metrics, str(t))
            for t in transitions["trace"].unique(maintain_order=True)
        ]
        out.append(charts._for_page(charts.connections_spec(series, static=False)))
    return out


@pytest.fixture(scope="module")
def specs() -> list[dict[str, Any]]:
    return page_specs()


def test_compiled_by_shape_is_compiled_whole(specs: list[dict[str, Any]]) -> None:
    assert len(specs) == 3
    for spec in specs:
        stripped = without_data(spec)
        assert stripped is not None
        shape, values = stripped
        assert values and MARK in text(shape) and len(text(shape)) < len(text(spec))
        whole = vl_convert.vegalite_to_vega(spec)
        compiled = compile_vega(
            spec, compile_spec=vl_convert.vegalite_to_vega, version=VERSION, cache_dir=None
        )
        assert text(compiled) == text(whole)


def test_the_shape_is_kept_and_read_back(specs: list[dict[str, Any]], tmp_path: Path) -> None:
    spec = specs[0]
    whole = text(vl_convert.vegalite_to_vega(spec))
    compiler = Counting()
    for _ in range(2):
        got = compile_vega(spec, compile_spec=compiler, version=VERSION, cache_dir=tmp_path)
        assert text(got) == whole and compiler.calls == 1  # compiled once, then read
    (kept,) = (tmp_path / "vega").glob("*.json")
    # another version of the renderer: another key, compiled again
    compile_vega(spec, compile_spec=compiler, version=VERSION + "x", cache_dir=tmp_path)
    assert compiler.calls == 2 and len(list((tmp_path / "vega").glob("*.json"))) == 2
    # damaged in several ways: compiled again, and kept sound again
    good = kept.read_bytes()
    for damage in (good[:-40], good.replace(b"signal", b"signel", 1), b"", b"\xff\xfe", b"{}"):
        kept.write_bytes(damage)
        calls = compiler.calls
        got = compile_vega(spec, compile_spec=compiler, version=VERSION, cache_dir=tmp_path)
        assert text(got) == whole and compiler.calls == calls + 1
        assert kept.read_bytes() == good


def test_a_cache_that_cannot_be_written_only_means_compiling(
    specs: list[dict[str, Any]], tmp_path: Path
) -> None:
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache directory would be")
    compiler = Counting()
    whole = text(vl_convert.vegalite_to_vega(specs[0]))
    for calls in (1, 2):
        got = compile_vega(specs[0], compile_spec=compiler, version=VERSION, cache_dir=blocked)
        assert text(got) == whole and compiler.calls == calls


numbers = st.one_of(
    st.integers(-(2**40), 2**40),
    # the edges of what the engine keeps as an integer (32 bits, signed or not), as either type
    st.sampled_from([0.0, -0.0, 1.0, -3.0, 2.0**31, 2.0**32 - 1, 2.0**32, -(2.0**31) - 1]),
    st.sampled_from([2.0**53, 1e20, 0.5, -(2**31), -(2**31) - 1, 2**32 - 1, 2**32]),
    st.floats(allow_nan=False, allow_infinity=False),
)
cell = st.one_of(numbers, st.text(max_size=5), st.none(), st.booleans())
row = st.dictionaries(st.sampled_from(["t", "y", "r", "0", "7", "01", "kind"]), cell, max_size=4)


@settings(max_examples=40)
@given(st.lists(st.lists(row, max_size=6), min_size=1, max_size=3))
# datasets the engine holds equal, and so shares: 1 and 1.0, -0 and 0, keys in another order
@example([[{"t": 1}], [{"t": 1.0}], [{"t": 2}]])
@example([[{"t": -0.0}], [{"t": 0}]])
@example([[{"t": 1, "y": "a"}], [{"y": "a", "t": 1.0}]])
@example([[{"t": 2.0**32}], [{"t": 2**32}], [{"t": float("nan")}]])
@example([[{"t": float("inf")}, {"t": 1}], [{"y": [float("nan")]}]])  # lists of their own length
def test_any_rows_come_back_as_the_engine_gives_them(datasets: list[list[dict[str, Any]]]) -> None:
    """Numbers the engine turns into integers (or floats), keys it reorders, equal and empty
    datasets (which it shares): the shape's compilation with the rows put back is the whole
    one's."""
    spec: dict[str, Any] = {
        "layer": [
            {
                "data": {"values": rows},
                "mark": "point",
                "encoding": {"x": {"field": "t", "type": "quantitative"}},
            }
            for rows in datasets
        ],
        "datasets": {"kept": datasets[0]},
    }
    whole = vl_convert.vegalite_to_vega(spec)
    got = compile_vega(
        spec, compile_spec=vl_convert.vegalite_to_vega, version=VERSION, cache_dir=None
    )
    assert text(got) == text(whole)


def test_a_placeholder_anywhere_else_is_not_trusted() -> None:
    values = [[{"t": 1.5}]]
    placed = {"data": [{"name": "a", "values": [{MARK: 0}]}]}
    assert with_data(placed, values) == {"data": [{"name": "a", "values": [{"t": 1.5}]}]}
    elsewhere = {**placed, "signals": [{"name": "s", "value": [{MARK: 0}]}]}
    assert with_data(elsewhere, values) is None
    assert with_data({"data": [{"name": "a", "values": [{MARK: 1}]}]}, values) is None


def test_a_plot_drawn_again_is_the_same_page_without_compiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUICSM_CACHE_DIR", str(tmp_path / "cache"))
    pages = []
    for name in ("first", "again", "damaged"):
        if name == "damaged":
            for kept in (tmp_path / "cache" / "vega").glob("*.json"):
                kept.write_text("not what was kept")
        out = tmp_path / f"{name}.html"
        result = CliRunner().invoke(main, ["plot", f"{SERVER}#0", "-o", str(out)])
        assert result.exit_code == 0, result.output
        pages.append(out.read_bytes())
        if name == "first":  # the second draws without the renderer's engine
            monkeypatch.setattr(vl_convert, "vegalite_to_vega", _refused)
        else:
            monkeypatch.undo()
            monkeypatch.setenv("QUICSM_CACHE_DIR", str(tmp_path / "cache"))
    assert pages[0] == pages[1] == pages[2]


def _refused(spec: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError("compiled although its shape was kept")
