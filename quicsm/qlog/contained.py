"""Contained qlog: one JSON document with a ``traces`` array (draft-00 to 0.3 and main schema).

Two event encodings exist inside ``traces[i].events``:

- draft-00/01 (main-schema-00/01 section "event_fields"): each event is an *array* whose
  positions are named by the trace's ``event_fields``, e.g.
  ``["relative_time", "category", "event", "data"]``; the time column is ``relative_time``,
  ``delta_time`` or ``time``; ``configuration.time_units`` is ``ms`` or ``us``; some producers
  upper-case categories (``RECOVERY``, ``METRIC_UPDATE``) or write times as strings;
- draft-02 and later: each event is an object ``{time, name, data}``.

A document cut mid-write (quiche and picoquic write the closing brackets only at the end) is
repaired by :func:`repair_truncated`: it is cut after the last complete event (or trace) and the
open brackets are closed; every complete event is kept and the truncation is reported.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from quicsm.core.diagnostics import RecordProblem, describe
from quicsm.qlog.trace import MetricSink, TraceBuilder, TraceData, object_event

_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|["\[\]{},]', re.S)
_CLOSER = {ord("{"): "}", ord("["): "]"}
# cut points: between traces (stack "{[") and between events of a trace (stack "{[{[")
_CUT_DEPTHS = (b"{[", b"{[{[")


def repair_truncated(data: bytes) -> tuple[bytes, int] | None:
    """``(repaired document, cut offset)`` for a JSON document cut mid-write, else ``None``."""
    stack = bytearray()
    best: tuple[int, bytes] | None = None
    for match in _TOKEN.finditer(data):
        token = match.group()
        c = token[0]
        if len(token) > 1:  # a complete string
            continue
        if c == ord('"'):  # a string that never ends: the cut is inside it
            break
        if c in (ord("{"), ord("[")):
            stack.append(c)
        elif c in (ord("}"), ord("]")):
            if not stack or _CLOSER[stack[-1]] != chr(c):
                return None
            stack.pop()
            if bytes(stack) in _CUT_DEPTHS:
                best = (match.end(), bytes(stack))
        elif c == ord(",") and bytes(stack) in _CUT_DEPTHS:
            best = (match.start(), bytes(stack))
    if best is None:
        return None
    cut, open_ = best
    closers = "".join(_CLOSER[b] for b in reversed(open_)).encode()
    return data[:cut] + closers, cut


class ContainedParser:
    """Parses a whole contained-JSON qlog document into traces."""

    def __init__(
        self,
        *,
        want_metrics: bool = False,
        lenient: bool = False,
        metric_sink: MetricSink | None = None,
    ) -> None:
        self.want_metrics = want_metrics
        self.metric_sink = metric_sink
        self.lenient = lenient
        self.problems: list[RecordProblem] = []
        self.truncated_at: int | None = None

    def _problem(self, problem: RecordProblem) -> None:
        if not self.lenient:
            raise problem
        self.problems.append(problem)

    def parse(self, data: bytes) -> list[TraceData]:
        try:
            top = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            repaired = repair_truncated(data) if "end of data" in str(exc) else None
            if repaired is None:
                raise RecordProblem(
                    None, "a JSON document", _got(str(exc)), line=exc.lineno
                ) from None
            document, self.truncated_at = repaired
            top = orjson.loads(document)
        if not isinstance(top, dict):
            raise RecordProblem(None, 'a qlog object with "traces"', describe(top), line=1)
        traces = top.get("traces")
        if traces is None and isinstance(top.get("trace"), dict):
            traces = [top["trace"]]
        if not isinstance(traces, list):
            raise RecordProblem(None, 'a "traces" array', describe(traces), line=1)
        out: list[TraceData] = []
        for i, trace in enumerate(traces):
            if not isinstance(trace, dict):
                self._problem(
                    RecordProblem(None, "a trace object", describe(trace), where=f"traces[{i}]")
                )
                continue
            out.append(self._trace(len(out), i, top, trace))
        return out

    def _trace(self, index: int, i: int, top: dict[str, Any], trace: dict[str, Any]) -> TraceData:
        builder = TraceBuilder(
            index,
            top,
            trace,
            "JSON",
            want_metrics=self.want_metrics,
            full=True,
            metric_sink=self.metric_sink,
        )
        events = trace.get("events", [])
        if not isinstance(events, list):
            self._problem(
                RecordProblem(None, 'an "events" array', describe(events), where=f"traces[{i}]")
            )
            events = []
        fields = trace.get("event_fields")
        columns = None
        if isinstance(fields, list) and all(isinstance(f, str) for f in fields):
            columns = [f.lower() for f in fields]
            if "delta_time" in columns:
                builder.delta = True
        for j, event in enumerate(events):
            where = f"traces[{i}].events[{j}]"
            try:
                if columns is not None and isinstance(event, list):
                    name, raw_time, data = _array_event(columns, event, where)
                else:
                    name, raw_time, data = object_event(event, None, where=where)
                t = builder.event_time(raw_time, None, where=where)
                builder.n_events += 1
                builder.observe(t)
                builder.add(name, t, data, None, where=where)
            except RecordProblem as problem:
                self._problem(problem)
        return builder.finish()


_TIME_COLUMNS = ("relative_time", "delta_time", "time")


def _array_event(columns: list[str], event: list[Any], where: str) -> tuple[str, object, object]:
    """A draft-00/01 array event, its positions named by ``event_fields``."""
    if len(event) != len(columns):
        raise RecordProblem(
            None,
            f"an array of {len(columns)} values (event_fields)",
            f"{len(event)} values",
            where=where,
        )
    row = dict(zip(columns, event, strict=True))
    raw_time = next((row[c] for c in _TIME_COLUMNS if c in row), None)
    event_name = row.get("event", row.get("event_type"))
    if raw_time is None or not isinstance(event_name, str):
        raise RecordProblem(
            None, 'event_fields with a time column and "event"', ", ".join(columns), where=where
        )
    category = row.get("category")
    name = f"{category}:{event_name}" if isinstance(category, str) else event_name
    data = row.get("data", {})
    trigger = row.get("trigger")
    if isinstance(data, dict) and isinstance(trigger, str) and "trigger" not in data:
        data = {**data, "trigger": trigger}
    return name, raw_time, data


def _got(message: str) -> str:
    return message.split(":")[0]
