"""Reading large corpora in parallel: batches of files as tasks, partitions, mergeable sums.

Layer: above :mod:`quicsm.model` (imports core, qlog, extract, stats, model), below
:mod:`quicsm.compare` and the CLI.

- :mod:`quicsm.engine.plan` cuts the file list into batches (the same for every engine);
- :mod:`quicsm.engine.task` turns one batch into a partition: its rows (read once, normalised
  once), its traces and labels, and its :class:`~quicsm.engine.aggregate.Aggregate`;
- :mod:`quicsm.engine.cache` keeps partitions on disk keyed by file content;
- :mod:`quicsm.engine.executors` runs tasks in this process, in worker processes or on Dask;
- :mod:`quicsm.engine.run` (:func:`extract`) drives a run and merges results in batch order;
- :mod:`quicsm.engine.inference` infers the model from the merged aggregate.
"""

from quicsm.engine.aggregate import Aggregate, merge_all
from quicsm.engine.cache import PartitionCache, default_cache_dir
from quicsm.engine.inference import infer_aggregate
from quicsm.engine.run import ENGINES, Corpus, default_workers, extract

__all__ = [
    "ENGINES",
    "Aggregate",
    "Corpus",
    "PartitionCache",
    "default_cache_dir",
    "default_workers",
    "extract",
    "infer_aggregate",
    "merge_all",
]
