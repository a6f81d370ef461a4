"""Layer 6: views over results — Graphviz DOT and rendering, text/Markdown/JSON formatting of
diffs, and the output files of ``quicsm infer``."""
