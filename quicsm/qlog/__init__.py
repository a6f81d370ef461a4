"""Reading qlog: a sans-I/O, streaming parsing core (:mod:`.seq`, :mod:`.contained`) and its
I/O side (:mod:`.blocks`, :mod:`.source`).

- :mod:`quicsm.qlog.seq` — JSON-SEQ (RFC 7464) and NDJSON scanner fed bytes in any chunking;
- :mod:`quicsm.qlog.contained` — contained JSON (``traces[]``) fed in blocks, draft-00/01
  arrays, documents cut mid-write;
- :mod:`quicsm.qlog.trace` — one trace's header conventions and relevant events;
- :mod:`quicsm.qlog.events` — the congestion-relevant events and their field renames;
- :mod:`quicsm.extract.derive` — states derived from metrics for traces that log none;
- :mod:`quicsm.qlog.blocks` — a file's decompressed content as immutable blocks, within
  :class:`~quicsm.qlog.blocks.ReadLimits`;
- :mod:`quicsm.qlog.source` — format detection, driving a parser, locating problems;
- :mod:`quicsm.qlog.tabular` — CSV (in chunks of whole lines) and Parquet transition tables;
- :mod:`quicsm.qlog.inspect` — full validation and a summary of one file;
- :mod:`quicsm.qlog.budget` — the per-record work budget (values one record may hold);
- :mod:`quicsm.qlog.paths` — the files named by paths, and which paths are refused.
"""
