"""One definition of every table the Python modules and the native core share.

``quicsm/core/tables.json`` is read by the Python modules at import and turned into Rust constants
by ``native/build.rs`` at build time. These tests compare what each side ended up with (the native
side reports its generated constants through ``quicsm._native.tables()``), and check that the
Python modules use the shared tables rather than tables of their own.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

from quicsm import _native
from quicsm.core import states, tables
from quicsm.extract import native as extract_native
from quicsm.extract import rules
from quicsm.extract.profiles import PROFILES
from quicsm.qlog import events

ROOT = Path(__file__).resolve().parents[1]
NATIVE = _native.tables()


def test_states_are_the_same_on_both_sides() -> None:
    assert tuple(NATIVE["states"]) == states.PAPER_STATES == tables.STATES
    ind = NATIVE["indices"]
    for name, state in [
        ("INIT", rules.INIT),
        ("SLOW_START", rules.SLOW_START),
        ("CONGESTION_AVOIDANCE", rules.CONGESTION_AVOIDANCE),
        ("CONGESTION_AVOIDANCE_MAXED", rules.MAXED),
        ("RECOVERY", rules.RECOVERY),
    ]:
        assert states.PAPER_STATES[ind[name]] == state


def test_event_classes_are_the_same_on_both_sides() -> None:
    assert tuple(NATIVE["event_classes"]) == rules.EVENT_CLASSES
    assert rules.EVENT_CLASSES == (
        rules.ACK,
        rules.SEND,
        rules.CUTBACK,
        rules.COLLAPSE,
        rules.LOSS,
        rules.PTO,
        rules.UNDO,
        rules.FLAG,
    )
    for name in ("ACK", "SEND", "CUTBACK", "COLLAPSE", "LOSS", "PTO", "UNDO", "FLAG"):
        assert rules.EVENT_CLASSES[NATIVE["indices"][name]] == getattr(rules, name)


def test_event_names_and_kinds_are_the_same_on_both_sides() -> None:
    assert dict(NATIVE["event_kinds"]) == events.EVENT_KINDS
    assert set(events.EVENT_KINDS.values()) == {
        events.STATE,
        events.METRICS,
        events.LOST,
        events.TIMER,
        events.SPURIOUS,
        events.MVFST_METRIC,
    }


def test_metric_names_are_the_same_on_both_sides() -> None:
    assert tuple(NATIVE["metric_keys"]) == tuple(events.METRIC_FIELDS)
    flat = [(name, i) for i, names in enumerate(events.METRIC_FIELDS.values()) for name in names]
    assert [tuple(p) for p in NATIVE["metric_names"]] == flat
    timed = [key in events.RTT_METRICS for key in events.METRIC_FIELDS]
    assert list(NATIVE["time_metrics"]) == timed
    keys = list(events.METRIC_FIELDS)
    for name in (
        "CWND_BYTES",
        "BYTES_IN_FLIGHT",
        "SSTHRESH_BYTES",
        "SMOOTHED_RTT_MS",
        "LATEST_RTT_MS",
        "RTT_VARIANCE_MS",
        "PTO_COUNT",
    ):
        assert keys[NATIVE["indices"][name]] == name.lower()


def test_flags_needles_and_feed_kinds_are_the_same_on_both_sides() -> None:
    assert tuple(NATIVE["app_limited_fields"]) == events.APP_LIMITED_FIELDS
    assert tuple(n.encode() for n in NATIVE["derive_needles"]) == events.DERIVE_NEEDLES
    assert (NATIVE["state_needle"].encode(),) == events.STATE_NEEDLES
    assert NATIVE["timer_needle"].encode() == events.TIMER_NEEDLE
    assert NATIVE["timer_required"].encode() == events.TIMER_REQUIRED
    assert tuple(NATIVE["feed_kinds"]) == tables.FEED_KINDS
    from quicsm.qlog import budget

    assert NATIVE["max_record_values"] == budget.MAX_RECORD_VALUES == 1 << 20
    assert set(extract_native._KINDS) == {"metrics", "packet_lost", "pto", "spurious_loss"}


def test_every_rule_condition_has_a_native_port() -> None:
    python = {rule.when.__name__ for rule in rules.RULES}
    assert python <= set(NATIVE["conditions"])


def test_profile_and_thresholds_cross_by_name() -> None:
    """The native deriver reads Profile and Thresholds attribute by attribute: an object that
    lacks a field is refused, whatever else it holds."""
    import dataclasses

    import pytest

    profile = next(iter(PROFILES.values()))
    th = rules.Thresholds()
    _native.Deriver(profile, th, extract_native._rule_table())  # the real ones are accepted

    @dataclasses.dataclass
    class Renamed:
        pto_gap_fraction: float = 0.9
        granularity_ms: float = 1.0

    with pytest.raises(Exception, match="slow_start_stall_datagrams|attribute"):
        _native.Deriver(profile, Renamed(), extract_native._rule_table())


def test_no_table_is_written_out_in_the_rust_sources() -> None:
    """The tables live in tables.json: no Rust source spells an event name, a metric field name
    or a flag name (they come from the generated constants)."""
    data = json.loads((ROOT / "quicsm" / "core" / "tables.json").read_text())
    names = {n for n, _ in data["event_kinds"]}
    names |= {n for _, ns, _ in data["metrics"] for n in ns}
    names |= set(data["app_limited_fields"]) | set(data["derive_needles"])
    for path in (ROOT / "native" / "src").glob("*.rs"):
        text = path.read_text()
        code = "\n".join(line for line in text.splitlines() if not line.strip().startswith("//"))
        literals = set(re.findall(r'b?"([^"\\]*)"', code))
        assert not (literals & names), f"{path.name} spells {sorted(literals & names)}"


def test_python_modules_take_their_tables_from_the_shared_file() -> None:
    for module, attr in [
        (events, "EVENT_KINDS"),
        (events, "METRIC_FIELDS"),
        (events, "APP_LIMITED_FIELDS"),
        (rules, "EVENT_CLASSES"),
        (states, "PAPER_STATES"),
    ]:
        source = inspect.getsource(module)
        line = next(ln for ln in source.splitlines() if ln.startswith(f"{attr}:"))
        assert "tables." in line, f"{module.__name__}.{attr} is not taken from tables.json"
