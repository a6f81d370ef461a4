"""Test-session settings shared by every test module."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _partition_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Commands run by the tests cache their partitions in a directory of the session, not in
    the user's cache (the variable is inherited by the subprocesses tests start)."""
    previous = os.environ.get("QUICSM_CACHE_DIR")
    os.environ["QUICSM_CACHE_DIR"] = str(tmp_path_factory.mktemp("quicsm-cache"))
    yield
    if previous is None:
        del os.environ["QUICSM_CACHE_DIR"]
    else:
        os.environ["QUICSM_CACHE_DIR"] = previous


#: The slow tier (``-m slow``; left out by ``scripts/test --fast``, run by ``scripts/test`` and CI):
#: whole modules, and single tests, that take tens of seconds to minutes each. Listed here, in one
#: place, so that the fast tier stays a few minutes as the suite grows; tests may also carry
#: ``@pytest.mark.slow`` themselves.
SLOW_MODULES = {
    "test_docs_examples.py",  # runs every shell example of the docs
    "test_doc_outputs.py",  # regenerates every output the docs quote
    "test_determinism.py",  # the CLI under several hash seeds
    "test_engine_dask.py",  # local Dask clusters
    "test_read_large.py",  # gigabyte streams and bombs
    "test_wheel.py",
    "test_setup.py",
}
SLOW_TESTS = {
    "test_native.py::test_mutated_real_files_read_the_same",
    "test_native.py::test_both_derivers_give_the_same_rows",
    "test_native.py::test_odd_records_read_the_same",
    "test_read_fuzz.py::test_mutated_real_files_end_in_rows_or_our_error",
    "test_report.py::test_version_report_names_the_jitter_change_and_its_mechanism",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.path.name
        name = f"{module}::{item.originalname if isinstance(item, pytest.Function) else item.name}"
        if module in SLOW_MODULES or name in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
