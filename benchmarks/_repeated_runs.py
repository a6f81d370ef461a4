"""What the benchmarks that repeat seeded simulations share (``diff_calibration.py``,
``diff_power.py``): the options of a run's size, its parts and its results file, the answers
read back from a results file (``--markdown``, ``--check``), the file written, and the parts of
a run split between processes laid over one another (``--combine``). Every repetition is
seeded by its number, so the parts of a run joined are the run one process makes.

Not a benchmark itself: each benchmark adds these options to its own parser, next to its
own (levels, sizes, designs).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def add_run_options(
    ap: argparse.ArgumentParser, *, unit: str, root: Path, scratch: Path, published: Path
) -> None:
    """The shared options: ``--repetitions`` (simulated diffs per ``unit``), ``--seed``,
    ``--progress``, ``--results`` (written by default to ``scratch``, read by default from
    ``published``; paths shown relative to ``root``), ``--first``, ``--combine``,
    ``--checkpoint``, ``--markdown`` and ``--check``."""
    ap.add_argument("--repetitions", type=int, default=300, help=f"simulated diffs per {unit}")
    ap.add_argument("--seed", type=int, default=0, help="base seed of the repetitions")
    ap.add_argument("--progress", action="store_true", help=f"print each {unit} as it finishes")
    ap.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"the results file to write (default: {scratch.relative_to(root)}; name "
        f"{published.relative_to(root)} to publish) or, with --markdown and --check, to read "
        f"(default: {published.relative_to(root)})",
    )
    ap.add_argument(
        "--first",
        type=int,
        default=0,
        help="the first repetition to make (to split a run between processes; --combine "
        "joins the parts)",
    )
    ap.add_argument(
        "--combine",
        type=Path,
        nargs="+",
        metavar="PART",
        help="join results files of consecutive repetitions (--first) into the results file",
    )
    ap.add_argument(
        "--checkpoint",
        action="store_true",
        help="write the results file after every repetition (a run stopped early leaves the "
        "repetitions it made, and says how many)",
    )
    ap.add_argument(
        "--markdown", action="store_true", help="print the docs table from the results file"
    )
    ap.add_argument(
        "--check", type=int, metavar="N", help="re-run the first N repetitions and compare"
    )


def answered_from_results(
    args: argparse.Namespace,
    *,
    published: Path,
    markdown: Callable[[dict[str, Any]], str],
    check: Callable[[dict[str, Any], int], list[str]],
) -> bool:
    """``--markdown`` (the docs table printed) or ``--check`` (the first N repetitions made
    again and compared; exits 1 on a difference) answered from the results file: whether one
    was."""
    if args.markdown:
        sys.stdout.write(markdown(json.loads((args.results or published).read_text())))
        return True
    if args.check is not None:
        problems = check(json.loads((args.results or published).read_text()), args.check)
        print("\n".join(problems) or f"the first {args.check} repetitions reproduce exactly")
        sys.exit(1 if problems else 0)
    return False


def parts_named(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The results files ``--combine`` names, read."""
    return [json.loads(p.read_text()) for p in args.combine]


def write_results(args: argparse.Namespace, results: dict[str, Any], *, scratch: Path) -> Path:
    """``results`` written to the file ``--results`` names (else ``scratch``): the path."""
    output: Path = args.results or scratch
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=1) + "\n")
    return output


def laid_over(old: Sequence[T], new: Sequence[T], first: int, *, where: str) -> list[T]:
    """The repetitions ``new`` of a part starting at repetition ``first`` laid over ``old``
    (what the parts before it made): they replace what they overlap, the rest of ``old``
    stays. ``SystemExit`` naming ``where`` when repetitions before ``first`` are missing."""
    if first > len(old):
        raise SystemExit(f"{where}repetitions {len(old)} to {first - 1} missing")
    return [*old[:first], *new, *old[first + len(new) :]]


def seconds_of(parts: Sequence[dict[str, Any]]) -> float:
    """The time the parts took together (s, to a tenth)."""
    return round(sum(p["seconds"] for p in parts), 1)
