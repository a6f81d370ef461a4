"""Property tests are not timed: one Hypothesis profile (tests/conftest.py) for scripts/test, its
fast loop and CI, and collection refuses a test whose own settings time it again."""

from __future__ import annotations

from typing import Any

from conftest import _timed_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


class _Item:
    """What the check reads of a collected test: the test function."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj


def test_the_profile_sets_no_deadline_and_no_time_health_check() -> None:
    assert settings.default.deadline is None
    assert HealthCheck.too_slow in settings.default.suppress_health_check


def test_a_property_test_with_the_profile_passes_the_check() -> None:
    @settings(max_examples=3)
    @given(st.integers())
    def untimed(x: int) -> None:
        pass

    assert _timed_settings(_Item(untimed)) is None
    assert _timed_settings(_Item(lambda: None)) is None  # not a property test


def test_a_deadline_or_the_time_health_check_brought_back_is_refused() -> None:
    @settings(deadline=200)
    @given(st.integers())
    def timed(x: int) -> None:
        pass

    @settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.integers())
    def checked(x: int) -> None:
        pass

    assert (_timed_settings(_Item(timed)) or "").startswith("deadline=")
    assert _timed_settings(_Item(checked)) == "suppress_health_check without HealthCheck.too_slow"
