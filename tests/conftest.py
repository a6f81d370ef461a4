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
