"""The ``--states`` option of every command that reads traces."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from quicsm.core.choices import HYBRID, STATE_MODES


def states_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command with ``--states explicit|derived|hybrid`` (parameter ``states``)."""
    return click.option(
        "--states",
        type=click.Choice(STATE_MODES),
        default=HYBRID,
        metavar="MODE",
        help="Where congestion states come from: hybrid (the default: logged where the stack "
        "logs them, derived for the rest), explicit (logged only) or derived (from metrics, "
        "losses and timers only; docs/derive.md).",
    )(f)


def split_app_limited_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command with ``--split-app-limited`` (parameter ``split_app_limited``)."""
    return click.option(
        "--split-app-limited",
        is_flag=True,
        help="Split ApplicationLimited by why the sender was short of data: ApplicationLimited "
        "(application), (flow control), (pacing) and (unknown), from the STREAM frames, the "
        "peer's limits and the blocked frames (the packets are read for it; docs/diff.md).",
    )(f)
