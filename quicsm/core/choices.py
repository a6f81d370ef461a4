"""The names the library accepts as choices and the command line offers (engines, inference
algorithms, diagram formats, where states come from), defined where nothing heavy is imported:
``quicsm --help`` lists them without loading polars, numpy or the engine. The modules that
implement them import them from here."""

from __future__ import annotations

from typing import Final

#: where files are read (:mod:`quicsm.engine.run`)
ENGINES: Final[tuple[str, ...]] = ("local", "processes", "dask")

#: how a model is inferred (:mod:`quicsm.model.inference`)
ALGORITHMS: Final[tuple[str, ...]] = ("synoptic", "ktails", "observed")

#: formats Graphviz renders a diagram to (:mod:`quicsm.render.dot`)
RENDER_FORMATS: Final[tuple[str, ...]] = ("svg", "png", "pdf")

#: where congestion states come from (:mod:`quicsm.extract.derive`): the logged ones only, the
#: derived ones only, or logged where the stack logs them and derived for the rest
EXPLICIT: Final = "explicit"
DERIVED: Final = "derived"
HYBRID: Final = "hybrid"
STATE_MODES: Final[tuple[str, ...]] = (HYBRID, EXPLICIT, DERIVED)
