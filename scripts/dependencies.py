"""Print quicsm's dependencies from pyproject.toml, one a line: the required ones and those of
the extras named in the argument (e.g. ``[test,engine]``). scripts/setup installs these where
Rust is missing and the package cannot be built with its native core."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
project = project["project"]
wanted = [e for e in (sys.argv[1] if len(sys.argv) > 1 else "").strip("[]").split(",") if e]
deps = list(project["dependencies"])
for extra in wanted:
    deps += project["optional-dependencies"][extra]
print("\n".join(dict.fromkeys(deps)))
