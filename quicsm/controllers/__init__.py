"""Name the congestion controller of a trace from its metrics and losses (``quicsm identify``,
``quicsm.identify``).

:mod:`features` turns a trace's window, flight, RTT and losses into evidence; :mod:`signatures`
matches it against controller signatures; :mod:`calibration` turns an answer's kind into the
probability that it is right; :mod:`api` is the entry point; :mod:`evaluation` measures it on
labelled traces. Built on ``extract`` (the readers) only.
"""

from __future__ import annotations

from quicsm.controllers.api import IDENTIFY_SCHEMA, identify, identify_frames

__all__ = ["IDENTIFY_SCHEMA", "identify", "identify_frames"]
