"""The inferred model: one set of tables that every view (DOT, JSON, networkx, stats, diff,
report) reads.

Schemas (all polars frames):

``nodes``       id (Int64, stable: 0 = INITIAL, 1 = TERMINAL, then by state label, then by
                first occurrence), state (String: a canonical state name, "INITIAL" or
                "TERMINAL"), events (Int64: concrete events in the node, weights included)
``edges``       source (Int64), target (Int64), count (Int64), probability (Float64: share of
                the source's events whose successor is in target; sums to 1 per source,
                TERMINAL included)
``invariants``  kind (String: AlwaysFollowedBy | NeverFollowedBy | AlwaysPrecedes), a, b (String),
                support (Int64)
``stats``       :class:`quicsm.stats.Stats` computed from the transitions frame
"""
