"""A run's identity for the kit's tests: a task instance whose upstream XComs the test sets, and an artifact root."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import set_trainium_connection

RUN_ID = "manual__2026-12-02T00:00:00+00:00"


class RunTI(SimpleNamespace):
    """A task instance of one run: ``xcoms`` is what each upstream task's XCom says now."""

    def xcom_pull(self, task_ids: str, **_: Any) -> Any:
        return self.xcoms.get(task_ids)


@pytest.fixture
def root(tmp_path, monkeypatch) -> str:
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    return tmp_path.as_uri()
