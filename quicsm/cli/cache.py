"""``quicsm cache``: what the cache directory holds, and taking it back."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from quicsm.engine.housekeeping import Entry

_DIR_OPTION = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The cache directory (default: $QUICSM_CACHE_DIR, else $XDG_CACHE_HOME/quicsm, else "
    "~/.cache/quicsm).",
)
_FORMAT_OPTION = click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="table: a line per kind; json: every entry.",
)
_DRY_RUN = click.option("--dry-run", is_flag=True, help="Say what would go; remove nothing.")

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


class _Age(click.ParamType):
    name = "AGE"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None):  # type: ignore[no-untyped-def]
        if isinstance(value, float):
            return value
        match = _AGE.match(str(value))
        if match is None:
            self.fail(f"expected a number and a unit (s, m, h, d or w), e.g. 30d; got {value!r}")
        return float(match.group(1)) * _UNITS[match.group(2)]


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _directory(cache_dir: Path | None) -> Path:
    from quicsm.engine.cache import default_cache_dir

    return cache_dir if cache_dir is not None else default_cache_dir()


def _table(found: Sequence[Entry], root: Path, *, verb: str | None = None) -> str:
    """A line per kind (stale entries apart): entries and bytes; then the total."""
    kinds: dict[str, list[int]] = {}
    for e in found:
        kind = f"{e.kind} (older versions)" if e.stale else e.kind
        counts = kinds.setdefault(kind, [0, 0])
        counts[0] += 1
        counts[1] += e.bytes
    lines = [f"{root}" + (f": {verb}" if verb else "")]
    width = max([len(k) for k in kinds] + [5])

    def row(kind: str, n: int, size: int) -> str:
        count = f"{n:>6} {'entry' if n == 1 else 'entries':<7}"
        return f"  {kind:<{width}}  {count}  {_mb(size):>10}"

    lines += [row(kind, n, size) for kind, (n, size) in sorted(kinds.items())]
    lines.append(row("total", len(found), sum(e.bytes for e in found)))
    return "\n".join(lines)


def _json(found: Sequence[Entry], root: Path, key: str) -> str:
    doc = {
        "cache_dir": str(root),
        key: [
            {
                "path": str(e.path),
                "kind": e.kind,
                "stale": e.stale,
                "bytes": e.bytes,
                "written": e.written,
            }
            for e in found
        ],
        "bytes": sum(e.bytes for e in found),
    }
    return json.dumps(doc, indent=2)


@click.group("cache")
def cache() -> None:
    """What the cache directory holds (rows read from files, trace indexes, connection
    accounts, drawn charts, compiled chart shapes, controller families), and taking it back.
    Reading never removes anything: each version of quicsm's readers keeps its own
    directories, so an upgrade leaves the older ones unused until `quicsm cache prune`.

    \b
    quicsm cache info
    quicsm cache prune                      # what this version can no longer read
    quicsm cache prune --older-than 30d     # and whatever was written before then
    quicsm cache clear
    """


@cache.command("info")
@_DIR_OPTION
@_FORMAT_OPTION
def info_command(cache_dir: Path | None, fmt: str) -> None:
    """Where the cache is and what it holds, by kind: entries and sizes, entries of older
    reader versions (never read again) apart, anything quicsm did not write as unknown."""
    from quicsm.engine.housekeeping import entries

    root = _directory(cache_dir)
    found = entries(root)
    if fmt == "json":
        click.echo(_json(found, root, "entries"))
        return
    click.echo(_table(found, root))
    stale = [e for e in found if e.stale]
    if stale:
        click.echo(
            f"{_mb(sum(e.bytes for e in stale))} belong to older versions: "
            "`quicsm cache prune` removes them"
        )


@cache.command("prune")
@_DIR_OPTION
@click.option(
    "--older-than",
    type=_Age(),
    help="Also remove every entry last written more than this long ago (a number and s, m, h, "
    "d or w: 30d, 12h).",
)
@_DRY_RUN
@_FORMAT_OPTION
def prune_command(
    cache_dir: Path | None, older_than: float | None, dry_run: bool, fmt: str
) -> None:
    """Remove what this version of quicsm can no longer read (the directories of other reader
    versions) and, with --older-than, whatever was written before then. Entries quicsm did not
    write are left alone."""
    from quicsm.engine.housekeeping import prune

    root = _directory(cache_dir)
    gone = prune(root, older_than=older_than, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    click.echo(
        _json(gone, root, verb.replace(" ", "_"))
        if fmt == "json"
        else _table(gone, root, verb=verb)
    )


@cache.command("clear")
@_DIR_OPTION
@_DRY_RUN
@_FORMAT_OPTION
def clear_command(cache_dir: Path | None, dry_run: bool, fmt: str) -> None:
    """Remove everything quicsm keeps in the cache directory (the next commands read their
    files again). Entries quicsm did not write are left alone."""
    from quicsm.engine.housekeeping import clear

    root = _directory(cache_dir)
    gone = clear(root, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    click.echo(
        _json(gone, root, verb.replace(" ", "_"))
        if fmt == "json"
        else _table(gone, root, verb=verb)
    )
