"""What reading a file ends in, for the fuzz test and ``benchmarks/fuzz_campaign.py``."""

from __future__ import annotations

from pathlib import Path

#: what reading a file may end in; anything else is a defect
OUTCOMES = ("read", "QlogError", "InputError")


def read_everything(
    path: Path, *, lenient: bool, cpu: dict[str, float] | None = None
) -> tuple[str, str]:
    """Read ``path`` with every reader (and inspect it); ``(outcome, detail)``. ``cpu``, when
    given, receives the CPU seconds of each reader call by reader name.

    Raises whatever is not a :class:`quicsm.core.errors.QuicsmError`, a Python warning that is
    not a :class:`QuicsmWarning`, and an error that only the readers' last-resort boundary
    caught (``"an unexpected ..."``) as :class:`AssertionError`.
    """
    import time
    import warnings

    from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
    from quicsm.core.errors import InputError, QlogError
    from quicsm.extract.read import read_metrics, read_traces, read_transitions
    from quicsm.qlog.inspect import inspect_file

    on_error = "skip" if lenient else "raise"
    outcome, detail = "read", ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        times = cpu if cpu is not None else {}
        try:
            for reader in (read_transitions, read_metrics, read_traces):
                start = time.process_time()
                try:
                    reader(path, on_error=on_error, diagnostics=Diagnostics())
                finally:
                    times[reader.__name__] = time.process_time() - start
        except QlogError as exc:
            outcome, detail = "QlogError", str(exc)
        except InputError as exc:
            outcome, detail = "InputError", str(exc)
        start = time.process_time()
        try:
            inspect_file(path)
        except QlogError as exc:
            detail = detail or str(exc)
        except InputError as exc:
            detail = detail or str(exc)
        finally:
            times["inspect_file"] = time.process_time() - start
    foreign = [w for w in caught if not issubclass(w.category, QuicsmWarning)]
    if foreign:
        raise AssertionError(f"a Python warning leaked: {foreign[0].message}")
    if "an unexpected " in detail:
        raise AssertionError(f"only the last-resort boundary caught it: {detail}")
    return outcome, detail
