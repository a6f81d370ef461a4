"""One qlog trace as the readers see it: its header fields and its congestion-relevant events.

:class:`TraceBuilder` is fed decoded events by every serialization's parser and produces a
:class:`TraceData`. Times are kept in milliseconds on the trace's own clock; the reader subtracts
the first event's time so that every trace starts at 0 ms.

Time handling (qlog main schema, "time_format" / draft-00 "time_units"):

- ``time_units: "us"`` (draft-00/01 ``configuration``) scales every time, and the RTT metrics,
  by 1/1000; everything later is milliseconds;
- ``time_format`` ``delta`` (draft-02/0.3) and ``relative_to_previous_event`` (main schema)
  make each time relative to the previous event, so such traces are summed as they are read;
- ``absolute``, ``relative`` and ``relative_to_epoch`` times are used as they are: only
  differences from the first event matter.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from quicsm.core.diagnostics import RecordProblem, describe
from quicsm.qlog.events import (
    LOST,
    MAX_MAGNITUDE,
    MVFST_METRIC,
    STATE,
    MetricEvent,
    StateEvent,
    as_number,
    event_kind,
    metric_event,
    state_event,
)

DELTA_FORMATS = frozenset({"delta", "relative_to_previous_event"})

#: producers known to write an earlier time on some later events (picoquic writes 0 on some
#: events after the first ones): their backward times are repaired, not rejected
BACKWARD_TIME_PRODUCERS: Final[tuple[str, ...]] = ("picoquic",)
#: how many repaired records a trace names (the rest are counted)
MAX_NAMED_REPAIRS = 5
#: packet events (the part of the name after the last ":", lower case; qlog 0.1 wrote
#: PACKET_TX/PACKET_RX in some converters), handed to :attr:`TraceBuilder.packet_hook`
PACKET_EVENTS: Final[frozenset[str]] = frozenset(
    {"packet_sent", "packet_received", "packet_tx", "packet_rx"}
)

#: the transport parameters' event (the part of the name after the last ":"), handed to
#: :attr:`TraceBuilder.parameters_hook`
PARAMETERS_EVENT: Final = "parameters_set"

#: ``(time_ms, short_name, data, time_scale)`` of one packet event, in reading order
PacketHook = Callable[[float, str, object, float], None]


class EventSink(Protocol):
    """Consumes a trace's metric, loss and timer events as they are decoded."""

    def __call__(self, event: MetricEvent) -> object: ...

    def wanted(self) -> bool:
        """Whether more events are wanted (``False``: the reader may skip decoding them)."""
        ...


#: a sink's native derive pass over a block of records (``NativeDeriver.scan_records`` of
#: :mod:`quicsm.extract.native`): ``(buf, pos, end, sep, scale, latest, latest_other, feed,
#: no_states)`` ->
#: ``(rs, re, latest, latest_other, checked, visited)``
NativeScan = Callable[
    [Any, int, int, int, float, float | None, float | None, bool, bool],
    tuple[int, int, float | None, float | None, bool, int],
]


class NativePackets(Protocol):
    """Columns that take a trace's ``packet_sent`` / ``packet_received`` events as the native
    core reads them (``quicsm._native.packet_records``; :class:`quicsm.extract.packets.
    PacketColumns`): the records it hands back go to :attr:`TraceBuilder.packet_hook` as
    before, in file order between the chunks it read."""

    #: the first source connection ID of the trace's packets so far
    first_scid: str | None

    def rows(self) -> int:
        """How many packet rows the columns hold."""
        ...

    def absorb(self, first_scid: str | None, sizes: Any, columns: Any) -> None:
        """A chunk of rows read natively (what ``packet_records`` returns after its stop)."""
        ...

    def loss(self, time: float, short: str, data: object, scale: float) -> None:
        """A ``packet_lost`` event decoded in Python (:attr:`TraceBuilder.loss_hook`)."""
        ...

    def absorb_losses(self, times: bytes, numbers: bytes, codes: bytes, triggers: Any) -> None:
        """The ``packet_lost`` events the native core read, as :meth:`loss` keeps them: when
        the columns' :meth:`loss` is the trace's loss hook, ``packet_records`` reads them too."""
        ...


#: given a trace's builder (its header is read), the sink of its metric, loss and timer events
#: (instead of keeping them in ``metrics``), or ``None`` to keep them
MetricSink = Callable[["TraceBuilder"], EventSink | None]


class Discard:
    """The sink of a reader that wants no metric, loss or timer event (trace summaries,
    explicit states only): they are neither kept nor decoded, so memory does not grow with
    them. ``metric_sink=Discard.of``."""

    def __call__(self, event: MetricEvent) -> object:
        return None

    def wanted(self) -> bool:
        return False

    @staticmethod
    def of(builder: TraceBuilder) -> Discard:
        return _DISCARD


_DISCARD = Discard()


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


#: JSON's scalars (a tuple: ``isinstance`` with a tuple is several times faster than with a
#: union, and a lab trace's header holds about 70 labels)
_SCALARS = (str, int, float, bool)


def _scalar_labels(value: object) -> dict[str, Any]:
    return {str(k): v for k, v in _dict(value).items() if v is None or isinstance(v, _SCALARS)}


def is_header(obj: object) -> bool:
    """A qlog file/trace header record (JSON-SEQ or NDJSON), not an event."""
    if not isinstance(obj, dict) or "name" in obj:
        return False
    return any(k in obj for k in ("trace", "traces", "qlog_version", "file_schema", "qlog_format"))


def version_of(top: dict[str, Any]) -> str:
    """How the header names its qlog version (``0.3``, ``file_schema+0.3`` for quic-go's hybrid)."""
    version = top.get("qlog_version")
    version = str(version) if isinstance(version, str | int | float) else None
    if "file_schema" in top:
        return "file_schema" + (f"+{version}" if version else "")
    return version or "unknown"


@dataclass
class TraceData:
    """Everything the readers keep of one trace."""

    index: int
    format: str
    vantage: str
    title: str | None
    code_version: str | None
    labels: dict[str, Any]
    cc_algorithm: str | None
    first_time: float | None
    last_time: float | None
    n_events: int | None
    states: list[StateEvent]
    metrics: list[MetricEvent]
    event_counts: Counter[str] | None = None
    problems: list[RecordProblem] = field(default_factory=list)
    #: records whose time went backwards and was repaired (a known producer's quirk): the
    #: first :data:`MAX_NAMED_REPAIRS` named (``traces[0].events[7]``), and how many in all
    repaired: list[str] = field(default_factory=list)
    n_repaired: int = 0
    #: the time of the last metric, loss or timer record read (``None``: none)
    last_derive_time: float | None = None

    def repair_note(self) -> str | None:
        """One line saying which records' times were repaired, or ``None``."""
        if not self.n_repaired:
            return None
        named = ", ".join(self.repaired)
        more = self.n_repaired - len(self.repaired)
        extra = f" and {more} more" if more > 0 else ""
        return (
            f"{self.n_repaired} event{'s' * (self.n_repaired != 1)} logged an earlier time than "
            f"the event before them ({named}{extra}; a known quirk of this producer): each was "
            "kept with the time of the event before it"
        )

    @property
    def duration_ms(self) -> float:
        if self.first_time is None or self.last_time is None:
            return 0.0
        return max(0.0, self.last_time - self.first_time)


class TraceBuilder:
    """Accumulates one trace's events; knows its header's time conventions."""

    def __init__(
        self,
        index: int,
        top: dict[str, Any],
        trace: dict[str, Any],
        serialization: str,
        *,
        want_metrics: bool,
        full: bool,
        metric_sink: MetricSink | None = None,
    ) -> None:
        self.index = index
        self.serialization = serialization
        self.header(top, trace)
        self.want_metrics = want_metrics
        self.full = full
        self.first_time: float | None = None
        self.last_time: float | None = None
        self._previous = 0.0
        self.n_events = 0
        self.counts: Counter[str] | None = Counter() if full else None
        self.states: list[StateEvent] = []
        self.metrics: list[MetricEvent] = []
        self.problems: list[RecordProblem] = []
        #: the latest time seen so far, overall and per kind of kept event (the fast path
        #: decodes state events before the others of a block): times may not go backwards
        self.latest: float | None = None
        self._latest_of: dict[bool, float] = {}
        self.repaired: list[str] = []
        self.n_repaired = 0
        #: when set (a full read), every packet event is handed to it
        self.packet_hook: PacketHook | None = None
        #: when set (a full read), every ``packet_lost`` event is handed to it as well
        self.loss_hook: PacketHook | None = None
        #: when set (a full read), every ``parameters_set`` event is handed to it as well
        self.parameters_hook: PacketHook | None = None
        #: when set with :attr:`packet_hook`, the columns the native core reads packet events
        #: into (the hook takes the records it hands back)
        self.packet_columns: NativePackets | None = None
        self.last_derive_time: float | None = None
        self._sink = metric_sink(self) if metric_sink is not None else None

    def metrics_wanted(self) -> bool:
        """Metric, loss and timer events are wanted (and their sink, if any, still wants them)."""
        return self.want_metrics and (self._sink is None or self._sink.wanted())

    def discards(self) -> bool:
        """Whether metric, loss and timer events are not wanted at all (a sink that wants none:
        the reader neither keeps nor decodes them)."""
        return self._sink is not None and not self._sink.wanted()

    def sink_wants(self) -> bool:
        """Whether the sink (if any) still wants events."""
        return self._sink is not None and self._sink.wanted()

    def native_packets(self) -> NativePackets | None:
        """The columns the native core may read this trace's packet events into (set by the
        reader of packets with its :attr:`packet_hook`); the caller counts the events by
        name when :attr:`counts` does."""
        return None if self.packet_hook is None else self.packet_columns

    def native_scan(self) -> NativeScan | None:
        """The sink's native derive pass, if it has one (and events are not kept)."""
        if self._sink is None or self.full:
            return None
        scan: NativeScan | None = getattr(self._sink, "scan_records", None)
        return scan

    def loss_clock(self) -> tuple[float | None, float | None, float | None]:
        """What :meth:`add` checks a loss event's time against and keeps of it: the time it may
        not be earlier than, the latest time and the latest time of an event states are derived
        from (the native core reads loss events so, ``quicsm._native.packet_records``)."""
        return self._latest_of.get(False, self.first_time), self.latest, self.last_derive_time

    def set_loss_clock(self, bound: float, latest: float, last_derive: float) -> None:
        """:meth:`loss_clock` after loss events :meth:`add` did not see (read natively: the
        last one's time, then the latest times)."""
        self._latest_of[False] = bound
        self.latest = latest
        self.last_derive_time = last_derive

    def native_plan(self) -> tuple[bool, Any] | None:
        """How a contained-JSON reader may read this trace's events natively
        (``quicsm._native.contained_events``): ``(feed, deriver)``, where ``deriver`` is the
        sink's native deriver when its events are wanted (``feed``), ``None`` when they are
        not; ``None`` when they must be read in Python (a packet or loss hook, events kept in
        ``metrics``, or a sink without a native deriver)."""
        hooks = (self.packet_hook, self.loss_hook, self.parameters_hook)
        if any(h is not None for h in hooks) or self.counts is None:
            return None
        sink = self._sink
        if sink is None:
            return None
        if not sink.wanted():
            return False, None
        deriver = getattr(sink, "native_deriver", None)
        return None if deriver is None else (True, deriver)

    def native_census(self) -> tuple[bool, float, bool] | None:
        """How a full read of JSON-SEQ/NDJSON records may read this trace's events natively
        (``quicsm._native.census_records``): ``(capabilities, ssthresh_unset_from,
        ack_seen)``, where ``capabilities`` says the sink sees capabilities (a sink with
        ``ssthresh_unset_from``, ``ack_frames`` and ``native_capabilities``, which takes what
        the native read saw; its packet hook is its own); ``None`` when they must be read in
        Python (events kept in ``metrics``, another hook or sink)."""
        if not self.full or self.counts is None:
            return None
        if self.loss_hook is not None or self.parameters_hook is not None:
            return None
        sink = self._sink
        if sink is None:
            return None
        if not sink.wanted():
            return (False, math.inf, False) if self.packet_hook is None else None
        unset = getattr(sink, "ssthresh_unset_from", None)
        if unset is None or self.packet_hook != getattr(sink, "packet_hook", None):
            return None
        return True, unset, bool(getattr(sink, "ack_frames", 0))

    def census_read(self, capabilities: int, packets: int, ack_frames: bool) -> None:
        """What a native census read saw of the capabilities (:meth:`native_census`)."""
        take = getattr(self._sink, "native_capabilities", None)
        if take is not None:
            take(capabilities, packets, ack_frames)

    def read_natively(
        self,
        clock: tuple[float, float | None, float | None, float | None, float | None],
        events: int,
        counts: list[tuple[str, int]],
        states: list[tuple[float, str, str | None, str | None]],
    ) -> None:
        """What a native read of events gave (:meth:`native_plan`): the clock after them
        (``_previous``, ``first_time``, ``last_time``, ``latest``, ``last_derive_time``), how
        many, the count of each name and the explicit states, in file order."""
        (self._previous, self.first_time, self.last_time, self.latest, self.last_derive_time) = (
            clock
        )
        self.n_events += events
        if self.counts is not None:
            for name, n in counts:
                self.counts[name] += n
        self.states += [StateEvent(t, new, old, trigger) for t, new, old, trigger in states]

    def latest_of_others(self) -> float | None:
        """The time the next non-state event may not precede."""
        return self._latest_of.get(False, self.first_time)

    def set_latest(self, latest: float | None, latest_other: float | None) -> None:
        """The time-order state after non-state events were checked elsewhere (natively)."""
        self.latest = latest
        if latest_other is not None:
            self._latest_of[False] = latest_other
            self.last_derive_time = latest_other

    def header(self, top: dict[str, Any], trace: dict[str, Any]) -> None:
        """Take the header fields of ``top`` (the file) and ``trace``; may be called again when
        a contained-JSON trace names members after its events."""
        common = _dict(trace.get("common_fields"))
        configuration = _dict(trace.get("configuration"))
        vantage = _dict(trace.get("vantage_point")).get("type", trace.get("vantagepoint"))
        vantage = vantage.lower() if isinstance(vantage, str) else "unknown"
        self.vantage = vantage if vantage in ("client", "server") else "unknown"
        title = trace.get("title", top.get("title"))
        self.title = title if isinstance(title, str) else None
        # quic-go <= v0.55 writes it under the top-level "configuration"
        versions = (
            top.get("code_version"),
            _dict(top.get("configuration")).get("code_version"),
            trace.get("code_version"),
            configuration.get("code_version"),
        )
        self.code_version = next((v for v in versions if isinstance(v, str)), None)
        self.labels = _scalar_labels(trace.get("quicsm_labels"))
        cc = None
        for source in (self.labels, configuration, common, trace):
            for key in ("cc_algorithm", "congestion_control", "cc_algo", "cc"):
                if isinstance(source.get(key), str):
                    cc = source[key]
                    break
            if cc:
                break
        self.cc_algorithm: str | None = cc
        time_format = common.get("time_format", trace.get("time_format"))
        self.delta = isinstance(time_format, str) and time_format in DELTA_FORMATS
        units = configuration.get("time_units", common.get("time_units"))
        self.scale = 0.001 if units == "us" else 1.0
        self.format = f"{self.serialization} {version_of(top)}"
        producer = " ".join(
            str(v).lower()
            for v in (self.title, top.get("title"), self.labels.get("stack"))
            if isinstance(v, str)
        )
        self.repairs_backward = any(name in producer for name in BACKWARD_TIME_PRODUCERS)

    @property
    def timing(self) -> tuple[bool, float]:
        """What the header says about event times (a change after events were read means
        they must be read again)."""
        return self.delta, self.scale

    def event_time(self, raw: object, offset: int | None, *, where: str | None = None) -> float:
        """Milliseconds on the trace clock; delta formats are summed in reading order."""
        t = as_number(raw, offset, '"time"', where=where, bound=MAX_MAGNITUDE) * self.scale
        if self.delta:
            t += self._previous
            self._previous = t
        return t

    def repair(self, t: float, where: str | None) -> float:
        """``t``, or for a producer known to log earlier times on later events
        (:data:`BACKWARD_TIME_PRODUCERS`), the latest time read so far when ``t`` is earlier:
        the record is kept and named in :attr:`TraceData.repaired`."""
        latest = self.latest
        if not self.repairs_backward or latest is None or t >= latest:
            return t
        self.n_repaired += 1
        if len(self.repaired) < MAX_NAMED_REPAIRS:
            self.repaired.append(f"{where or 'an event'} at {t:.6g} ms after {latest:.6g} ms")
        return latest

    def observe(self, t: float, offset: int | None = None, *, where: str | None = None) -> None:
        """An event's time, in reading order (every event when all are decoded)."""
        self._check_order(t, offset, where)
        if self.first_time is None:
            self.first_time = t
        self.last_time = t

    def end_at(self, t: float, offset: int | None) -> None:
        """The time of the trace's last event (read without decoding the ones between)."""
        self._check_order(t, offset, None)
        self.last_time = t

    def _check_order(
        self, t: float, offset: int | None, where: str | None, kind: bool | None = None
    ) -> None:
        latest = self.latest if kind is None else self._latest_of.get(kind, self.first_time)
        if latest is not None and t < latest:
            raise RecordProblem(
                offset,
                f"a time no earlier than {latest:.6g} ms (times may not go backwards within "
                "a trace)",
                f"{t:.6g} ms",
                where=where,
            )
        if kind is not None:
            self._latest_of[kind] = t
        if self.latest is None or t > self.latest:
            self.latest = t

    def add(
        self, name: str, t: float, data: object, offset: int | None, *, where: str | None = None
    ) -> None:
        """An event whose name and time are known; keep it if it is congestion-relevant."""
        if self.counts is not None:
            self.counts[name] += 1
        kind = event_kind(name)
        if kind is None:
            if self.packet_hook is not None:
                short = name.rpartition(":")[2].lower()
                if short in PACKET_EVENTS:
                    try:
                        self.packet_hook(t, short, data, self.scale)
                    except RecordProblem as problem:  # the hook knows no record: this one
                        raise _placed(problem, offset, where) from None
                elif short == PARAMETERS_EVENT and self.parameters_hook is not None:
                    self.parameters_hook(t, short, data, self.scale)
            return
        if not self.full:
            self._check_order(t, offset, where, kind == STATE)
        if kind == STATE:
            self.states.append(state_event(t, data, offset, where=where))
            return
        if self.last_derive_time is None or t > self.last_derive_time:
            self.last_derive_time = t
        metric, state = metric_event(kind, t, data, offset, rtt_scale=self.scale, where=where)
        if kind == LOST and self.loss_hook is not None:  # its data is an object (checked)
            try:
                self.loss_hook(t, "packet_lost", data, self.scale)
            except RecordProblem as problem:
                raise _placed(problem, offset, where) from None
        if state is not None and kind == MVFST_METRIC:
            self.states.append(state)
        if metric is not None:
            if self._sink is not None:
                if self._sink.wanted():
                    self._sink(metric)  # streamed: memory does not grow with the trace
            else:
                self.metrics.append(metric)

    def finish(self) -> TraceData:
        if self.latest is not None and (self.last_time is None or self.last_time < self.latest):
            self.last_time = self.latest  # a last record skipped by a lenient read
        return TraceData(
            index=self.index,
            format=self.format,
            vantage=self.vantage,
            title=self.title,
            code_version=self.code_version,
            labels=self.labels,
            cc_algorithm=self.cc_algorithm,
            first_time=self.first_time,
            last_time=self.last_time,
            n_events=self.n_events,
            states=self.states,
            metrics=self.metrics,
            event_counts=self.counts,
            problems=self.problems,
            repaired=self.repaired,
            n_repaired=self.n_repaired,
            last_derive_time=self.last_derive_time,
        )


def object_event(
    obj: object, offset: int | None, *, where: str | None = None
) -> tuple[str, object, object]:
    """``(name, raw time, data)`` of a draft-02+ event object ``{time, name, data}``.

    Older objects with separate ``category`` and ``event`` members are accepted too.
    """
    if isinstance(obj, dict) and "time" in obj:
        name = obj.get("name")
        if name is None and isinstance(obj.get("event"), str):
            category = obj.get("category")
            name = f"{category}:{obj['event']}" if isinstance(category, str) else obj["event"]
        if isinstance(name, str):
            return name, obj["time"], obj.get("data", {})
        if name is not None:
            raise RecordProblem(offset, 'a string "name"', describe(name), where=where)
    got = describe(obj)
    if isinstance(obj, dict):
        missing = [k for k in ("time", "name") if k not in obj]
        got = "an object without " + " and ".join(f'"{k}"' for k in missing)
    raise RecordProblem(offset, 'an object with "time" and "name"', got, where=where)


def _placed(problem: RecordProblem, offset: int | None, where: str | None) -> RecordProblem:
    """A hook's problem (raised without a position) at the record being added."""
    if problem.offset is not None or problem.where is not None or problem.line is not None:
        return problem
    return RecordProblem(offset, problem.expected, problem.got, where=where)
