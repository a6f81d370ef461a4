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
