"""Layer 3: statistics over the transitions frame — visits, time in state, transition
probabilities, dwell times, intervals and significance tests."""
