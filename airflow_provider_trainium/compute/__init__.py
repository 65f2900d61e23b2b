"""Where a job runs. One small interface (``ComputeBackend``), one module per place."""

from __future__ import annotations

from airflow_provider_trainium.compute.base import (
    ComputeBackend,
    JobFailedError,
    JobHandle,
    JobState,
    JobStatus,
)

COMPUTE_CHOICES: tuple[str, ...] = ("auto", "local", "ecs", "batch")

__all__ = ["COMPUTE_CHOICES", "ComputeBackend", "JobFailedError", "JobHandle", "JobState", "JobStatus"]
