"""Attach or submit: reuse an earlier try's job unless it ran another spec, failed or was cancelled."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from airflow_provider_trainium.compute.attach import find_or_submit
from airflow_provider_trainium.compute.base import ComputeBackend, JobHandle, JobState, JobStatus
from airflow_provider_trainium.neuron.spec import JobSpec

SPEC = JobSpec(name="t", entry_point="trainium_trainer.mnist_mlp.train", args=("--epochs", "1"))


@dataclass
class Recorded(ComputeBackend):
    """A backend whose jobs are rows in a list; records the spec hash the way every real backend does."""

    name = "recorded"
    jobs: list[tuple[JobHandle, JobState]] = field(default_factory=list)

    def submit(self, spec: JobSpec, job_name: str, tags: dict[str, str]) -> JobHandle:
        handle = JobHandle(self.name, f"{job_name}-{len(self.jobs)}", job_name, {"spec_hash": spec.content_hash()})
        self.jobs.append((handle, JobState.RUNNING))
        return handle

    def find_existing(self, job_name: str, tags: dict[str, str]) -> JobHandle | None:
        mine = [h for h, _ in self.jobs if h.job_name == job_name]
        return mine[-1] if mine else None

    def status(self, handle: JobHandle) -> JobStatus:
        return JobStatus(next(s for h, s in self.jobs if h == handle))

    def cancel(self, handle: JobHandle, reason: str) -> None:
        self.end(handle, JobState.CANCELLED)

    def end(self, handle: JobHandle, state: JobState) -> None:
        self.jobs = [(h, state if h == handle else s) for h, s in self.jobs]


def test_a_running_job_of_the_same_spec_is_attached_not_resubmitted():
    backend = Recorded()
    first = find_or_submit(backend, SPEC, "job", {})
    again = find_or_submit(backend, SPEC, "job", {})
    assert first.status is None and again.handle == first.handle and again.status == JobStatus(JobState.RUNNING)
    assert len(backend.jobs) == 1


def test_a_succeeded_job_is_reused():
    backend = Recorded()
    backend.end(find_or_submit(backend, SPEC, "job", {}).handle, JobState.SUCCEEDED)
    assert find_or_submit(backend, SPEC, "job", {}).already_succeeded and len(backend.jobs) == 1


@pytest.mark.parametrize("state", [JobState.FAILED, JobState.CANCELLED])
def test_a_failed_or_cancelled_job_is_run_again(state):
    backend = Recorded()
    backend.end(find_or_submit(backend, SPEC, "job", {}).handle, state)
    again = find_or_submit(backend, SPEC, "job", {})
    assert again.status is None and len(backend.jobs) == 2


def test_a_job_that_ran_another_spec_is_not_reused_even_when_it_succeeded():
    backend = Recorded()
    backend.end(find_or_submit(backend, SPEC, "job", {}).handle, JobState.SUCCEEDED)
    messages: list[str] = []
    changed = SPEC.with_changes(args=("--epochs", "2"))
    again = find_or_submit(backend, changed, "job", {}, messages.append)
    assert again.status is None and again.handle.details["spec_hash"] == changed.content_hash()
    assert len(backend.jobs) == 2 and "ran a different spec" in messages[0]
