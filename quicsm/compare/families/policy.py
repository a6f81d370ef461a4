"""The two families of tests and their error control: which rows are primary (``--primary``),
and the adjustment of each family."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from quicsm.core.errors import InputError
from quicsm.stats import overdispersion as od
from quicsm.stats import significance as sig

#: families of tests, in the order of the findings
FAMILIES = ("outcomes", "states", "sources", "edges", "dwell", "invariants")

DEFAULT_PRIMARY = ("outcomes", "states")

#: the share of α spent on the primary family; the exploratory family gets the rest, so that
#: "anything significant" (either family) stays within α (Bonferroni over the two families)
PRIMARY_SHARE = 0.8


def levels(alpha: float) -> dict[str, float]:
    """The level each family is tested at: ``PRIMARY_SHARE`` of α for the primary family,
    the rest for the exploratory one (their sum is α, the level of the whole verdict)."""
    return {"primary": PRIMARY_SHARE * alpha, "exploratory": (1.0 - PRIMARY_SHARE) * alpha}


def _subjects(name: str, r: Mapping[str, Any]) -> set[str]:
    """The names a row answers to in a ``--primary`` item ``FAMILY:SUBJECT``."""
    if name == "outcomes":
        return {r["metric"], f"{r['metric']}@{r['cell']}"}
    if name in ("states", "dwell"):
        return {r["state"]}
    if name == "sources":
        return {r["source"]}
    if name == "edges":
        return {f"{r['source']}->{r['target']}", f"{r['source']}→{r['target']}"}
    return {f"{r['a']} {r['kind']} {r['b']}"}


#: the outcome metrics ``quicsm diff`` measures per trace (a library caller may pass others)
OUTCOME_METRICS = ("completion_ms", "throughput_mbit")


def _vocabulary(family: str, metrics: Sequence[str]) -> list[str]:
    """Every subject a ``--primary`` item of ``family`` may name, before any trace is read."""
    from quicsm.core.states import CANONICAL_STATES
    from quicsm.model.synoptic.mining import KIND_NAMES

    states = list(CANONICAL_STATES)
    if family == "outcomes":
        return list(metrics)
    if family in ("states", "dwell", "sources"):
        return states
    if family == "edges":
        return [f"{s}->{t}" for s in ["INITIAL", *states] for t in states]
    nodes = ["INITIAL", *states, "TERMINAL"]
    return [f"{x} {k} {y}" for k in KIND_NAMES for x in nodes for y in nodes]


def _squash(name: str) -> str:
    return name.replace(" ", "").replace("→", "->")


def _unknown(part: str, subject: str, names: Sequence[str], why: str = "") -> InputError:
    import difflib

    squashed = {_squash(n): n for n in names}
    near = difflib.get_close_matches(_squash(subject), list(squashed), n=3, cutoff=0.6)
    if near:
        hint = f"; did you mean {', '.join(squashed[n] for n in near)}?"
    elif names:
        hint = f"; these are named: {', '.join(sorted(names)[:8])}{', …' * (len(names) > 8)}"
    else:
        hint = ""
    return InputError(f"--primary {part!r}: {why or 'names nothing'}{hint}")


def parse_primary(
    items: Sequence[str] | None, *, metrics: Sequence[str] = OUTCOME_METRICS
) -> tuple[str, ...]:
    """Check a primary-family specification before any trace is read: each item ``FAMILY`` or
    ``FAMILY:SUBJECT`` (``states:Recovery``, ``edges:Recovery->CongestionAvoidance``,
    ``outcomes:completion_ms@jitter``), whose subject must name a state, a transition, an
    invariant or an outcome metric (an error names the nearest ones). A trace's end is not a
    transition (it is censoring): ``edges:Recovery->TERMINAL`` is refused."""
    if not items:
        return DEFAULT_PRIMARY
    out = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            family, _, subject = part.partition(":")
            if family not in FAMILIES:
                raise InputError(
                    f"--primary {part!r}: the family must be one of {', '.join(FAMILIES)} "
                    "(optionally FAMILY:SUBJECT, e.g. states:Recovery)"
                )
            names = _vocabulary(family, metrics)
            named = subject.split("@", 1)[0] if family == "outcomes" else subject
            if subject and _squash(named) not in {_squash(n) for n in names}:
                if family == "edges" and _squash(named).endswith("->TERMINAL"):
                    raise InputError(
                        f"--primary {part!r}: a trace's end is not a transition (it is "
                        "censoring: the last visit was cut short by the end of the recording), "
                        "so it is not tested"
                    )
                raise _unknown(part, named, names)
            out.append(part)
    return tuple(out) or DEFAULT_PRIMARY


def check_primary_rows(
    families: Mapping[str, list[dict[str, Any]]], primary: Sequence[str]
) -> None:
    """Refuse a ``FAMILY:SUBJECT`` item that names no row of these traces (e.g. a transition
    neither group takes, or an outcome cell that was not run), naming the nearest rows: a
    primary family that silently holds nothing would let a regression gate pass."""
    for item in primary:
        family, _, subject = item.partition(":")
        if not subject or any(is_primary(family, r, [item]) for r in families[family]):
            continue
        names = sorted({n for r in families[family] for n in _subjects(family, r) if "→" not in n})
        raise _unknown(item, subject, names, f"names nothing in these traces ({family})")


def is_primary(name: str, r: Mapping[str, Any], primary: Sequence[str]) -> bool:
    for item in primary:
        family, _, subject = item.partition(":")
        if family == name and (
            not subject or _squash(subject) in {_squash(x) for x in _subjects(name, r)}
        ):
            return True
    return False


def adjust(
    families: Mapping[str, list[dict[str, Any]]], *, alpha: float, primary: Sequence[str]
) -> tuple[int, int]:
    """Two families, α split between them (:func:`levels`): the primary tests under Holm at
    ``PRIMARY_SHARE`` of α, the exploratory ones under Benjamini-Hochberg at the rest, each over
    the tests that could reach significance at its level (Tarone's rule for discrete tests;
    for BH, Gilbert's). Anything significant in either family is then a false positive with
    probability at most α. Rows sharing a ``hypothesis`` key are one test seen twice (the two
    exits of a source with two exits): they count once. Sets every row's ``family``,
    ``p_value`` (adjusted within its family and for its family's share of α, so that
    significant means ``p_value < alpha`` in both), ``significant`` and ``mde``; returns the
    sizes of the two families."""
    rows = [(name, r) for name in FAMILIES for r in families[name]]
    first = [r for name, r in rows if is_primary(name, r, primary)]
    rest = [r for name, r in rows if not is_primary(name, r, primary)]
    level = levels(alpha)
    k_primary = _adjust_family(
        first, "primary", sig.holm_tarone, alpha=level["primary"], scale=alpha / level["primary"]
    )
    k_explore = _adjust_family(
        rest,
        "exploratory",
        sig.bh_tarone,
        alpha=level["exploratory"],
        scale=alpha / level["exploratory"],
    )
    # what each row could have detected at the level it faced: a single discovery of its
    # family (Holm: its level/K; BH: its level/m); none at all when its traces cannot reach
    # significance
    for group, k, name in ((first, k_primary, "primary"), (rest, k_explore, "exploratory")):
        for r in group:
            r["level"] = level[name] / max(1, k)
            df = r.get("df")
            r["mde"] = od.detectable(
                r.get("se", math.nan), alpha=r["level"], df=math.inf if df is None else df
            )
            if r["p_unadjusted"] is not None and "cannot reach" in (r["note"] or ""):
                r["mde"] = math.inf
    return k_primary, k_explore


def _adjust_family(
    rows: list[dict[str, Any]],
    family: str,
    method: Callable[..., tuple[list[float | None], list[bool]]],
    *,
    alpha: float,
    scale: float = 1.0,
) -> int:
    """Adjust one family in place at level ``alpha``; the adjusted p-values are multiplied by
    ``scale`` (α over the family's level, at most 1 after), so that they are compared with the
    comparison's α. Returns the number of distinct tests inside it."""
    keys: list[Any] = [r.get("hypothesis") or id(r) for r in rows]
    order = list(dict.fromkeys(keys))
    test_p: dict[Any, float | None] = {}
    test_min: dict[Any, float] = {}
    for key, r in zip(keys, rows, strict=True):
        p, pm = r["p_unadjusted"], r["p_min"]
        if p is not None:
            q = test_p.get(key)
            test_p[key] = p if q is None else min(q, p)
            test_min[key] = min(test_min.get(key, pm), pm)
        else:
            test_p.setdefault(key, None)
            test_min.setdefault(key, pm)
    adjusted, member = method([test_p[k] for k in order], [test_min[k] for k in order], alpha=alpha)
    by_key = {k: (p, inside) for k, p, inside in zip(order, adjusted, member, strict=True)}
    for key, r in zip(keys, rows, strict=True):
        p, inside = by_key[key]
        r["family"] = family
        if r["p_unadjusted"] is None:
            p = None
        elif not inside:
            p = p if p is not None else 1.0
            why = f"cannot reach significance (smallest possible p {r['p_min']:.3g})"
            r["note"] = f"{r['note']}; {why}" if r["note"] else why
        significant = inside and p is not None and p < alpha
        r["p_value"] = None if p is None else min(1.0, p * scale)
        r["significant"] = significant
    return sum(member)
