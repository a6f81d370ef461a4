"""Packet loss models: independent (Bernoulli) and bursty (Gilbert-Elliott).

Both draw from a :class:`random.Random` they are given, one decision per packet, so a
seeded relay drops the same packet indices on every run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from quicsm.core.errors import LabError


@dataclass(frozen=True, kw_only=True)
class GilbertElliott:
    """Two-state Markov loss model (Gilbert 1960, Elliott 1963), evaluated once per packet.

    ``p`` is P(Good -> Bad), ``r`` is P(Bad -> Good); in Good a packet is lost with
    ``loss_good``, in Bad with ``loss_bad``. The stationary loss rate is
    ``(r * loss_good + p * loss_bad) / (p + r)`` and the mean burst (Bad sojourn) is ``1 / r``
    packets. ``loss_good=0, loss_bad=1`` is the simple Gilbert model netem calls ``gemodel``.
    """

    p: float
    r: float
    loss_good: float = 0.0
    loss_bad: float = 1.0

    def __post_init__(self) -> None:
        for name in ("p", "r", "loss_good", "loss_bad"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise LabError(f"gilbert.{name} must be a probability in [0, 1], got {value}")
        if self.p + self.r == 0.0:
            raise LabError("gilbert.p and gilbert.r cannot both be 0")

    @property
    def mean_loss(self) -> float:
        """Stationary loss probability."""
        return (self.r * self.loss_good + self.p * self.loss_bad) / (self.p + self.r)


class LossModel:
    """Decides, packet by packet, whether a packet is lost."""

    def __init__(self, *, loss: float, gilbert: GilbertElliott | None, rng: random.Random) -> None:
        if not 0.0 <= loss <= 1.0:
            raise LabError(f"loss must be a probability in [0, 1], got {loss}")
        self._loss = loss
        self._gilbert = gilbert
        self._rng = rng
        self._bad = False  # Gilbert-Elliott starts in Good

    def lost(self) -> bool:
        """Draw the fate of the next packet (Bernoulli first, then Gilbert-Elliott)."""
        rnd = self._rng.random
        if self._loss > 0.0 and rnd() < self._loss:
            return True
        ge = self._gilbert
        if ge is None:
            return False
        # transition first, then lose with the new state's probability (as netem's gemodel)
        if self._bad:
            if rnd() < ge.r:
                self._bad = False
        elif rnd() < ge.p:
            self._bad = True
        return rnd() < (ge.loss_bad if self._bad else ge.loss_good)
