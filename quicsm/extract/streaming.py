"""States derived while a file is read: the metric sink that gives each trace its own deriver
(the native one where the native core is built, else the Python one:
:func:`quicsm.extract.native.make_deriver`), fed every metric, loss and timer event as it is
decoded."""

from __future__ import annotations

from typing import Any

from quicsm.core.aliases import canonical_state
from quicsm.extract.derive import INSTRUMENTED_ONLY, Derivation
from quicsm.extract.deriver import Deriver
from quicsm.extract.native import NativeDeriver, make_deriver
from quicsm.extract.profiles import Profile, detect_profile
from quicsm.qlog.events import MetricEvent
from quicsm.qlog.trace import TraceBuilder


class TraceSink:
    """Feeds one trace's deriver; in hybrid mode it stops wanting events once the trace has
    logged a state that only an instrumented stack logs (it logs all eight: nothing to derive,
    and the reader skips decoding its metrics)."""

    __slots__ = ("_builder", "_checked", "_deriver", "_wanted", "native_deriver", "scan_records")

    def __init__(self, deriver: Deriver | NativeDeriver, builder: TraceBuilder | None) -> None:
        self._deriver = deriver
        self._builder = builder
        self._checked = 0
        self._wanted = True
        #: the native deriver's pass over a block of records (the reader uses it if present)
        self.scan_records = getattr(deriver, "scan_records", None)
        #: the native deriver itself (the contained-JSON reader feeds it natively)
        self.native_deriver = getattr(deriver, "native", None)

    def __call__(self, event: MetricEvent) -> object:
        return self._deriver.feed(event)

    def wanted(self) -> bool:
        builder = self._builder
        if builder is not None and self._wanted:
            logged = builder.states
            while self._checked < len(logged):
                if canonical_state(logged[self._checked].new) in INSTRUMENTED_ONLY:
                    self._wanted = False
                    break
                self._checked += 1
        return self._wanted


class StreamedStates:
    """Derives states while a file is read: one deriver per trace is fed each metric, loss and
    timer event as it is decoded; the rows are kept, the events are not (memory O(one trace's
    open state), not O(file))."""

    def __init__(self, *, sidecar: dict[str, Any], profile: Profile | None, hybrid: bool) -> None:
        self.sidecar = sidecar
        self.profile = profile
        self.hybrid = hybrid
        self._traces: dict[int, tuple[Deriver | NativeDeriver, Derivation]] = {}

    def __call__(self, builder: TraceBuilder) -> TraceSink:
        profile = self.profile or detect_profile(
            title=builder.title,
            code_version=builder.code_version,
            labels={**self.sidecar, **builder.labels},
        )
        deriver = make_deriver(profile)
        self._traces[builder.index] = (deriver, Derivation(profile))
        return TraceSink(deriver, builder if self.hybrid else None)

    def derivation(self, index: int) -> Derivation | None:
        found = self._traces.get(index)
        if found is None:
            return None
        deriver, out = found
        out.states = deriver.rows
        out.notices = deriver.notices()
        out.status = deriver.status()
        return out
