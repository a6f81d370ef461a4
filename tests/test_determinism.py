"""Byte-identical outputs across processes with different hash seeds (set and dict iteration
order changes with PYTHONHASHSEED, so this catches order leaking into renderers and models)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import hashlib, sys
import polars as pl
import quicsm
from quicsm.render import diff_format
from quicsm.report import build_report
from quicsm.compare.grouping import Comparison, group_from_frame

real = quicsm.read_transitions([sys.argv[1]])
synthetic = quicsm.generate_transitions(120, seed=4)
out = []
for algorithm in ("synoptic", "ktails", "observed"):
    model = quicsm.infer(synthetic, algorithm=algorithm, k=2, seed=1)
    out += [model.to_json(), quicsm.model_to_dot(model)]
out.append(quicsm.model_to_dot(quicsm.infer(real, algorithm="synoptic")))
traces = synthetic["trace"].unique().sort()
a = synthetic.filter(pl.col("trace").is_in(traces[:60].implode()))
b = synthetic.filter(pl.col("trace").is_in(traces[60:].implode()))
d = quicsm.diff(a, b, names=("a", "b"))
out += [diff_format.to_json(d), diff_format.to_markdown(d), diff_format.to_table(d)]
comp = Comparison(group_from_frame("a", a), group_from_frame("b", b))
out.append(build_report([comp], fmt="md"))
for text in out:
    print(hashlib.sha256(text.encode()).hexdigest())
"""


def _digests(seed: str) -> list[str]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    fixture = ROOT / "tests" / "fixtures" / "real" / "quic-go-v0.65.0"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(fixture)],
        env=env, capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert len(lines) == 11  # 3 models x (JSON, DOT), a real trace's DOT, 3 diff views, a report
    return lines


def test_outputs_do_not_depend_on_the_hash_seed() -> None:
    first = _digests("0")
    for seed in ("1", "4242"):
        assert _digests(seed) == first, f"PYTHONHASHSEED={seed} changed an output"
