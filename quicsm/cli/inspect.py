"""``quicsm inspect``: summarise and fully validate one trace file."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from quicsm.cli.progress import reading
from quicsm.cli.report_warnings import terminal_safe
from quicsm.core.errors import InputError
from quicsm.qlog.paths import expand_paths

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
    from quicsm.qlog.inspect import inspect_file

    files = expand_paths([path])
    if len(files) != 1:
        raise InputError(f"{path!r} names {len(files)} files; inspect takes one file")
    with reading(f"inspecting {files[0]}"):
        report = inspect_file(Path(files[0]))
        labels = _label_lines(str(files[0])) if report.traces else []
        capabilities = _capability_lines(str(files[0])) if report.traces else []
    click.echo(terminal_safe("\n".join(report.lines() + labels + capabilities)))
    if report.n_problems:
        sys.exit(EXIT_PROBLEMS)


def _capability_lines(file: str) -> list[str]:
    """What each trace logs, and what that lets quicsm derive."""
    from quicsm.core.errors import QuicsmError
    from quicsm.extract.capabilities import capability_lines, file_capabilities

    try:
        return capability_lines(file_capabilities(file))
    except QuicsmError as exc:
        return [f"capabilities: unreadable ({exc})"]


#: label families too detailed to print per trace (``quicsm labels FILE#N`` shows them)
_DETAIL = ("relay.", "network.", "files.")


def _label_lines(file: str) -> list[str]:
    """The labels shared by every trace of the file, then each trace's own."""
    import orjson

    from quicsm.compare.labels import label_text
    from quicsm.compare.load import traces_where
    from quicsm.core.errors import QuicsmError

    try:
        traces = traces_where([file], where={}, on_error="skip")
    except QuicsmError as exc:
        return [f"labels: unreadable ({exc})"]
    dicts = [{k: label_text(v) for k, v in orjson.loads(s).items()} for s in traces["labels"]]
    if not dicts:
        return ["labels: none"]
    common = {k: v for k, v in dicts[0].items() if all(d.get(k) == v for d in dicts[1:])}
    out = [f"labels of every trace ({len(dicts)}):"]
    out += [f"  {k}={v}" for k, v in sorted(common.items())] or ["  none"]
    own = [
        (t, {k: v for k, v in d.items() if common.get(k) != v})
        for t, d in zip(traces["trace"].to_list(), dicts, strict=True)
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
