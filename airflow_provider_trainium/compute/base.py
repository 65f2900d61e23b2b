"""The interface every compute backend (local, ECS, Batch) implements.

Operators only talk to this: submit a job, find one a previous try already submitted, read its status,
cancel it, and (for remote backends) hand a trigger to the triggerer while it runs. A backend also declares
what it can do (``defers``, ``runs_image``, ``check``, its compile wrapper, its job environment), so an
operator asks the backend instead of branching on its name. The set of backends is ``compute.backends``.
"""

from __future__ import annotations

import enum
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_trainium.neuron.plan import ContainerPlan, container_plan
from airflow_provider_trainium.neuron.spec import JobSpec

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig

#: The one log callback of every backend: receives each line of the job's output once.
LogSink = Callable[[str], None]
#: The command word that fills the Neuron compilation cache from a short trial of the training command.
NEURON_PARALLEL_COMPILE = "neuron_parallel_compile"
#: The job tag (Batch, ECS) and handle detail that record which spec a job runs.
SPEC_HASH_TAG = "trainium:spec-hash"
#: One node's billed time: (start, stop) in unix seconds; stop is None while it runs.
Interval = tuple[float, float | None]


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
    """Where a job stands. ``billed_intervals``: what a watch loop saw the platform bill at the job's end (one
    interval per node and attempt), so its cost needs no second call; None when nobody saw it end."""

    state: JobState
    reason: str = ""
    exit_code: int | None = None
    log_tail: tuple[str, ...] = ()
    billed_intervals: tuple[Interval, ...] | None = None

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> JobStatus:
        """The status a watch loop's terminal event carries (``JobEvent.to_dict()``, any backend)."""
        return JobEvent.from_dict(event).status()


@dataclass(frozen=True)
class WatchRequest:
    """One wait for a job, as every way of waiting takes it (a trigger, its watch loop, the worker's wait):
    the job, when to give up on it (epoch seconds: the wait stops the job then), the budget's mid-run stop
    (``{"max_cost_usd", "cost_per_hour_usd"}``, ``compute.budget.watch_budget``) and where the wait keeps how far
    it read the job's log, so a restarted triggerer or worker resumes there."""

    handle: JobHandle
    deadline: float
    budget: dict[str, float] | None = None
    log_cursor_uri: str | None = None


@dataclass(frozen=True)
class JobEvent:
    """A job reached an end state (or was stopped at its deadline or budget): the one event every backend's
    watch loop ends with and every trigger fires. Its dict form is what ``TrainiumJobOperator.execute_complete``
    receives, whichever backend ran the job, deferred or not.

    ``log_tail`` holds the last lines of every node; ``log_streams`` maps node index -> CloudWatch stream.
    ``billed_intervals`` are the start and stop times the platform reported for every node as the job ended
    (empty: it never started); None when the loop did not see them (it stopped the job itself, or the event was
    stored before events carried them), and the cost step then asks the platform.
    """

    handle: dict[str, Any]
    state: JobState
    reason: str = ""
    exit_code: int | None = None
    log_tail: tuple[str, ...] = ()
    log_streams: dict[str, str] = field(default_factory=dict)
    billed_intervals: tuple[Interval, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        billed = None if self.billed_intervals is None else [[start, stop] for start, stop in self.billed_intervals]
        return {
            "handle": self.handle,
            "state": self.state.value,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "log_tail": list(self.log_tail),
            "log_streams": dict(self.log_streams),
            "billed_intervals": billed,
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
            billed_intervals=_intervals(data.get("billed_intervals")),
        )

    def status(self) -> JobStatus:
        return JobStatus(
            self.state,
            reason=self.reason,
            exit_code=self.exit_code,
            log_tail=self.log_tail,
            billed_intervals=self.billed_intervals,
        )


def _intervals(data: Any) -> tuple[Interval, ...] | None:
    """``[[start, stop], ...]`` read back; None (an event without the field) stays None."""
    if data is None:
        return None
    return tuple((float(start), None if stop is None else float(stop)) for start, stop in data)


class JobInputError(ValueError):
    """A job the platform must not be sent (bad configuration, storage or queue): rerunning cannot help.

    Raised before anything is paid for; the operator fails the task without retries.
    """


def float_options(options: dict[str, Any], **keywords: str) -> dict[str, float]:
    """The operator ``options`` a backend reads as seconds, as floats under the backend's own keywords
    (``keyword="option"``); an option the operator leaves unset is left out, so the backend's default holds."""
    return {keyword: float(options[option]) for keyword, option in keywords.items() if option in options}


class ComputeBackend(ABC):
    name: str
    #: Whether the job is waited on by a trigger in the triggerer (else the worker waits with ``wait``).
    defers: bool = False
    #: Whether the job runs a container image (which must then pass the image trust rule before submit).
    runs_image: bool = True

    @classmethod
    def from_config(cls, config: TrainiumConfig, options: dict[str, Any]) -> ComputeBackend:
        """The backend for this connection; ``options`` holds operator settings a backend may use."""
        return cls(config)  # type: ignore[call-arg]  # each backend's __init__ takes the config; the ABC has none

    def check(self, spec: JobSpec) -> None:
        """Raise ValueError for anything this backend cannot run, before any call that costs money."""
        return None

    def compile_wrapper(self) -> tuple[str, ...]:
        """Words in front of the training command for a compile trial (``neuron_parallel_compile`` on Neuron)."""
        return (NEURON_PARALLEL_COMPILE,)

    def compiler_version(self, spec: JobSpec) -> str:
        """What pins the compiler, for the compile cache key: the image (it pins the Neuron SDK)."""
        return f"image:{spec.image}"

    def runs_as(self, spec: JobSpec) -> JobSpec:
        """The layout the job really runs with on this backend (a local machine caps processes per node)."""
        return spec

    def job_environment(self, compile_cache_uri: str | None) -> dict[str, str]:
        """Variables this backend adds to every job: the Neuron compiler's cache on Neuron hardware."""
        return {"NEURON_COMPILE_CACHE_URL": compile_cache_uri} if compile_cache_uri else {}

    def plan(self, spec: JobSpec) -> ContainerPlan:
        """The job's container plan, built once per spec: the checks before submit and the submit share it.

        A backend that runs an image runs it on Trainium, so the plan carries the MFU peak; one that does not
        (local compute) runs on this machine and gets none.
        """
        plans: dict[str, ContainerPlan] = self.__dict__.setdefault("_plans", {})
        key = spec.content_hash(length=64)
        if key not in plans:
            plans[key] = container_plan(spec, on_trainium=self.runs_image)
        return plans[key]

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

    def wait(
        self,
        handle: JobHandle,
        log: LogSink,
        timeout_seconds: float,
        budget: dict[str, float] | None = None,
        log_cursor_uri: str | None = None,
    ) -> JobStatus:
        """Block until the job ends, streaming its log, or stop it after ``timeout_seconds``. Remote backends defer
        instead; a task that does not defer waits here (:meth:`wait_until`).

        ``budget`` (``{"max_cost_usd", "cost_per_hour_usd"}``): a backend that bills stops the job once its
        accrued cost passes ``max_cost_usd``; one that costs nothing (local) ignores it. ``log_cursor_uri``: where
        a backend that reads its log from a cursor keeps it (a retried worker resumes there); local compute
        reads its processes' pipes and ignores it.
        """
        return self.wait_until(WatchRequest(handle, time.time() + timeout_seconds, budget, log_cursor_uri), log)

    def wait_until(self, request: WatchRequest, log: LogSink) -> JobStatus:
        """:meth:`wait`, as every way of waiting takes it: the job, its deadline, budget and log cursor."""
        raise NotImplementedError(f"{self.name} jobs are waited on by a trigger")

    def billed_intervals(self, handle: JobHandle) -> list[Interval] | None:
        """Each node's billed (start, stop or None while running) in unix seconds, from the platform's own
        records; None for a backend that bills nothing (its cost is the estimate for the layout)."""
        raise ValueError(f"no cost records for compute backend {self.name!r}")

    def trigger(self, request: WatchRequest) -> Any:
        """A trigger that fires once when the job ends (None: the backend only waits in the worker)."""
        return None
