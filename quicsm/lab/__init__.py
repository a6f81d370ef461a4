"""The lab: run instrumented QUIC stacks under emulated networks and devices to produce traces.

- :mod:`quicsm.lab.loss`     — Bernoulli and Gilbert-Elliott packet loss models
- :mod:`quicsm.lab.link`     — one direction of an impaired path (loss, rate + drop-tail queue,
  delay + jitter), pure: time is passed in
- :mod:`quicsm.lab.relay`    — the userspace UDP relay that applies two links to real traffic
- :mod:`quicsm.lab.scenario` — TOML scenario files and their matrix
- :mod:`quicsm.lab.device`   — slow-device profiles (CPU starvation of the receiving client)
- :mod:`quicsm.lab.stacks`   — the built stacks (``build/stacks.json``)
- :mod:`quicsm.lab.runner`   — orchestrates runs and writes ``run.json``
- :mod:`quicsm.lab.pack`     — packs run directories into one multi-trace zstd JSON-SEQ file
"""
