"""One direction of an impaired path, as a pure model: time is passed in, nothing sleeps.

A packet offered to a :class:`Link` goes through three stages, in the order a router running
``netem loss`` on ingress, ``tbf`` as the bottleneck and ``netem delay`` on egress would apply
them:

1. **loss** — outages (every packet offered inside an ``(at_s, duration_s)`` window is lost,
   e.g. a handover), then Bernoulli and/or Gilbert-Elliott (:mod:`quicsm.lab.loss`), one draw
   per packet;
2. **bottleneck** — a drop-tail FIFO of ``queue_packets`` packets served at the current rate
   (fixed, or re-drawn every ``interval_s`` from ``[low_mbit, high_mbit]`` as in the paper's
   varying-bandwidth experiment); a packet arriving to a full queue is dropped;
3. **delay** — ``delay_ms`` plus a per-packet jitter sample. Like netem, every packet gets its
   own send time and packets leave in send-time order, so jitter larger than the gap between
   packets reorders them.

Time zero of the rate schedule and of outages is the first packet the link sees (or
``start_s`` when given). Everything random comes from :class:`random.Random` instances
seeded from ``seed``, one per purpose, so the same packet sequence meets the same fate on
every run.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import asdict, dataclass
from typing import Generic, Literal, TypeVar

from quicsm.core.errors import LabError
from quicsm.lab.loss import GilbertElliott, LossModel

T = TypeVar("T")

JitterDistribution = Literal["uniform", "normal"]


@dataclass(frozen=True, kw_only=True)
class RateSchedule:
    """Bottleneck rate over time.

    ``kind="uniform"``: every ``interval_s`` a new rate is drawn uniformly from
    ``[low_mbit, high_mbit]`` (the paper's 50-150 Mbit/s re-drawn every second).
    ``kind="steps"``: ``steps`` is a list of ``(at_s, rate_mbit)``; the last step whose
    ``at_s`` has passed applies (before the first step, the first step's rate).
    """

    kind: Literal["uniform", "steps"]
    low_mbit: float = 0.0
    high_mbit: float = 0.0
    interval_s: float = 1.0
    steps: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        if self.kind == "uniform":
            if not 0.0 < self.low_mbit <= self.high_mbit:
                raise LabError(
                    f"rate schedule needs 0 < low_mbit <= high_mbit, "
                    f"got {self.low_mbit} and {self.high_mbit}"
                )
            if self.interval_s <= 0.0:
                raise LabError(f"rate schedule interval_s must be > 0, got {self.interval_s}")
        elif self.kind == "steps":
            if not self.steps:
                raise LabError("rate schedule of kind 'steps' needs at least one step")
            times = [at for at, _ in self.steps]
            if times != sorted(times) or any(rate <= 0 for _, rate in self.steps):
                raise LabError("rate steps must be sorted by at_s and have rates > 0")
        else:
            raise LabError(f"rate schedule kind must be 'uniform' or 'steps', got {self.kind!r}")


@dataclass(frozen=True, kw_only=True)
class LinkConfig:
    """Impairments of one direction. ``rate_mbit=None`` (and no schedule) means unlimited."""

    rate_mbit: float | None = None
    rate_schedule: RateSchedule | None = None
    queue_packets: int = 1000
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    jitter_distribution: JitterDistribution = "uniform"
    loss: float = 0.0
    gilbert: GilbertElliott | None = None
    #: (at_s, duration_s) windows, from time zero, in which every packet is lost
    outages: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        if any(at < 0 or duration <= 0 for at, duration in self.outages):
            raise LabError("outages must be [at_s >= 0, duration_s > 0] pairs")
        if self.rate_mbit is not None and self.rate_mbit <= 0:
            raise LabError(f"rate_mbit must be > 0, got {self.rate_mbit}")
        if self.queue_packets < 1:
            raise LabError(f"queue_packets must be >= 1, got {self.queue_packets}")
        if self.delay_ms < 0 or self.jitter_ms < 0:
            raise LabError("delay_ms and jitter_ms must be >= 0")
        if self.jitter_distribution not in ("uniform", "normal"):
            raise LabError(
                "jitter_distribution must be 'uniform' or 'normal', "
                f"got {self.jitter_distribution!r}"
            )
        if not 0.0 <= self.loss <= 1.0:
            raise LabError(f"loss must be a probability in [0, 1], got {self.loss}")


@dataclass(kw_only=True)
class LinkCounters:
    """What a link did to the packets offered to it."""

    packets_in: int = 0
    bytes_in: int = 0
    dropped_loss: int = 0
    dropped_outage: int = 0
    dropped_queue: int = 0
    delivered: int = 0
    bytes_delivered: int = 0
    #: delivered later than they arrived (queueing and/or delay)
    delayed: int = 0
    #: delivered after a packet that arrived later than them
    reordered: int = 0
    max_queue_packets: int = 0
    #: sum over delivered packets of (delivery time - arrival time), seconds
    delay_sum_s: float = 0.0

    def as_dict(self) -> dict[str, float | int]:
        out: dict[str, float | int] = asdict(self)
        out["mean_delay_ms"] = 1e3 * self.delay_sum_s / self.delivered if self.delivered else 0.0
        return out


class Link(Generic[T]):
    """Apply one direction's impairments to packets; see the module docstring.

    ``offer(now_s=..., size=..., item=...)`` takes a packet in; ``due(now_s=...)`` returns the
    items whose delivery time has come, in delivery order; ``next_due_s()`` says when to look
    again. ``start_s`` is time zero of the rate schedule and outages (default: the arrival
    time of the first packet).
    """

    def __init__(self, config: LinkConfig, *, seed: int, start_s: float | None = None) -> None:
        self.config = config
        self.counters = LinkCounters()
        self._start_s: float | None = start_s
        self._seed = seed
        self._loss = LossModel(
            loss=config.loss, gilbert=config.gilbert, rng=random.Random(f"{seed}:loss")
        )
        self._jitter_rng = random.Random(f"{seed}:jitter")
        self._delay_s = config.delay_ms / 1e3
        self._jitter_s = config.jitter_ms / 1e3
        self._bottleneck: deque[float] = deque()  # finish times of packets in the queue
        self._last_finish_s = -float("inf")
        # (deliver_s, seq, arrival_s, size, item); seq is unique, so items are never compared
        self._heap: list[tuple[float, int, float, int, T]] = []
        self._seq = 0
        self._max_delivered_seq = -1
        self._rate_cache: dict[int, float] = {}

    def set_start(self, start_s: float) -> None:
        """Fix time zero (the first call wins; offering a packet calls it too)."""
        if self._start_s is None:
            self._start_s = start_s

    # -- rate -------------------------------------------------------------------------------
    def rate_mbit_at(self, now_s: float) -> float | None:
        """Bottleneck rate at ``now_s`` (None = unlimited)."""
        sched = self.config.rate_schedule
        if sched is None:
            return self.config.rate_mbit
        if self._start_s is None:
            self._start_s = now_s
        t = now_s - self._start_s
        if sched.kind == "steps":
            rate = sched.steps[0][1]
            for at, step_rate in sched.steps:
                if at <= t:
                    rate = step_rate
                else:
                    break
            return rate
        k = max(0, int(t // sched.interval_s))
        rate_k = self._rate_cache.get(k)
        if rate_k is None:
            rng = random.Random(f"{self._seed}:rate:{k}")
            rate_k = rng.uniform(sched.low_mbit, sched.high_mbit)
            self._rate_cache[k] = rate_k
        return rate_k

    # -- packets ----------------------------------------------------------------------------
    def offer(self, *, now_s: float, size: int, item: T) -> bool:
        """Take one packet of ``size`` bytes arriving at ``now_s``; False if it was dropped."""
        c = self.counters
        c.packets_in += 1
        c.bytes_in += size
        if self._start_s is None:
            self._start_s = now_s
        if self.config.outages:
            t = now_s - self._start_s
            if any(at <= t < at + duration for at, duration in self.config.outages):
                c.dropped_outage += 1
                return False
        if self._loss.lost():
            c.dropped_loss += 1
            return False
        rate = self.rate_mbit_at(now_s)
        if rate is None:
            finish_s = now_s
        else:
            q = self._bottleneck
            while q and q[0] <= now_s:
                q.popleft()
            if len(q) >= self.config.queue_packets:
                c.dropped_queue += 1
                return False
            start_s = now_s if now_s > self._last_finish_s else self._last_finish_s
            finish_s = start_s + size * 8 / (rate * 1e6)
            self._last_finish_s = finish_s
            q.append(finish_s)
            if len(q) > c.max_queue_packets:
                c.max_queue_packets = len(q)
        deliver_s = finish_s + self._delay_s
        if self._jitter_s > 0.0:
            if self.config.jitter_distribution == "uniform":
                deliver_s += self._jitter_rng.uniform(-self._jitter_s, self._jitter_s)
            else:
                deliver_s += self._jitter_rng.gauss(0.0, self._jitter_s)
            # netem never sends a packet before it was enqueued: negative delay is clamped to 0
            if deliver_s < finish_s:
                deliver_s = finish_s
        heapq.heappush(self._heap, (deliver_s, self._seq, now_s, size, item))
        self._seq += 1
        return True

    def next_due_s(self) -> float | None:
        """Delivery time of the next packet, or None if nothing is in flight."""
        return self._heap[0][0] if self._heap else None

    def in_flight(self) -> int:
        return len(self._heap)

    def due(self, *, now_s: float) -> list[T]:
        """Pop every packet whose delivery time is <= ``now_s``, in delivery order."""
        heap = self._heap
        out: list[T] = []
        c = self.counters
        while heap and heap[0][0] <= now_s:
            deliver_s, seq, arrival_s, size, item = heapq.heappop(heap)
            out.append(item)
            c.delivered += 1
            c.bytes_delivered += size
            c.delay_sum_s += deliver_s - arrival_s
            if deliver_s > arrival_s:
                c.delayed += 1
            if seq < self._max_delivered_seq:
                c.reordered += 1
            else:
                self._max_delivered_seq = seq
        return out


# -- plain-data form (scenario files, the relay's JSON config) ---------------------------------
_NUMBER_KEYS = ("rate_mbit", "delay_ms", "jitter_ms", "loss")


def _number(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LabError(f"{key}: expected a number, got {value!r}")
    return float(value)


def _check_keys(d: dict[str, object], allowed: set[str], where: str) -> None:
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise LabError(
            f"{where}: unknown key {unknown[0]!r} (expected one of: {', '.join(sorted(allowed))})"
        )


def link_config_from_dict(d: dict[str, object], *, where: str) -> LinkConfig:
    """Build a :class:`LinkConfig` from plain data; errors name ``where`` and the key.

    Keys: ``rate_mbit``, ``rate_schedule`` (``{kind, low_mbit, high_mbit, interval_s}`` or
    ``{kind="steps", steps=[[at_s, rate_mbit], ...]}``), ``queue_packets``, ``delay_ms``,
    ``jitter_ms``, ``jitter_distribution``, ``loss``, ``gilbert`` (``{p, r, loss_good,
    loss_bad}``), ``outages`` (``[[at_s, duration_s], ...]``).
    """
    if not isinstance(d, dict):
        raise LabError(f"{where}: expected a table, got {d!r}")
    _check_keys(
        d,
        {
            *_NUMBER_KEYS,
            "rate_schedule",
            "queue_packets",
            "jitter_distribution",
            "gilbert",
            "outages",
        },
        where,
    )
    kwargs: dict[str, object] = {}
    try:
        for key in _NUMBER_KEYS:
            if d.get(key) is not None:
                kwargs[key] = _number(d[key], f"{where}.{key}")
        if "queue_packets" in d:
            q = d["queue_packets"]
            if isinstance(q, bool) or not isinstance(q, int):
                raise LabError(f"{where}.queue_packets: expected an integer, got {q!r}")
            kwargs["queue_packets"] = q
        if "jitter_distribution" in d:
            kwargs["jitter_distribution"] = d["jitter_distribution"]
        sched = d.get("rate_schedule")
        if sched is not None:
            w = f"{where}.rate_schedule"
            if not isinstance(sched, dict):
                raise LabError(f"{w}: expected a table, got {sched!r}")
            _check_keys(sched, {"kind", "low_mbit", "high_mbit", "interval_s", "steps"}, w)
            steps_raw = sched.get("steps", [])
            if not isinstance(steps_raw, list):
                raise LabError(f"{w}.steps: expected a list of [at_s, rate_mbit]")
            steps = []
            for i, step in enumerate(steps_raw):
                if not isinstance(step, list | tuple) or len(step) != 2:
                    raise LabError(f"{w}.steps[{i}]: expected [at_s, rate_mbit], got {step!r}")
                steps.append(
                    (_number(step[0], f"{w}.steps[{i}]"), _number(step[1], f"{w}.steps[{i}]"))
                )
            kwargs["rate_schedule"] = RateSchedule(
                kind=sched.get("kind", "uniform"),
                low_mbit=_number(sched.get("low_mbit", 0.0), f"{w}.low_mbit"),
                high_mbit=_number(sched.get("high_mbit", 0.0), f"{w}.high_mbit"),
                interval_s=_number(sched.get("interval_s", 1.0), f"{w}.interval_s"),
                steps=tuple(steps),
            )
        outages_raw = d.get("outages", [])
        if not isinstance(outages_raw, list):
            raise LabError(f"{where}.outages: expected a list of [at_s, duration_s]")
        outages = []
        for i, pair in enumerate(outages_raw):
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                raise LabError(f"{where}.outages[{i}]: expected [at_s, duration_s], got {pair!r}")
            outages.append(
                (
                    _number(pair[0], f"{where}.outages[{i}]"),
                    _number(pair[1], f"{where}.outages[{i}]"),
                )
            )
        if outages:
            kwargs["outages"] = tuple(outages)
        ge = d.get("gilbert")
        if ge is not None:
            w = f"{where}.gilbert"
            if not isinstance(ge, dict):
                raise LabError(f"{w}: expected a table, got {ge!r}")
            _check_keys(ge, {"p", "r", "loss_good", "loss_bad"}, w)
            if "p" not in ge or "r" not in ge:
                raise LabError(f"{w}: needs both 'p' and 'r'")
            kwargs["gilbert"] = GilbertElliott(
                p=_number(ge["p"], f"{w}.p"),
                r=_number(ge["r"], f"{w}.r"),
                loss_good=_number(ge.get("loss_good", 0.0), f"{w}.loss_good"),
                loss_bad=_number(ge.get("loss_bad", 1.0), f"{w}.loss_bad"),
            )
        return LinkConfig(**kwargs)  # type: ignore[arg-type]
    except LabError as exc:
        msg = str(exc)
        raise LabError(msg if msg.startswith(where) else f"{where}: {msg}") from None


def link_config_to_dict(config: LinkConfig) -> dict[str, object]:
    """Inverse of :func:`link_config_from_dict` (JSON-ready; None values left out)."""
    out = {k: v for k, v in asdict(config).items() if v is not None}
    out["outages"] = [list(o) for o in config.outages]
    sched = out.get("rate_schedule")
    if isinstance(sched, dict):
        sched["steps"] = [list(s) for s in sched["steps"]]
    return out
