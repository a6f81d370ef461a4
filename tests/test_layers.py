"""The package's shape: no import cycle among quicsm modules (imports inside functions
included), and the layers contract of pyproject.toml holds (``lint-imports``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import networkx as nx

ROOT = Path(__file__).resolve().parent.parent


def _module_graph() -> nx.DiGraph:
    graph = grimp.build_graph("quicsm", cache_dir=None)
    g = nx.DiGraph()
    for module in graph.modules:
        g.add_node(module)
        for imported in graph.find_modules_directly_imported_by(module):
            g.add_edge(module, imported)
    return g


def test_no_import_cycles() -> None:
    g = _module_graph()
    assert g.number_of_nodes() > 50, "the graph should cover the whole package"
    cycles = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    assert cycles == [], f"import cycles: {cycles}"


def test_cycle_detection_sees_function_level_imports(tmp_path: Path) -> None:
    # the guard above is only as good as the graph: a lazy import inside a function counts
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import cyc.b\n")
    (pkg / "b.py").write_text("def f():\n    from cyc import a\n    return a\n")
    sys.path.insert(0, str(tmp_path))
    try:
        graph = grimp.build_graph("cyc", cache_dir=None)
    finally:
        sys.path.remove(str(tmp_path))
    assert "cyc.a" in graph.find_modules_directly_imported_by("cyc.b")


def test_layers_contract_holds() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe is not None, "import-linter is part of the test extra (pyproject.toml)"
    done = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_one_chart_module_one_dot_emitter_one_escaping_helper() -> None:
    """Every chart is drawn by quicsm/render/charts.py (the only importer of the renderer),
    every DOT graph written and laid out by quicsm/render/dot.py (the only module that writes
    a digraph or runs Graphviz's dot), every HTML string escaped by quicsm/render/escape.py (the
    only importer of the standard library's html); no plotting library besides."""
    graph = grimp.build_graph("quicsm", include_external_packages=True, cache_dir=None)
    assert graph.find_modules_that_directly_import("vl_convert") == {"quicsm.render.charts"}
    assert graph.find_modules_that_directly_import("html") == {"quicsm.render.escape"}
    for other in ("matplotlib", "altair", "bokeh", "plotly", "graphviz", "pydot", "markupsafe"):
        assert other not in graph.modules, other
    writers, runners = set(), set()
    for path in sorted((ROOT / "quicsm").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(ROOT).as_posix()
        if '"digraph ' in text:
            writers.add(name)
        if 'which("dot")' in text:
            runners.add(name)
    assert writers == {"quicsm/render/dot.py"}, writers
    assert runners == {"quicsm/render/dot.py"}, runners
    # among the views, only dot.py starts a process (the lab runs its stacks)
    views = {m for m in graph.find_modules_that_directly_import("subprocess")
             if m.startswith(("quicsm.render", "quicsm.report", "quicsm.cli"))}  # fmt: skip
    assert views <= {"quicsm.render.dot", "quicsm.cli.lab"}, views
