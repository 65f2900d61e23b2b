"""Skip the interpreter's teardown once a pytest run has finished and said so.

A run that imported Airflow, torch, torch-xla and mlflow spends 3-7 s after its summary line (more on a busy
2-core machine) tearing down that module graph in C: no test, fixture or report needs it. Once every other
``pytest_unconfigure`` has run, this flushes the output, runs the ``atexit`` handlers (Airflow's ORM dispose,
``weakref.finalize`` callbacks such as temporary folders' cleanup) and leaves with the run's exit status.

Not on pytest-xdist workers, which leave through execnet's own shutdown; not under ``PYTEST_FULL_EXIT=1`` (a
debugger or a leak hunt that wants the interpreter's teardown).
"""

from __future__ import annotations

import atexit
import os
import sys

import pytest

_SESSIONS: list[pytest.Session] = []


def _enabled() -> bool:
    return not os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("PYTEST_FULL_EXIT") != "1"


def pytest_sessionstart(session: pytest.Session) -> None:
    _SESSIONS[:] = [session]


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if not _enabled() or not _SESSIONS:
        return
    status = int(_SESSIONS[0].exitstatus)  # final: every pytest_sessionfinish has run
    config.get_terminal_writer().flush()
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
