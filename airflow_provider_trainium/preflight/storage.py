"""The artifact root's bucket: every remote job writes its outputs and checkpoints there."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_trainium.hooks.connection_test import check_bucket
from airflow_provider_trainium.preflight.result import CheckResult, error, ok, warning

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig

NAME = "artifact bucket"


def check_artifact_bucket(config: TrainiumConfig) -> CheckResult:
    if not config.artifact_root.startswith("s3://"):
        return warning(NAME, f"not checked: artifact_root {config.artifact_root} is not on s3://")
    problem = check_bucket(config)
    return error(NAME, problem) if problem else ok(NAME, f"bucket of {config.artifact_root} exists")
