"""Reading qlog: a sans-I/O parsing core (:mod:`.seq`, :mod:`.contained`) and its I/O side
(:mod:`.source`).

- :mod:`quicsm.qlog.seq` — JSON-SEQ (RFC 7464) and NDJSON scanner fed bytes in any chunking;
- :mod:`quicsm.qlog.contained` — contained JSON (``traces[]``), draft-00/01 arrays, repair;
- :mod:`quicsm.qlog.trace` — one trace's header conventions and relevant events;
- :mod:`quicsm.qlog.events` — the congestion-relevant events and their field renames;
- :mod:`quicsm.extract.derive` — states derived from metrics for traces that log none;
- :mod:`quicsm.qlog.source` — files, decompression, format detection;
- :mod:`quicsm.qlog.inspect` — full validation and a summary of one file.
"""
