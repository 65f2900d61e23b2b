"""Where a job runs. One small interface (``ComputeBackend``), one module per place, one table of them
(:mod:`compute.backends`)."""

from __future__ import annotations

from airflow_provider_trainium.compute.base import ComputeBackend, JobHandle, JobState, JobStatus

__all__ = ["ComputeBackend", "JobHandle", "JobState", "JobStatus"]
