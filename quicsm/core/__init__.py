"""Layer 0: what every other layer shares — the error types, the canonical states and the
aliases producers use for them, the table schemas, and the diagnostics readers report."""
