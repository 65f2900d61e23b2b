"""``TrainiumPromoteModelAliasOperator(forward_only=True)`` never moves an alias back to an older version; without it,
the same task is a deliberate rollback and moves it. Both through the operator, on a real ``file://`` registry."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.operators.registry import TrainiumPromoteModelAliasOperator
from airflow_provider_trainium.registry import ModelRegistry


@dataclass
class ScheduledRun:
    run_type: str = "scheduled"


@dataclass
class PromoteTask:
    dag_id: str = "d"
    task_id: str = "promote"
    run_id: str = "scheduled__2026-01-01T00:00:00+00:00"
    try_number: int = 1


def two_versions_latest_at_2(root: Path) -> ModelRegistry:
    registry = ModelRegistry(root.as_uri())
    for day in ("day1", "day2"):
        source = root / "runs" / day
        source.mkdir(parents=True)
        (source / "model.safetensors").write_bytes(day.encode() * 64)
        (source / "metrics.json").write_text(json.dumps({"accuracy": 0.9}))
        registry.register("m", source.as_uri())
    registry.promote("m", "latest", 2)
    return registry


def promote(root: Path, version: int, **kwargs: Any) -> dict[str, Any]:
    op = TrainiumPromoteModelAliasOperator(
        task_id="promote", model_name="m", alias="latest", version=version, artifact_root=root.as_uri(),
        require_evaluation=False, **kwargs,
    )  # fmt: skip
    return op.execute({"ti": PromoteTask(), "dag_run": ScheduledRun()})  # type: ignore[arg-type]


def test_forward_only_leaves_the_alias_on_the_newer_version(tmp_path):
    registry = two_versions_latest_at_2(tmp_path)
    state = promote(tmp_path, 1, forward_only=True)
    assert state["version"] == 2 and registry.get_alias("m", "latest").version == 2
    assert [s.version for s in registry.alias_history("m", "latest")] == [2]  # nothing written


@pytest.mark.parametrize("kwargs", [{}, {"forward_only": False}])
def test_without_forward_only_the_alias_is_rolled_back(tmp_path, kwargs):
    registry = two_versions_latest_at_2(tmp_path)
    state = promote(tmp_path, 1, reason="rollback", **kwargs)
    assert state["version"] == 1 and registry.get_alias("m", "latest").version == 1
    assert [s.version for s in registry.alias_history("m", "latest")] == [2, 1]
    assert registry.get_alias("m", "latest").moved_by["task_id"] == "promote"


def test_forward_only_still_moves_the_alias_forward(tmp_path):
    registry = two_versions_latest_at_2(tmp_path)
    promote(tmp_path, 1, reason="rollback")
    assert promote(tmp_path, 2, forward_only=True)["version"] == 2 and registry.get_alias("m", "latest").version == 2
