"""Beside the layers: synthetic traces and helpers for tests and benchmarks."""
