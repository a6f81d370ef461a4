"""Layer 4: state machines — the Synoptic-style engine (``synoptic/``), the observed-state
model, look-ahead replay for time per node, and the :class:`~quicsm.model.tables.Model` tables."""
