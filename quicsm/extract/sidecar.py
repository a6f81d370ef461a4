"""Run labels next to a trace file: the scalar fields of a lab run's ``run.json``, as labels
of every trace in the files beside it, and what the readers take from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from quicsm.core.aliases import CC_ALGORITHM_KEYS
from quicsm.core.diagnostics import Diagnostics
from quicsm.core.errors import QlogError
from quicsm.qlog.trace import TraceData


def sidecar_labels(
    path: Path, cache: dict[Path, dict[str, Any]], lenient: bool, diag: Diagnostics
) -> dict[str, Any]:
    """Scalar fields of ``run.json`` next to a trace file (lab runs), ``{}`` if there is none."""
    directory = path.parent
    if directory in cache:
        return cache[directory]
    labels: dict[str, Any] = {}
    run = directory / "run.json"
    if run.is_file():
        try:
            try:
                text = run.read_bytes()
            except OSError as exc:
                raise QlogError(
                    str(run), "a readable JSON object of run labels", got=exc.strerror
                ) from None
            value = orjson.loads(text)
            if not isinstance(value, dict):
                raise QlogError(str(run), "a JSON object of run labels", got=type(value).__name__)
            labels = {
                str(k): v
                for k, v in value.items()
                if v is None or isinstance(v, str | int | float | bool)
            }
        except orjson.JSONDecodeError as exc:
            error = QlogError(
                str(run), "a JSON object of run labels", line=exc.lineno, got="invalid JSON"
            )
            if not lenient:
                raise error from None
            diag.skip(error, file_level=True)
        except QlogError as error:
            if not lenient:
                raise
            diag.skip(error, file_level=True)
    cache[directory] = labels
    return labels


def labels_json(labels: dict[str, Any]) -> str:
    return orjson.dumps(labels, option=orjson.OPT_SORT_KEYS).decode()


def cc_algorithm(trace: TraceData, sidecar: dict[str, Any]) -> str | None:
    if trace.cc_algorithm:
        return trace.cc_algorithm
    for key in CC_ALGORITHM_KEYS:
        if isinstance(sidecar.get(key), str):
            return str(sidecar[key])
    return None
