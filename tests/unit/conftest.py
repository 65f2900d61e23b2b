"""tests/unit is the editing loop (``make test-fast``): a test here starts no process unless it is marked
``process`` (those run in ``make test`` only). The guard makes an unmarked one fail, naming the rule."""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
from collections.abc import Iterator

# Imported here, before the guard: croniter's import asks platform.architecture(), which runs `file -b` on the
# interpreter; whichever unit test first imports Airflow's timetables would otherwise be refused for it.
import croniter  # noqa: F401
import pytest


def _refuse(*_args: object, **_kwargs: object) -> None:
    raise AssertionError("a test in tests/unit started a process: mark it @pytest.mark.process (make test only)")


@pytest.fixture(autouse=True)
def _no_process_unless_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("process") is not None:
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "__init__", _refuse)
        patch.setattr(os, "fork", _refuse)
        patch.setattr(multiprocessing.process.BaseProcess, "start", _refuse)
        yield
