"""The one event every backend's watch loop ends with, and every trigger fires.

Its dict form is what ``NeuronJobOperator.execute_complete`` receives and ``JobStatus.from_event`` reads,
whichever backend ran the job, deferred or not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_provider_trainium.compute.base import JobState, JobStatus


@dataclass(frozen=True)
class JobEvent:
    """A job reached an end state (or was stopped at its deadline or budget).

    ``log_tail`` holds the last lines of every node; ``log_streams`` maps node index -> CloudWatch stream.
    """

    handle: dict[str, Any]
    state: JobState
    reason: str = ""
    exit_code: int | None = None
    log_tail: tuple[str, ...] = ()
    log_streams: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "handle": self.handle,
            "state": self.state.value,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "log_tail": list(self.log_tail),
            "log_streams": dict(self.log_streams),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobEvent:
        code = data.get("exit_code")
        return cls(
            handle=dict(data.get("handle") or {}),
            state=JobState(data["state"]),
            reason=str(data.get("reason") or ""),
            exit_code=None if code is None else int(code),
            log_tail=tuple(data.get("log_tail") or ()),
            log_streams={str(k): str(v) for k, v in (data.get("log_streams") or {}).items()},
        )

    def status(self) -> JobStatus:
        return JobStatus(self.state, reason=self.reason, exit_code=self.exit_code, log_tail=self.log_tail)
