"""The one escaping helper of every HTML, SVG and Graphviz-label writer."""

from __future__ import annotations

import html


def esc(text: object) -> str:
    """HTML/XML-escape any text (quotes included) for element content and attributes; also
    safe inside Graphviz HTML-like labels."""
    return html.escape(str(text), quote=True)
