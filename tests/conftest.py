"""Test-session settings shared by every test module."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

#: Every property test runs under one Hypothesis profile, loaded here, so that ``scripts/test``,
#: its ``--fast`` loop and CI (which runs ``scripts/test``) use the same settings. Hypothesis's
#: defaults time each example (a 200 ms deadline) and the generation of its inputs (the
#: ``too_slow`` health check); on a shared machine a starved process exceeds both, and the
#: test then fails for the machine's load, not for the code (``DeadlineExceeded``, or ``Flaky``
#: when the replay is faster). The work of every example here is bounded by its inputs; speed
#: is measured in benchmarks/, and complexity guards count work. So: no deadline, and no
#: health check that measures time. Tests still set their own ``max_examples``.
settings.register_profile("quicsm", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("quicsm")


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


def _timed_settings(item: pytest.Item) -> str | None:
    """What in a property test's own settings would time it (a deadline, or the time health
    check back because the test lists its own suppressed checks), or None."""
    own = getattr(getattr(item, "obj", None), "_hypothesis_internal_use_settings", None)
    if own is None:
        return None
    if own.deadline is not None:
        return f"deadline={own.deadline}"
    if HealthCheck.too_slow not in own.suppress_health_check:
        return "suppress_health_check without HealthCheck.too_slow"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    timed = [f"{item.nodeid}: {why}" for item in items if (why := _timed_settings(item))]
    if timed:
        raise pytest.UsageError(
            "property tests must not be timed (see the 'quicsm' Hypothesis profile in"
            " tests/conftest.py):\n  " + "\n  ".join(timed)
        )
    for item in items:
        module = item.path.name
        name = f"{module}::{item.originalname if isinstance(item, pytest.Function) else item.name}"
        if module in SLOW_MODULES or name in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="module")
def chromium() -> str:
    """The headless browser of the browser tests (``tests/cdp.py``); a machine without it
    fails them, never skips them."""
    from cdp import find_chromium

    path = find_chromium()
    if path is None:
        pytest.fail("chromium is missing: scripts/setup --test installs Debian's chromium")
    return path
