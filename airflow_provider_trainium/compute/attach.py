"""Attach or submit: the one policy every backend shares for "never a second copy of a job".

A task instance names its job deterministically (``compute.naming``), so a retry, a restarted worker or a
cleared task finds the job an earlier try started. That job is reused unless it ran a different spec (the
run's params changed, or a run id was reused after a reset): every backend records the hash of the spec it
submitted (local in its state file, Batch and ECS in a job tag, see ``SPEC_HASH_TAG``) and reports it as
``handle.details["spec_hash"]``. A job that failed or was cancelled is not reused either: the retry runs it
again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from airflow_provider_trainium.compute.base import ComputeBackend, JobHandle, JobState, JobStatus
from airflow_provider_trainium.neuron.spec import JobSpec


@dataclass(frozen=True)
class Attached:
    """The job a try will wait on. ``status`` is the earlier job's state when reused, None when just submitted."""

    handle: JobHandle
    status: JobStatus | None

    @property
    def already_succeeded(self) -> bool:
        return self.status is not None and self.status.state is JobState.SUCCEEDED


def same_spec(handle: JobHandle, spec: JobSpec) -> bool:
    """Whether the found job runs ``spec``; a job that recorded no hash (submitted before hashes) counts as same."""
    recorded = handle.details.get("spec_hash")
    return recorded in (None, "") or recorded == spec.content_hash()


def find_or_submit(
    backend: ComputeBackend,
    spec: JobSpec,
    job_name: str,
    tags: dict[str, str],
    log: Callable[[str], None] = lambda message: None,
) -> Attached:
    """The job an earlier try of this task instance started, when it can be reused; else a new one."""
    handle = backend.find_existing(job_name, tags)
    if handle is not None and not same_spec(handle, spec):
        log(f"job {handle.job_id} ran a different spec (hash {handle.details.get('spec_hash')}); starting this one")
        handle = None
    if handle is not None:
        status = backend.status(handle)
        if status.state is JobState.SUCCEEDED:
            log(f"job {handle.job_id} already succeeded in an earlier try; not running it again")
            return Attached(handle, status)
        if not status.state.terminal:
            log(f"attaching to job {handle.job_id} started by an earlier try ({status.state})")
            return Attached(handle, status)
        log(f"job {handle.job_id} of an earlier try ended {status.state}; starting it again")
    handle = backend.submit(spec, job_name, tags)
    log(f"submitted job {handle.job_id}")
    return Attached(handle, None)
