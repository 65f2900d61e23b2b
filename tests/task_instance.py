"""Task-instance stand-ins for operator tests that call ``execute`` / ``prepare`` without a DAG run: the task
instance and its ``task_state_store``.

One definition for unit and integration tests alike: the operator reads these few fields and pushes XComs,
which a test then reads back from ``xcoms``. A test that needs other identities passes them, or subclasses
with its own defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class TaskInstanceStandIn:
    """The task-instance fields an operator reads, and the XComs it pushes (nothing is ever there to pull)."""

    dag_id: str = "d"
    task_id: str = "t"
    run_id: str = "manual__2026-11-30T00:00:00+00:00"
    map_index: int = -1
    try_number: int = 1
    stats_tags: dict[str, str] = field(default_factory=dict)
    xcoms: dict[str, Any] = field(default_factory=dict)

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value

    def xcom_pull(self, **_: Any) -> None:
        return None


class StateStore(dict[str, Any]):
    """``task_state_store``: one per task instance, surviving its tries, as the API-server-backed store does."""

    def set(self, key: str, value: Any, *, retention: Any = None) -> None:
        self[key] = value
