"""The helpers for task bodies: where a run's artifacts live."""

from __future__ import annotations

from airflow_provider_trainium.dag_kit.helpers import run_prefix, stage_uris
from airflow_provider_trainium.hooks.trainium import TrainiumConfig


def test_plan_helpers() -> None:
    config = TrainiumConfig(artifact_root="s3://bucket/root/")
    prefix = run_prefix(config, "llama", "pretrain", run_id="manual__2026-01-01T00:00:00")
    assert prefix.startswith("s3://bucket/root/llama/pretrain/manual__2026-01-01T00-00-00-")
    assert len(prefix.rsplit("-", 1)[1]) == 10  # the run id's hash keeps run keys unique
    assert run_prefix(config, "a", "b") == "s3://bucket/root/a/b"
    assert stage_uris("s3://b/p")["eval_uri"] == "s3://b/p/evaluation"
