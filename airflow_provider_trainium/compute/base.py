"""The interface every compute backend (local, ECS, Batch) implements.

Operators only talk to this: submit a job, find one a previous try already submitted, read its status,
cancel it, and (for remote backends) hand a trigger to the triggerer while it runs.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_trainium.neuron.spec import JobSpec

#: The one log callback of every backend: receives each line of the job's output once.
LogSink = Callable[[str], None]


class JobState(enum.StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


@dataclass(frozen=True)
class JobHandle:
    """Enough to find a job again from another process: serialisable to XCom and trigger kwargs."""

    backend: str
    job_id: str
    job_name: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "job_id": self.job_id,
            "job_name": self.job_name,
            "details": self.details,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobHandle:
        return cls(data["backend"], data["job_id"], data["job_name"], dict(data.get("details") or {}))


@dataclass(frozen=True)
class JobStatus:
    state: JobState
    reason: str = ""
    exit_code: int | None = None
    log_tail: tuple[str, ...] = ()

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> JobStatus:
        """The status a watch loop's terminal event carries (``JobEvent.to_dict()``, any backend)."""
        from airflow_provider_trainium.compute.events import JobEvent

        return JobEvent.from_dict(event).status()


class JobFailedError(RuntimeError):
    """The job ran and failed. ``retryable`` is False when a rerun would fail the same way (bad input)."""

    def __init__(self, message: str, status: JobStatus, retryable: bool = True):
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class ComputeBackend(ABC):
    name: str

    @abstractmethod
    def submit(self, spec: JobSpec, job_name: str, tags: dict[str, str]) -> JobHandle:
        """Start the job. Callers first ask :meth:`find_existing` so a retry never starts a second one."""

    @abstractmethod
    def find_existing(self, job_name: str, tags: dict[str, str]) -> JobHandle | None:
        """A job this task instance already submitted (running or finished), if any."""

    @abstractmethod
    def status(self, handle: JobHandle) -> JobStatus: ...

    @abstractmethod
    def cancel(self, handle: JobHandle, reason: str) -> None: ...

    def wait(self, handle: JobHandle, log: LogSink, timeout_seconds: float) -> JobStatus:
        """Block until the job ends, streaming its log. Remote backends defer instead."""
        raise NotImplementedError(f"{self.name} jobs are waited on by a trigger")

    def trigger(self, handle: JobHandle, deadline: float) -> Any:
        """A trigger that fires once when the job ends (None: the backend only waits in the worker)."""
        return None
