"""What ECS bills for a task: ``startedAt`` (its containers started) to ``stoppedAt``, from DescribeTasks.

Placement and the image pull before ``startedAt`` are not billed to the task. The watch loop reads the times
from the description it already has as the task stops; the backend asks ECS when nobody watched.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from airflow_provider_trainium.compute.base import Interval


def epoch(value: Any) -> float | None:
    """An ECS time as unix seconds: a datetime (boto), its ISO text (after JSON) or epoch seconds (raw JSON)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise ValueError(f"not a timestamp: {value!r}")


def ecs_intervals(task: Mapping[str, Any]) -> list[Interval]:
    """An ECS task's one interval, or none when its containers never started."""
    start = epoch(task.get("startedAt"))
    return [] if start is None else [(start, epoch(task.get("stoppedAt")))]
