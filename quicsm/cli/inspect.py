"""``quicsm inspect``: summarise and fully validate one trace file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from quicsm.cli.progress import reading
from quicsm.cli.report_warnings import terminal_safe
from quicsm.core.errors import InputError
from quicsm.qlog.paths import expand_paths

if TYPE_CHECKING:
    from quicsm.qlog.inspect import Inspection
    from quicsm.qlog.trace import TraceData

#: exit code when the file was read but has problems
EXIT_PROBLEMS = 2


@click.command("inspect")
@click.argument("path")
def inspect(path: str) -> None:
    """Summarise PATH: the format detected, its traces, event counts by name, the time span
    of each trace, its labels (what --where and --by select on), what each trace logs (its
    capabilities) and which derivations that allows, and every problem found (every record
    is decoded and validated).

    Exits with 0 when the file has no problem, 1 on an error, and 2 when problems were found,
    so it can be used as a validator."""
    from quicsm.extract.capabilities import capability_lines, inspect_capabilities

    files = expand_paths([path])
    if len(files) != 1:
        raise InputError(f"{path!r} names {len(files)} files; inspect takes one file")
    with reading(f"inspecting {files[0]}"):
        # one read: the summary, the capabilities and (for qlog) the labels
        report, found = inspect_capabilities(Path(files[0]))
        labels = _label_lines(str(files[0]), report) if report.traces else []
        capabilities = capability_lines(found) if report.traces else []
    click.echo(terminal_safe("\n".join(report.lines() + labels + capabilities)))
    if report.n_problems:
        sys.exit(EXIT_PROBLEMS)


#: label families too detailed to print per trace (``quicsm labels FILE#N`` shows them)
_DETAIL = ("relay.", "network.", "files.")


def _label_lines(file: str, report: Inspection) -> list[str]:
    """The labels shared by every trace of the file, then each trace's own."""
    from quicsm.core.errors import QuicsmError
    from quicsm.core.labels import label_text

    if report.read:  # qlog: the labels of the traces read
        traces, dicts = _qlog_labels(Path(file), report.read)
    else:  # a transitions table: its label columns and the run's labels
        import orjson

        from quicsm.compare.load import traces_where

        try:
            table = traces_where([file], where={}, on_error="skip")
        except QuicsmError as exc:
            return [f"labels: unreadable ({exc})"]
        traces = table["trace"].to_list()
        dicts = [orjson.loads(s) for s in table["labels"]]
    dicts = [{k: label_text(v) for k, v in d.items()} for d in dicts]
    if not dicts:
        return ["labels: none"]
    common = {k: v for k, v in dicts[0].items() if all(d.get(k) == v for d in dicts[1:])}
    out = [f"labels of every trace ({len(dicts)}):"]
    out += [f"  {k}={v}" for k, v in sorted(common.items())] or ["  none"]
    own = [
        (t, {k: v for k, v in d.items() if common.get(k) != v})
        for t, d in zip(traces, dicts, strict=True)
    ]
    hidden = sorted({k.split(".", 1)[0] for _, o in own for k in o if k.startswith(_DETAIL)})
    own = [(t, {k: v for k, v in o.items() if not k.startswith(_DETAIL)}) for t, o in own]
    if any(o for _, o in own):
        more = ", ".join(f"{h}.*" for h in hidden)
        out.append(
            "labels by trace"
            + (f" ({more} not shown: quicsm labels {file}#N)" if hidden else "")
            + ":"
        )
        for trace, o in own:
            text = ", ".join(f"{k}={v}" for k, v in sorted(o.items()))
            out.append(f"  #{trace.rpartition('#')[2].lstrip('0') or '0'}: {text}")
    return out


def _qlog_labels(path: Path, read: list[TraceData]) -> tuple[list[str], list[dict[str, Any]]]:
    """Each trace's id and labels as ``--where`` sees them (``quicsm.compare.load.traces_where``:
    its header's labels, the run's, and its vantage, title, code version and format)."""
    from quicsm.core.diagnostics import Diagnostics
    from quicsm.extract.sidecar import sidecar_labels

    sidecar = sidecar_labels(path, {}, True, Diagnostics())
    ids, dicts = [], []
    for t in read:
        own: dict[str, Any] = {"vantage": t.vantage}
        if t.title is not None:
            own["title"] = t.title
        if t.code_version is not None:
            own["code_version"] = t.code_version
        labels = {**own, **sidecar, **t.labels}
        builtin = {"vantage": t.vantage, "title": t.title, "code_version": t.code_version}
        for key, value in {**builtin, "format": t.format}.items():
            if key not in labels and value is not None:
                labels[key] = str(value)
        ids.append(f"#{t.index}")
        dicts.append(labels)
    return ids, dicts
