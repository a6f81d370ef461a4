"""A Synoptic-faithful FSM inference engine over integer-coded, deduplicated logs.

Steps, one module each (see ``docs/synoptic.md``): :mod:`~quicsm.synoptic.log` (the event log),
:mod:`~quicsm.synoptic.mining` (invariants), :mod:`~quicsm.synoptic.partitions` (initial
partition graph), :mod:`~quicsm.synoptic.checking` (model checking),
:mod:`~quicsm.synoptic.refine` (counter-example-guided splitting),
:mod:`~quicsm.synoptic.coarsen` (k-tails merging under invariants),
:mod:`~quicsm.synoptic.ktails` (plain k-tails) and :mod:`~quicsm.synoptic.graph` (the
node/edge tables).
"""

from __future__ import annotations

from quicsm.synoptic.graph import graph_frames, infer_graph
from quicsm.synoptic.log import INITIAL, TERMINAL, EventLog
from quicsm.synoptic.mining import mine_invariants

__all__ = ["INITIAL", "TERMINAL", "EventLog", "graph_frames", "infer_graph", "mine_invariants"]
