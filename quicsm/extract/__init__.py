"""Layer 2: from qlog events to the transitions frame — explicit states, states derived from
metrics, losses and timers, and the metrics tables."""
