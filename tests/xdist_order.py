"""The order pytest-xdist hands modules to its workers in ``make test`` (``--dist loadfile
--no-loadscope-reorder``): the slowest first, so the last module a worker takes is a short one.

xdist's default (modules with many tests first) handed the few-test, minutes-long modules (the Llama DAGs, the
XLA kill/resume, the image builds) out last, and one worker ran them alone after the other had finished.
"""

from __future__ import annotations

import os

import pytest


def heaviest_modules_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """Modules with a ``slow`` test, then the rest of tests/integration, then tests/unit; each module whole and
    in place within its group. Stable, so every worker collects the same order (xdist requires it)."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}

    def weight(item: pytest.Item) -> int:
        if item.path in slow:
            return 0
        return 1 if item.get_closest_marker("integration") else 2

    return sorted(items, key=weight)


@pytest.hookimpl(trylast=True)  # after tests/conftest.py has marked each test by its folder
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items[:] = heaviest_modules_first(items)
