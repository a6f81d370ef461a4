"""A Synoptic-faithful FSM inference engine over integer-coded, deduplicated logs.

Steps, one module each (see ``docs/synoptic.md``): :mod:`~quicsm.model.synoptic.log` (the event
log),
:mod:`~quicsm.model.synoptic.mining` (invariants), :mod:`~quicsm.model.synoptic.partitions` (initial
partition graph), :mod:`~quicsm.model.synoptic.checking` (model checking),
:mod:`~quicsm.model.synoptic.refine` (counter-example-guided splitting),
:mod:`~quicsm.model.synoptic.coarsen` (k-tails merging under invariants),
:mod:`~quicsm.model.synoptic.ktails` (plain k-tails) and :mod:`~quicsm.model.synoptic.graph` (the
node/edge tables).
"""

from __future__ import annotations

from quicsm.model.synoptic.graph import graph_frames, infer_graph
from quicsm.model.synoptic.log import INITIAL, TERMINAL, EventLog
from quicsm.model.synoptic.mining import mine_invariants

__all__ = ["INITIAL", "TERMINAL", "EventLog", "graph_frames", "infer_graph", "mine_invariants"]
