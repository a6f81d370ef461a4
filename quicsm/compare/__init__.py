"""Layer 5: comparing two groups of traces — grouping by labels over frames, and the diff."""
