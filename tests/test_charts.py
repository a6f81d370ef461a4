"""The report's pictures as drawn: the scenario heatmap's diverging colours and legend, and the
diff graph's edge labels in one unit; the Vega-Lite renderer's kept charts and script bundle."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quicsm.render import charts, svg_charts
from quicsm.render.dot import diff_dot


def _rgb(fill: str) -> tuple[int, int, int]:
    if fill.startswith("#"):
        return int(fill[1:3], 16), int(fill[3:5], 16), int(fill[5:7], 16)
    r, g, b = (int(x) for x in re.findall(r"\d+", fill)[:3])
    return r, g, b


def test_heatmap_colours_diverge_from_white_with_a_legend() -> None:
    """−96 % is drawn dark red, +30 % blue, a small difference near white (the old heatmap drew
    every cell white, so −96 % looked like −0 %); the colour scale has a legend."""
    cells = {
        ("jitter", "c"): svg_charts.Cell(-96.0, True, "p < 0.001", (10, 10)),
        ("baseline", "c"): svg_charts.Cell(-2.0, False, "n.s.", (5, 5)),
        ("loss", "c"): svg_charts.Cell(30.0, True, "p = 0.003", (5, 5)),
    }
    svg = svg_charts.heatmap_svg(["jitter", "baseline", "loss"], ["c"], cells,
                                 row_label="scenario", col_label="",
                                 title="completion_ms")  # fmt: skip
    cell = re.compile(
        r'<g class="cell[^"]*" aria-label="(\w+), c: [^"]*"><rect [^>]*?fill="([^"]+)"'
    )
    fills = {m.group(1): _rgb(m.group(2)) for m in cell.finditer(svg)}
    assert set(fills) == {"jitter", "baseline", "loss"}, fills
    r, g, b = fills["jitter"]
    assert r > 120 and r > 2.5 * g and r > 2.5 * b  # saturated red
    r, g, b = fills["loss"]
    assert b > r + 40  # blue
    assert min(fills["baseline"]) > 200  # near white
    assert '<g class="legend gradient"' in svg
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert "−100" in labels and "+100" in labels and "−96%" in labels


def test_diff_graph_labels_every_edge_in_percentage_points() -> None:
    """New, gone and changed edges all say percentage points ("new +14 pp", not "new 0.14")."""
    edges = pl.DataFrame(
        {
            "source": ["SlowStart", "Recovery", "SlowStart", "Init"],
            "target": ["Recovery", "SlowStart", "CongestionAvoidance", "SlowStart"],
            "a_count": [10, 0, 5, 20],
            "b_count": [4, 7, 0, 20],
            "difference": [-0.25, 0.336, -0.5, 0.0],
            "significant": [True, True, False, False],
            "a_probability": [0.5, 0.0, 0.5, 1.0],
            "b_probability": [0.25, 0.336, 0.0, 1.0],
        }
    )
    states = ["Init", "SlowStart", "CongestionAvoidance", "Recovery"]
    dot = diff_dot(edges, {"states_only_a": [], "states_only_b": []}, states,
                   time_shift={"SlowStart": (0.14, True)})  # fmt: skip
    labels = re.findall(r'label="([^"]*)"', dot)
    assert labels == ["-25 pp *", "new +34 pp", "gone −50 pp", ""], labels
    assert "+14 pp of time (mean per trace)" in dot
    assert not re.search(r"label=\"(new|gone) [+−-]?0\.\d", dot)


def test_an_installed_script_bundle_spares_an_empty_cache_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``install_bundle`` (run by scripts/setup) builds the bundle once into the installation;
    a plot with an empty cache then reads it and builds nothing (nor writes the cache), and a
    damaged installed copy is ignored: the bundle is built into the cache as without one."""
    import vl_convert

    installed = tmp_path / "package"
    cache = tmp_path / "cache"
    monkeypatch.setenv("QUICSM_CACHE_DIR", str(cache))
    monkeypatch.setattr(charts, "_installed_bundle", lambda name: installed / name)
    calls: list[int] = []
    real = vl_convert.javascript_bundle

    def counting() -> str:
        calls.append(1)
        return str(real())

    monkeypatch.setattr(vl_convert, "javascript_bundle", counting)
    path = charts.install_bundle()
    assert path.parent == installed and len(calls) == 1
    assert charts.install_bundle() == path and len(calls) == 1  # a sound copy is kept
    built = path.read_text().partition("\n")[2]
    assert "vegaEmbed" in built
    charts._bundle.cache_clear()
    assert charts._bundle() == built and len(calls) == 1  # read, not built
    assert not cache.exists()  # and nothing written to the cache
    path.write_text(path.read_text().replace("vegaEmbed", "vegaEmbeD", 1))
    charts._bundle.cache_clear()
    assert charts._bundle() == built and len(calls) == 2  # damaged: built, kept in the cache
    assert len(list(cache.glob("vega-bundle-*.js"))) == 1
    charts._bundle.cache_clear()


def test_the_packed_bundle_is_installed_beside_it_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``install_bundle`` also keeps the bundle as the page carries it (gzip at its best
    compression, ~45 ms of CPU): a page then packs no bundle, and its bytes are those of a page
    packed anew; a damaged copy, or one packed from another bundle or by another zlib, is
    packed again (into the cache) and gives the same bytes."""
    installed = tmp_path / "package"
    cache = tmp_path / "cache"
    monkeypatch.setenv("QUICSM_CACHE_DIR", str(cache))
    charts._bundle.cache_clear()
    charts._packed_bundle.cache_clear()
    fresh = charts._packed(charts._bundle())  # packed anew, as before any copy was kept
    monkeypatch.setattr(charts, "_installed_bundle", lambda name: installed / name)
    packs: list[int] = []
    real = charts._packed

    def counting(text: str) -> str:
        packs.append(len(text))
        return real(text)

    monkeypatch.setattr(charts, "_packed", counting)
    charts.install_bundle()
    (kept,) = installed.glob("*.packed")
    assert len(packs) == 1
    for damage in (None, "truncated", "another zlib", "another bundle"):
        if damage == "truncated":
            kept.write_bytes(kept.read_bytes()[:-100])
        elif damage is not None:
            bundle = charts._bundle() + ("" if damage == "another zlib" else " ")
            source = charts._packed_source(bundle)
            if damage == "another zlib":
                source = source.replace(" zlib ", " zlib 0.")
            charts._write_bundle(kept, f"{source}\n{fresh}")
        for copy in cache.glob("*.packed"):  # the cache's copy, kept at the damage before
            copy.unlink()
        packs.clear()
        charts._packed_bundle.cache_clear()
        assert charts._packed_bundle() == fresh
        assert len(packs) == (0 if damage is None else 1), damage
    charts._packed_bundle.cache_clear()
    # packed into the cache when the installed copy would not do: read from there since
    packs.clear()
    assert charts._packed_bundle() == fresh and not packs
    charts._packed_bundle.cache_clear()


def test_the_script_bundle_is_kept_and_a_damaged_copy_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The renderer's script bundle (about 1.8 s of CPU to build) is built once and read from
    the cache directory afterwards; a copy whose digest does not match is built again, and an
    unwritable cache only means it is built every time."""
    import vl_convert

    monkeypatch.setenv("QUICSM_CACHE_DIR", str(tmp_path))
    # no installation's copy (install_bundle): the cache alone is looked at
    monkeypatch.setattr(charts, "_installed_bundle", lambda name: tmp_path / "none" / name)
    built = vl_convert.javascript_bundle()
    charts._bundle.cache_clear()
    assert charts._bundle() == built
    (kept,) = tmp_path.glob("vega-bundle-*.js")
    calls: list[int] = []
    real = vl_convert.javascript_bundle

    def counting() -> str:
        calls.append(1)
        return str(real())

    monkeypatch.setattr(vl_convert, "javascript_bundle", counting)
    charts._bundle.cache_clear()
    assert charts._bundle() == built and not calls  # read back, not built
    kept.write_text(kept.read_text().replace("vegaEmbed", "vegaEmbeD", 1))
    charts._bundle.cache_clear()
    assert charts._bundle() == built and len(calls) == 1  # damaged: built again, and kept
    charts._bundle.cache_clear()
    assert charts._bundle() == built and len(calls) == 1
    monkeypatch.setenv("QUICSM_CACHE_DIR", str(tmp_path / "file"))
    (tmp_path / "file").write_text("not a directory")
    charts._bundle.cache_clear()
    assert charts._bundle() == built and len(calls) == 2
    charts._bundle.cache_clear()


def test_a_plot_svg_is_the_same_bytes_in_any_process() -> None:
    """The renderer's ids are renamed after the specification: the same chart drawn in two
    processes gives the same bytes, in the CSS class asked for."""
    import subprocess
    import sys

    spec = {"data": {"values": [{"name": n, "v": i + 1} for i, n in enumerate("ab")]},
            "mark": "bar", "encoding": {"x": {"field": "v", "type": "quantitative"},
                                        "y": {"field": "name", "type": "nominal"}}}  # fmt: skip
    code = (
        "import json, sys; from quicsm.render import charts; "
        "sys.stdout.write(charts.to_svg(json.loads(sys.argv[1]), css_class='chart wide'))"
    )
    drawn = [subprocess.run([sys.executable, "-c", code, json.dumps(spec)], check=True,
                            capture_output=True, text=True).stdout for _ in range(2)]  # fmt: skip
    assert drawn[0] == drawn[1] == charts.to_svg(spec, css_class="chart wide")
    assert ' class="chart wide"' in drawn[0][: drawn[0].index(">")]


def _shared_by_definition(spec: dict[str, Any]) -> dict[str, Any]:
    """Inline data met more than once (equal as JSON text), stored once as a named dataset, in
    the order first met: every list written out and compared."""
    seen: dict[str, int] = {}
    names: dict[str, tuple[str, list[Any]]] = {}

    def visit(node: Any, count: bool) -> Any:
        if isinstance(node, list):
            return [visit(n, count) for n in node]
        if not isinstance(node, dict):
            return node
        data = node.get("data")
        if isinstance(data, dict) and isinstance(data.get("values"), list) and data["values"]:
            text = json.dumps(data["values"], sort_keys=True, separators=(",", ":"))
            if count:
                seen[text] = seen.get(text, 0) + 1
            elif seen.get(text, 0) > 1:
                names.setdefault(text, (f"shared{len(names)}", data["values"]))
                node = {**node, "data": {"name": names[text][0]}}
        return {k: (v if k == "data" else visit(v, count)) for k, v in node.items()}

    visit(spec, True)
    out = visit(spec, False)
    if names:
        out["datasets"] = {name: values for name, values in names.values()}
    return out


@given(
    st.lists(
        st.lists(st.dictionaries(st.sampled_from("tvr"), st.integers(0, 2), max_size=2),
                 max_size=3),
        min_size=1,
        max_size=4,
    ),
    st.lists(st.tuples(st.integers(0, 3), st.booleans(), st.booleans()), max_size=10),
)  # fmt: skip
def test_shared_data_is_the_definition(
    pool: list[list[dict[str, int]]], uses: list[tuple[int, bool, bool]]
) -> None:
    """Data met more than once, whether the same list, an equal copy, or another list of the
    same length, nested at any depth: shared exactly as by writing every list out."""
    layers: list[Any] = []
    for which, copy, nest in uses:
        values = pool[which % len(pool)]
        layer = {"mark": "point", "data": {"values": json.loads(json.dumps(values)) if copy
                                           else values}}  # fmt: skip
        layers.append({"layer": [layer]} if nest else layer)
    spec = {"vconcat": layers, "data": {"values": pool[0]}}
    assert charts._share_data(spec) == _shared_by_definition(spec)
