"""One account of every connection: its facts, each with where it comes from.

Every view that counts something about a connection (the diff's evidence and its
loss-detection table, the report, ``quicsm plot``, ``quicsm identify``) reads its counts from
this account instead of asking the trace its own question, so that a count is the same number
everywhere and says where it comes from. A fact's **provenance** is one of

- ``logged``: the producer logged it (``packet_lost``, ``spurious_loss``, ``pto`` events;
  states in ``congestion_state_updated``; metric fields);
- ``packets``: derived from the trace's packets and ACK frames (:mod:`quicsm.extract.packets`:
  a logged loss declaration acknowledged later was spurious; :mod:`quicsm.extract.wire`: RFC
  9002 loss detection and probe timeouts rebuilt from packets, for producers that log no loss
  or timer events);
- ``metrics``: derived from the logged metrics (states by the rule table,
  :mod:`quicsm.extract.rules`);
- ``absent``: no source holds it; ``note`` says why.

``note`` also says what the producer logged when another source answered ("logs none",
"logs 14"). Packets are the ground truth for spurious losses: a producer that logs loss
declarations and packets has its spurious losses counted from them, whether it logs
``spurious_loss`` events or not, so that two versions of a stack are counted alike.

The account is a frame, one row per trace (:data:`ACCOUNT_SCHEMA`): ``file, trace, vantage,
producer``, then for each fact of :data:`FACTS` three columns: the value (null when absent),
``<fact>_from`` and ``<fact>_note``. A fact is one entry of :data:`FACTS` and one branch of
:func:`_trace_account`. Why a sender was short of data is such a set of facts
(:data:`SHORT_OF_DATA`): its ApplicationLimited time and the parts of it the application,
flow control (connection and stream) and pacing account for, and what is left unknown
(:mod:`quicsm.extract.sendable`; the parts sum to the whole, absent parts counting 0), and the
time flow control held data back in any state. Metric series are normalised by the reader
(:mod:`quicsm.extract.sentinels`); the account says whether each series is logged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson
import polars as pl

from quicsm.core.diagnostics import Diagnostics
from quicsm.core.frames import TRANSITIONS_SCHEMA
from quicsm.core.states import APP_LIMITED, APP_LIMITED_CAUSES
from quicsm.extract.packets import PacketTimeline, read_packet_timelines
from quicsm.extract.profiles import Profile, detect_profile
from quicsm.extract.sendable import (
    APPLICATION,
    CAUSES,
    FLOW_CONTROL_CONNECTION,
    FLOW_CONTROL_STREAM,
    PACING,
    UNKNOWN,
    split_intervals,
)
from quicsm.extract.wire import WireResult, read_packets, wire_states
from quicsm.qlog.blocks import DEFAULT_LIMITS, ReadLimits

__all__ = [
    "ABSENT",
    "ACCOUNT_SCHEMA",
    "APP_LIMITED_PARTS",
    "FACTS",
    "LOGGED",
    "METRICS",
    "PACKETS",
    "SERIES",
    "SHORT_OF_DATA",
    "Fact",
    "account_frame",
    "fact_of",
    "facts_of",
    "read_account",
]

LOGGED: Final = "logged"
PACKETS: Final = "packets"
METRICS: Final = "metrics"
ABSENT: Final = "absent"

#: ApplicationLimited time and its parts by cause (:mod:`quicsm.extract.sendable`): column ->
#: (cause, or "" for the whole, in words); the parts sum to the whole (absent parts count 0)
SHORT_OF_DATA: Final[dict[str, tuple[str, str]]] = {
    "app_limited_ms": ("", "time ApplicationLimited (ms)"),
    **{
        f"app_limited_{cause}_ms": (cause, f"ApplicationLimited time when {words} (ms)")
        for cause, words in CAUSES.items()
    },
    "flow_control_ms": ("", "time flow control held data back, in any state (ms)"),
}
#: the parts of ``app_limited_ms`` by cause: cause -> column
APP_LIMITED_PARTS: Final[dict[str, str]] = {
    cause: column for column, (cause, _) in SHORT_OF_DATA.items() if cause
}

#: the counted facts: column -> what it counts
FACTS: Final[dict[str, str]] = {
    "data_packets": "1-RTT data packets sent (ack-eliciting)",
    "acknowledged": "data packets acknowledged at least once",
    "losses": "packets declared lost",
    "losses_packet_threshold": "losses by packet threshold (RFC 9002 section 6.1.1)",
    "losses_time_threshold": "losses by time threshold (RFC 9002 section 6.1.2)",
    "spurious_losses": "packets declared lost and acknowledged later",
    "spurious_losses_logged": "spurious_loss events the producer logged",
    "ptos": "probe timeouts (RFC 9002 section 6.2)",
    "recovery_episodes": "entries into Recovery",
    **{column: words for column, (_, words) in SHORT_OF_DATA.items()},
}
#: the metric series whose presence the account states: column -> its name in words
SERIES: Final[dict[str, str]] = {
    "cwnd_bytes": "cwnd",
    "bytes_in_flight": "bytes in flight",
    "ssthresh_bytes": "ssthresh",
    "smoothed_rtt_ms": "smoothed RTT",
    "min_rtt_ms": "minimum RTT",
    "latest_rtt_ms": "RTT samples",
    "pacing_rate_bps": "pacing rate",
}

ACCOUNT_SCHEMA: Final[dict[str, pl.DataType]] = {
    "file": TRANSITIONS_SCHEMA["file"],
    "trace": TRANSITIONS_SCHEMA["trace"],
    "vantage": pl.String(),
    "producer": pl.String(),
    **{
        name: dtype
        for fact in (*FACTS, *SERIES)
        for name, dtype in (
            (fact, pl.Float64()),
            (f"{fact}_from", pl.String()),
            (f"{fact}_note", pl.String()),
        )
    },
}


@dataclass(frozen=True)
class Fact:
    """One fact of one trace: its value (None when absent), provenance and note."""

    value: float | None
    source: str
    note: str | None = None


def fact_of(row: Mapping[str, Any], fact: str) -> Fact:
    """The fact ``fact`` of one row of the account."""
    return Fact(row[fact], row[f"{fact}_from"], row[f"{fact}_note"])


def facts_of(account: pl.DataFrame, trace: str) -> dict[str, Fact]:
    """Every fact of trace ``trace`` in ``account`` (empty when it has no row)."""
    rows = account.filter(pl.col("trace").cast(pl.String) == trace)
    if rows.height == 0:
        return {}
    row = rows.row(0, named=True)
    return {fact: fact_of(row, fact) for fact in (*FACTS, *SERIES)}


def _logged(n: float) -> Fact:
    return Fact(float(n), LOGGED)


def _producer(profile: Profile, labels: Mapping[str, Any]) -> str:
    """The producer in words: its version where the labels say it (``quic-go v0.48.2``)."""
    version = labels.get("version") or labels.get("code_version")
    if isinstance(version, str) and version and profile.name != "generic":
        shown = version if version.startswith("v") or profile.name != "quic-go" else f"v{version}"
        return f"{profile.name} {shown}"
    return profile.name


def _trace_account(
    *,
    profile: Profile,
    producer: str,
    events: Mapping[str, int],
    triggers: Mapping[str, int],
    series: Mapping[str, int],
    has_metrics: bool,
    recovery: tuple[int, bool],
    packets: PacketTimeline | None,
    wire: WireResult | None,
    app_limited: Sequence[tuple[float, float]] = (),
    end_ms: float = 0.0,
) -> dict[str, Fact]:
    """The facts of one trace. ``events``: its logged event counts by kind (``packet_lost``,
    ``spurious_loss``, ``pto``); ``triggers``: its ``packet_lost`` events by trigger;
    ``series``: values per metric column; ``recovery``: entries into Recovery and whether the
    trace logs its states itself; ``wire``: its packets through RFC 9002 loss detection (only
    for a trace whose producer logs no loss or timer events); ``app_limited``: its
    ApplicationLimited visits ``(start, end)`` in ms, in time order; ``end_ms``: its end."""
    out: dict[str, Fact] = {}
    if packets is not None:
        out["data_packets"] = Fact(float(len(packets.sent[0])), PACKETS)
        out["acknowledged"] = Fact(float(packets.acknowledged), PACKETS)
    else:
        for fact in ("data_packets", "acknowledged"):
            out[fact] = Fact(None, ABSENT, "the trace logs no 1-RTT packets")
    lost = events.get("packet_lost", 0)
    logs_losses = lost > 0 or profile.logs_packet_lost
    if logs_losses:
        out["losses"] = _logged(lost)
        named = sum(triggers.values())
        for fact, trigger in (
            ("losses_packet_threshold", "reordering_threshold"),
            ("losses_time_threshold", "time_threshold"),
        ):
            if lost and not named:
                out[fact] = Fact(None, ABSENT, f"{producer} names no trigger of its losses")
            else:
                out[fact] = _logged(triggers.get(trigger, 0))
    else:
        unlogged = f"{producer} logs no packet_lost"
        if wire is not None:
            out["losses"] = Fact(float(wire.losses), PACKETS, unlogged)
        else:
            why = "its packets log no ACK frames" if packets is not None else "it logs no packets"
            out["losses"] = Fact(None, ABSENT, f"{unlogged}, and {why}")
        for fact in ("losses_packet_threshold", "losses_time_threshold"):
            out[fact] = Fact(None, ABSENT, unlogged)
    spurious = events.get("spurious_loss", 0)
    out["spurious_losses_logged"] = _logged(spurious)
    said = f"{producer} logs {spurious}" if spurious else f"{producer} logs none"
    acks = packets is not None and len(packets.largest_acked[0]) > 0
    if packets is not None and acks and packets.losses_here and logs_losses:
        # the producer's own loss declarations, each checked against the ACKs after it
        out["spurious_losses"] = Fact(float(packets.spurious), PACKETS, said)
    elif spurious:
        out["spurious_losses"] = _logged(spurious)
    elif wire is not None and not logs_losses:
        out["spurious_losses"] = Fact(float(wire.spurious), PACKETS, said)
    elif packets is not None and not acks:
        out["spurious_losses"] = Fact(
            None, ABSENT, f"{said}, and its packets log no ACK frames to check its losses against"
        )
    elif packets is not None and not packets.losses_here:
        out["spurious_losses"] = Fact(
            None,
            ABSENT,
            f"{said}; the data sender is the peer, whose loss declarations are in its own log",
        )
    else:
        out["spurious_losses"] = Fact(
            None, ABSENT, f"{said}, and the trace logs no packets to check its losses against"
        )
    ptos = events.get("pto", 0)
    if ptos or profile.logs_pto:
        out["ptos"] = _logged(ptos)
    elif wire is not None:
        out["ptos"] = Fact(float(wire.probes), PACKETS, f"{producer} logs no probe timeout")
    else:
        why = "its packets log no ACK frames" if packets is not None else "it logs no packets"
        out["ptos"] = Fact(
            None, ABSENT, f"{producer} logs no probe timeout, and {why} to find them from"
        )
    entries, explicit = recovery
    if explicit:
        out["recovery_episodes"] = _logged(entries)
    elif has_metrics:
        out["recovery_episodes"] = Fact(float(entries), METRICS)
    elif wire is not None or packets is not None:
        out["recovery_episodes"] = Fact(float(entries), PACKETS)
    else:
        out["recovery_episodes"] = Fact(
            None, ABSENT, "the trace logs no states, recovery metrics or packets"
        )
    for column in SERIES:
        n = series.get(column, 0)
        if n:
            out[column] = _logged(n)
        elif column == "ssthresh_bytes" and not profile.logs_ssthresh:
            out[column] = Fact(None, ABSENT, f"{producer} logs no ssthresh")
        else:
            out[column] = Fact(None, ABSENT, "not logged (or logged only as unset)")
    states = LOGGED if explicit else METRICS if has_metrics else PACKETS
    out.update(
        _short_of_data(
            producer=producer,
            app_limited=app_limited,
            end_ms=end_ms,
            states=states,
            packets=packets,
            pacing_rate=bool(series.get("pacing_rate_bps")),
        )
    )
    return out


def _short_of_data(
    *,
    producer: str,
    app_limited: Sequence[tuple[float, float]],
    end_ms: float,
    states: str,
    packets: PacketTimeline | None,
    pacing_rate: bool,
) -> dict[str, Fact]:
    """ApplicationLimited time and its parts by cause (:mod:`quicsm.extract.sendable`), and
    the time flow control held data back in any state. ``states``: the provenance of the
    trace's states (its ApplicationLimited visits)."""
    total = float(sum(b - a for a, b in app_limited if b > a))
    out = {"app_limited_ms": Fact(total, states)}
    pacer = f"{producer} logs no pacer release time" + (
        " (only the pacing rate, which says how fast, not when)" if pacing_rate else ""
    )
    out[APP_LIMITED_PARTS[PACING]] = Fact(None, ABSENT, pacer + "; its time is in unknown")
    timeline = packets.sendable if packets is not None else None
    if timeline is None:
        if packets is None:
            why = "the trace logs no packets"
        elif packets.captured:
            why = "a capture: its sender's own sends and limits are not told apart"
        else:
            why = "its packets log no STREAM frames"
        for cause in (APPLICATION, FLOW_CONTROL_CONNECTION, FLOW_CONTROL_STREAM):
            out[APP_LIMITED_PARTS[cause]] = Fact(None, ABSENT, why)
        out[APP_LIMITED_PARTS[UNKNOWN]] = Fact(total, states, f"all of it: {why}")
        out["flow_control_ms"] = Fact(None, ABSENT, why)
        return out
    split = split_intervals(app_limited, timeline)
    whole = split_intervals([(0.0, max(end_ms, 0.0))], timeline)
    out[APP_LIMITED_PARTS[APPLICATION]] = Fact(
        split.by_cause[APPLICATION],
        PACKETS,
        "every byte of its streams sent (or none written yet), from its STREAM frames",
    )
    parameters = "transport parameters" if timeline.initial_limits else "no transport parameters"
    for cause, frame, limit in (
        (FLOW_CONTROL_CONNECTION, "DATA_BLOCKED", "MAX_DATA"),
        (FLOW_CONTROL_STREAM, "STREAM_DATA_BLOCKED", "MAX_STREAM_DATA"),
    ):
        column = APP_LIMITED_PARTS[cause]
        value, said = split.by_cause[cause], split.logged_ms[cause]
        if said > 0:
            out[column] = Fact(
                value, LOGGED, f"from the {frame} frames it sent, and the credit arithmetic"
            )
        elif timeline.limits_known:
            out[column] = Fact(
                value,
                PACKETS,
                f"credit arithmetic: bytes sent against the peer's limits ({parameters}, "
                f"{limit} received); no {frame} frame it sent held it",
            )
        else:
            out[column] = Fact(
                None,
                ABSENT,
                f"the peer's limits are not logged (no transport parameters, no {limit} "
                f"received) and it sent no {frame}; its time, if any, is in unknown",
            )
    out[APP_LIMITED_PARTS[UNKNOWN]] = Fact(
        split.by_cause[UNKNOWN],
        PACKETS,
        "data was left to send and no flow-control limit held it: the pacer, the CPU or the "
        "application's writes, not told apart",
    )
    held = whole.by_cause[FLOW_CONTROL_CONNECTION] + whole.by_cause[FLOW_CONTROL_STREAM]
    said = whole.logged_ms[FLOW_CONTROL_CONNECTION] + whole.logged_ms[FLOW_CONTROL_STREAM]
    if said > 0:
        out["flow_control_ms"] = Fact(
            held, LOGGED, "from the *_BLOCKED frames it sent, and the credit arithmetic"
        )
    elif timeline.limits_known:
        out["flow_control_ms"] = Fact(
            held, PACKETS, "credit arithmetic: bytes sent against the peer's limits"
        )
    else:
        out["flow_control_ms"] = Fact(None, ABSENT, "the peer's limits are not logged")
    return out


def _counts(frame: pl.DataFrame, key: str, value: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for trace, what, n in frame.select("trace", key, value).iter_rows():
        out.setdefault(str(trace), {})[str(what)] = int(n)
    return out


def account_frame(
    transitions: pl.DataFrame,
    metrics: pl.DataFrame,
    labels: Mapping[str, Mapping[str, Any]],
    *,
    packets: Mapping[str, PacketTimeline] | None = None,
    wire: Mapping[str, WireResult] | None = None,
) -> pl.DataFrame:
    """The account of every trace of ``transitions`` (in its order) from what was read:
    ``metrics`` (:func:`quicsm.extract.read.read_metrics`), each trace's ``labels`` (its
    producer), ``packets`` (:func:`quicsm.extract.packets.read_packet_timelines`) and ``wire``
    (:func:`quicsm.extract.wire.wire_states` of the traces that need it)."""
    packets = packets or {}
    wire = wire or {}
    m = metrics.with_columns(pl.col("trace").cast(pl.String), pl.col("event").cast(pl.String))
    events = _counts(m.group_by("trace", "event").len(), "event", "len")
    lost = m.filter((pl.col("event") == "packet_lost") & pl.col("trigger").is_not_null())
    triggers = _counts(lost.group_by("trace", "trigger").len(), "trigger", "len")
    updates = m.filter(pl.col("event") == "metrics")
    series_counts = updates.group_by("trace").agg(
        [pl.col(c).count().alias(c) for c in SERIES if c != "latest_rtt_ms"]
    )
    samples = m.group_by("trace").agg(pl.col("latest_rtt_ms").count())
    series: dict[str, dict[str, int]] = {}
    for counted in series_counts.iter_rows(named=True):
        trace = str(counted.pop("trace"))
        series[trace] = {k: int(v) for k, v in counted.items()}
    for trace, n in samples.iter_rows():
        series.setdefault(str(trace), {})["latest_rtt_ms"] = int(n)
    tr = transitions.with_columns(
        pl.col("trace").cast(pl.String),
        pl.col("state").cast(pl.String),
        pl.col("source").cast(pl.String),
    )
    visits = _app_limited_visits(tr)
    per_trace = tr.group_by("trace", maintain_order=True).agg(
        pl.col("file").first(),
        pl.col("end_ms").max().alias("end"),
        pl.col("vantage").cast(pl.String).first(),
        (pl.col("state") == "Recovery").sum().alias("recovery"),
        (pl.col("source") == "explicit").any().alias("explicit"),
    )
    rows: list[dict[str, Any]] = []
    for trace, file, end, vantage, recovery, explicit in per_trace.iter_rows():
        own = labels.get(trace, {})
        profile = _profile(own)
        producer = _producer(profile, own)
        facts = _trace_account(
            profile=profile,
            producer=producer,
            events=events.get(trace, {}),
            triggers=triggers.get(trace, {}),
            series=series.get(trace, {}),
            has_metrics=bool(series.get(trace, {}).get("cwnd_bytes")),
            recovery=(int(recovery), bool(explicit)),
            packets=packets.get(trace),
            wire=wire.get(trace),
            app_limited=visits.get(trace, []),
            end_ms=float(end or 0.0),
        )
        row: dict[str, Any] = {
            "file": str(file),
            "trace": trace,
            "vantage": vantage,
            "producer": producer,
        }
        for name, fact in facts.items():
            row[name], row[f"{name}_from"], row[f"{name}_note"] = fact.value, fact.source, fact.note
        rows.append(row)
    if not rows:
        return pl.DataFrame(schema=ACCOUNT_SCHEMA)
    return pl.DataFrame(rows, schema=ACCOUNT_SCHEMA, orient="row")


def _app_limited_visits(transitions: pl.DataFrame) -> dict[str, list[tuple[float, float]]]:
    """Each trace's ApplicationLimited visits ``(start, end)`` in ms: a state lasts until the
    trace's next one, its last until ``end_ms`` (the censoring rule of time-in-state). In a
    model that splits it by cause (``split_app_limited``) its parts are consecutive visits:
    one visit again, so the account is the same either way."""
    visits = (
        transitions.select("trace", "time_ms", "state", "end_ms")
        .with_columns(
            pl.col("time_ms").shift(-1).over("trace").fill_null(pl.col("end_ms")).alias("until")
        )
        .filter(pl.col("state").is_in([APP_LIMITED, *APP_LIMITED_CAUSES]))
    )
    out: dict[str, list[tuple[float, float]]] = {}
    for trace, a, b in visits.select("trace", "time_ms", "until").iter_rows():
        own = out.setdefault(str(trace), [])
        if own and own[-1][1] == a:  # the next part of one split visit
            own[-1] = (own[-1][0], float(b))
        else:
            own.append((float(a), float(b)))
    return out


def _profile(labels: Mapping[str, Any]) -> Profile:
    title, version = labels.get("title"), labels.get("code_version")
    return detect_profile(
        title=title if isinstance(title, str) else None,
        code_version=version if isinstance(version, str) else None,
        labels=labels,
    )


def needs_wire(labels: Mapping[str, Any], events: Mapping[str, int]) -> bool:
    """Whether a trace's losses or probe timeouts must come from its packets: its producer
    logs no ``packet_lost`` (or no probe timeout) and the trace holds none."""
    profile = _profile(labels)
    lost = not profile.logs_packet_lost and not events.get("packet_lost")
    pto = not profile.logs_pto and not events.get("pto")
    return lost or pto


def read_account(
    transitions: pl.DataFrame,
    metrics: pl.DataFrame,
    traces: pl.DataFrame,
    *,
    on_error: str = "raise",
    diagnostics: Diagnostics | None = None,
    limits: ReadLimits = DEFAULT_LIMITS,
    packets: Mapping[str, PacketTimeline] | None = None,
) -> pl.DataFrame:
    """The account of every trace of ``transitions``, reading the packets of their files
    (``packets``: their timelines, read already): ``traces`` is the trace table
    (:func:`quicsm.extract.read.read_traces`: its ``labels`` name each trace's producer)."""
    labels = {str(t): orjson.loads(raw) for t, raw in traces.select("trace", "labels").iter_rows()}
    ids = [str(t) for t in transitions.get_column("trace").unique(maintain_order=True).to_list()]
    files = [str(f) for f in transitions.get_column("file").unique(maintain_order=True)]
    if packets is None:
        packets = read_packet_timelines(
            files,
            ids,
            on_error=on_error,
            diagnostics=diagnostics,
            limits=limits,
            byte_offsets=False,
        )
    m = metrics.with_columns(pl.col("trace").cast(pl.String), pl.col("event").cast(pl.String))
    events = _counts(m.group_by("trace", "event").len(), "event", "len")
    wanted = [t for t in ids if t in packets and needs_wire(labels.get(t, {}), events.get(t, {}))]
    wire = _wire_results(wanted, limits=limits, on_error=on_error, diagnostics=diagnostics)
    return account_frame(transitions, metrics, labels, packets=packets, wire=wire)


def _wire_results(
    ids: Iterable[str],
    *,
    limits: ReadLimits,
    on_error: str = "raise",
    diagnostics: Diagnostics | None = None,
) -> dict[str, WireResult]:
    """:func:`quicsm.extract.wire.wire_states` of each trace id (each file read once); the
    records a lenient read skipped go to ``diagnostics`` (strict: the first raises)."""
    from quicsm.extract.loading import report_skipped

    by_file: dict[str, list[str]] = {}
    for t in ids:
        by_file.setdefault(t.rsplit("#", 1)[0], []).append(t)
    out: dict[str, WireResult] = {}
    for file, chosen in by_file.items():
        read = read_packets(file, limits=limits, lenient=on_error == "skip")
        if diagnostics is not None:
            report_skipped(diagnostics, read.read)
        for t in chosen:
            index = int(t.rsplit("#", 1)[1])
            found = read.packets.get(index)
            if found and any(p.acks for p in found):
                out[t] = wire_states(found)
    return out
