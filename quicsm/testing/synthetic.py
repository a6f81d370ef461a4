"""Seeded generator of QUIC-like congestion-state logs with known structure.

A :class:`Profile` is a Markov chain over *keys*; a key is a state name, optionally with a
hidden phase after ``@`` (``"ApplicationLimited@tail"`` shows as ``ApplicationLimited``). Phases
give the chain memory that a first-order model of the visible states does not have, which is
what makes Synoptic-style refinement split states. Every trace starts in ``Init``; each key
maps to its successors' probabilities, the special successor ``END`` ends the trace. Each visit
lasts an exponentially distributed dwell time with the state's mean (``dwell_ms``).

The default profile follows the loss-recovery and congestion-control phases of RFC 9002
(§6.2 probe timeouts/tail loss probes, §7.3 slow start → recovery → congestion avoidance,
§7.6.2 persistent congestion → back to slow start), plus an application-limited tail
(§7.8) from which the sender never returns to slow start or congestion avoidance.

:func:`generate_transitions` returns a canonical transitions frame
(:data:`quicsm.core.frames.TRANSITIONS_SCHEMA`, already in the form
:func:`quicsm.core.frames.normalize_transitions` produces); :func:`write_synoptic_log` writes
traces in
Synoptic's plain text input format (one event per line, ``--`` between traces).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

import numpy as np
import polars as pl

from quicsm.core.errors import InputError
from quicsm.core.frames import SOURCE_DTYPE, TRANSITIONS_SCHEMA, VANTAGE_DTYPE
from quicsm.core.states import CANONICAL_STATES, STATE_DTYPE

END: Final = "END"
START: Final = "Init"

DEFAULT_TRANSITIONS: Final[dict[str, dict[str, float]]] = {
    "Init": {"SlowStart": 1.0},
    "SlowStart": {
        "CongestionAvoidance": 0.42,
        "Recovery": 0.31,
        "TailLossProbe": 0.10,
        "RetransmissionTimeout": 0.04,
        "ApplicationLimited@tail": 0.10,
        END: 0.03,
    },
    "CongestionAvoidance": {
        "Recovery": 0.52,
        "CongestionAvoidanceMaxed": 0.10,
        "TailLossProbe": 0.12,
        "RetransmissionTimeout": 0.03,
        "ApplicationLimited@tail": 0.12,
        END: 0.11,
    },
    "CongestionAvoidanceMaxed": {
        "CongestionAvoidance": 0.50,
        "Recovery": 0.30,
        "ApplicationLimited@tail": 0.10,
        END: 0.10,
    },
    "Recovery": {
        "CongestionAvoidance": 0.86,
        "TailLossProbe": 0.05,
        "RetransmissionTimeout": 0.04,
        END: 0.05,
    },
    "TailLossProbe": {"Recovery": 0.6, "RetransmissionTimeout": 0.15, "CongestionAvoidance": 0.25},
    "RetransmissionTimeout": {"SlowStart": 1.0},
    "ApplicationLimited@tail": {"TailLossProbe@tail": 0.45, END: 0.55},
    "TailLossProbe@tail": {
        "Recovery@tail": 0.5,
        "RetransmissionTimeout@tail": 0.2,
        "ApplicationLimited@tail": 0.3,
    },
    "Recovery@tail": {"ApplicationLimited@tail": 0.8, END: 0.2},
    "RetransmissionTimeout@tail": {"ApplicationLimited@tail": 1.0},
}

#: mean time spent per visit, by visible state (ms)
DEFAULT_DWELL_MS: Final[dict[str, float]] = {
    "Init": 30.0,
    "SlowStart": 120.0,
    "CongestionAvoidance": 400.0,
    "CongestionAvoidanceMaxed": 250.0,
    "Recovery": 60.0,
    "TailLossProbe": 40.0,
    "RetransmissionTimeout": 200.0,
    "ApplicationLimited": 150.0,
}


@dataclass(frozen=True)
class Profile:
    """Transition probabilities between keys and mean dwell times per visible state."""

    transitions: Mapping[str, Mapping[str, float]] = field(
        default_factory=lambda: {k: dict(v) for k, v in DEFAULT_TRANSITIONS.items()}
    )
    dwell_ms: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_DWELL_MS))
    #: traces longer than this many states are cut (a safety bound on loops)
    max_states: int = 500

    def with_transition(self, source: str, target: str, probability: float) -> Profile:
        """A copy in which ``source → target`` has ``probability`` and ``source``'s other
        successors are rescaled so that its row still sums to 1."""
        row = dict(self.transitions.get(source, {}))
        rest = sum(p for t, p in row.items() if t != target)
        if not 0.0 <= probability <= 1.0:
            raise InputError(f"probability must be in [0, 1], got {probability}")
        scale = (1.0 - probability) / rest if rest > 0 else 0.0
        new_row = {t: p * scale for t, p in row.items() if t != target}
        new_row[target] = probability
        table = {k: dict(v) for k, v in self.transitions.items()}
        table[source] = new_row
        return replace(self, transitions=table)

    def with_dwell(self, state: str, mean_ms: float) -> Profile:
        if mean_ms <= 0:
            raise InputError(f"mean dwell time must be positive, got {mean_ms}")
        return replace(self, dwell_ms={**self.dwell_ms, state: float(mean_ms)})

    def validate(self) -> None:
        if START not in self.transitions:
            raise InputError(f"profile needs transitions out of {START!r}")
        for key, row in self.transitions.items():
            total = sum(row.values())
            if abs(total - 1.0) > 1e-9:
                raise InputError(f"transitions out of {key!r} sum to {total}, not 1")
            for target, p in row.items():
                if p < 0:
                    raise InputError(f"negative probability {key!r} -> {target!r}")
                if target != END and target not in self.transitions:
                    raise InputError(f"{key!r} -> {target!r}: {target!r} has no transitions")
        for key in self.transitions:
            state = visible(key)
            if state not in CANONICAL_STATES:
                raise InputError(f"{key!r}: {state!r} is not a canonical state")
            if state not in self.dwell_ms:
                raise InputError(f"no mean dwell time for state {state!r}")


def visible(key: str) -> str:
    """The state a key shows as (the part before ``@``)."""
    return key.split("@", 1)[0]


def generate_sequences(
    n_traces: int, *, seed: int, profile: Profile | None = None
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Simulate ``n_traces`` traces; returns (key names, key codes, dwell times in ms, trace
    lengths), the events of all traces concatenated trace by trace."""
    prof = profile or Profile()
    prof.validate()
    if n_traces < 0:
        raise InputError("n_traces must be non-negative")
    keys = list(prof.transitions)
    index = {k: i for i, k in enumerate(keys)}
    n = len(keys)
    end = n
    cum = np.zeros((n, n + 1))
    for k, row in prof.transitions.items():
        for t, p in row.items():
            cum[index[k], end if t == END else index[t]] += p
    cum = np.cumsum(cum, axis=1)
    cum[:, -1] = np.inf  # guard against rounding
    mean = np.array([prof.dwell_ms[visible(k)] for k in keys])
    rng = np.random.default_rng(seed)
    cur = np.full(n_traces, index[START], dtype=np.int64)
    active = np.arange(n_traces, dtype=np.int64)
    steps_trace: list[np.ndarray] = []
    steps_key: list[np.ndarray] = []
    for _ in range(prof.max_states):
        if len(active) == 0:
            break
        steps_trace.append(active)
        steps_key.append(cur)
        u = rng.random(len(active))
        nxt = (u[:, None] >= cum[cur]).sum(axis=1)
        keep = nxt != end
        active = active[keep]
        cur = nxt[keep]
    trace = np.concatenate(steps_trace) if steps_trace else np.zeros(0, dtype=np.int64)
    key = np.concatenate(steps_key) if steps_key else np.zeros(0, dtype=np.int64)
    order = np.argsort(trace, kind="stable")
    trace, key = trace[order], key[order]
    dwell = rng.exponential(1.0, len(key)) * mean[key]
    lengths = np.bincount(trace, minlength=n_traces)
    return keys, key, dwell, lengths


def generate_transitions(
    n_traces: int, *, seed: int, profile: Profile | None = None, vantage: str = "server"
) -> pl.DataFrame:
    """A transitions frame of ``n_traces`` synthetic traces (deterministic for a seed).

    Trace ids are ``syn-<seed>-<index>``; times are ms from the trace's start; ``end_ms`` is
    when the last state's dwell time ends.
    """
    keys, key, dwell, lengths = generate_sequences(n_traces, seed=seed, profile=profile)
    if vantage not in VANTAGE_DTYPE.categories.to_list():
        raise InputError(f"vantage must be one of {VANTAGE_DTYPE.categories.to_list()}")
    n_events = len(key)
    trace = np.repeat(np.arange(n_traces, dtype=np.int64), lengths)
    offsets = np.zeros(n_traces + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    clock = np.concatenate([[0.0], np.cumsum(dwell)])  # one clock across all traces
    time_ms = clock[:-1] - clock[offsets[:-1]][trace]
    end_ms = (clock[offsets[1:]] - clock[offsets[:-1]])[trace]
    # Visible repeats (e.g. Recovery -> Recovery@tail) are one stay, not a transition: keep
    # the first row of each run, which already carries the run's start time.
    state_code = np.array([CANONICAL_STATES.index(visible(k)) for k in keys], dtype=np.int64)
    shown = state_code[key]
    keep = np.ones(n_events, dtype=np.bool_)
    keep[1:] = (shown[1:] != shown[:-1]) | (trace[1:] != trace[:-1])
    width = max(7, len(str(max(n_traces - 1, 0))))
    trace_ids = pl.Series(
        "trace", [f"syn-{seed}-{i:0{width}d}" for i in range(n_traces)], dtype=pl.String
    )
    states = pl.Series("state", list(CANONICAL_STATES), dtype=STATE_DTYPE)
    n_rows = int(keep.sum())
    df = pl.DataFrame(
        {
            "trace": trace_ids.gather(trace[keep]),
            "time_ms": time_ms[keep],
            "state": states.gather(shown[keep]),
            "end_ms": end_ms[keep],
        }
    ).with_columns(
        pl.lit(None, pl.String()).alias("file"),
        pl.lit(vantage, VANTAGE_DTYPE).alias("vantage"),
        pl.lit(None, pl.String()).alias("raw_state"),
        pl.lit(None, pl.String()).alias("trigger"),
        pl.lit("explicit", SOURCE_DTYPE).alias("source"),
    )
    assert df.height == n_rows
    # already canonical: sorted by trace then time, Init first, no repeats (a test checks
    # that normalize_transitions leaves it unchanged)
    return df.select([pl.col(n).cast(t) for n, t in TRANSITIONS_SCHEMA.items()])


def write_synoptic_log(transitions: pl.DataFrame, path: str | Path) -> int:
    """Write the traces of a transitions frame in Synoptic's plain text format.

    One state per line, traces separated by a line ``--``; parse it with Synoptic's options
    ``-r '^(?<TYPE>.+)$' -s '^--$'``. Returns the number of traces written.
    """
    ordered = transitions.with_row_index("_order").sort(["trace", "time_ms", "_order"])
    seqs = ordered.group_by("trace", maintain_order=True).agg(pl.col("state").cast(pl.String))
    with Path(path).open("w", encoding="utf-8") as out:
        for i, states in enumerate(seqs.get_column("state").to_list()):
            if i:
                out.write("--\n")
            out.write("\n".join(states))
            out.write("\n")
    return seqs.height


def lossy_profile(base: Profile | None = None) -> Profile:
    """A loss-heavy variant of ``base``: it loops between CongestionAvoidance and Recovery
    (CongestionAvoidance → Recovery 0.9, Recovery → CongestionAvoidance 0.97), so a few long
    traces hold most transitions, as traces from a lossy network do."""
    base = base or Profile()
    return base.with_transition("CongestionAvoidance", "Recovery", 0.9).with_transition(
        "Recovery", "CongestionAvoidance", 0.97
    )


def stratified_groups(
    mix_a: Mapping[str, int],
    mix_b: Mapping[str, int],
    *,
    seed: int,
    profiles: Mapping[str, Profile],
    b_profiles: Mapping[str, Profile] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, dict[tuple[str, str], str]]:
    """Two groups of traces from several conditions (strata), in the mixes given
    (``{"lossy": 8, "clean": 2}``): every trace of stratum *s* follows ``profiles[s]`` — in
    group B ``b_profiles[s]`` when given (a within-stratum effect). Returns both transitions
    frames (``file`` = ``<stratum>.sqlog``, ``<group>`` in the trace id) and the stratum of
    every ``(file, trace)``."""
    strata: dict[tuple[str, str], str] = {}
    frames: list[pl.DataFrame] = []
    for g, (mix, chosen) in enumerate(((mix_a, profiles), (mix_b, b_profiles or profiles))):
        parts = []
        for k, (stratum, n) in enumerate(sorted(mix.items())):
            if n <= 0:
                continue
            part = generate_transitions(n, seed=seed + 1000 * g + 97 * k, profile=chosen[stratum])
            part = part.with_columns(
                pl.lit(f"{stratum}.sqlog").alias("file"),
                (pl.lit("ab"[g] + "-") + pl.col("trace")).alias("trace"),
            )
            strata.update({(f"{stratum}.sqlog", t): stratum for t in part["trace"].unique()})
            parts.append(part)
        frames.append(pl.concat(parts) if parts else generate_transitions(0, seed=seed))
    return frames[0], frames[1], strata
