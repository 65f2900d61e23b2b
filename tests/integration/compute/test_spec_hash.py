"""On Batch and ECS (moto server) a job records its spec hash: a retry reuses it, a changed spec starts anew."""

from __future__ import annotations

from airflow_provider_trainium.compute.attach import find_or_submit
from airflow_provider_trainium.compute.base import SPEC_HASH_TAG, JobState
from airflow_provider_trainium.compute.naming import job_name, job_tags
from airflow_provider_trainium.neuron.spec import JobSpec
from tests.integration.batch import moto_batch
from tests.integration.batch.conftest import IMAGE as BATCH_IMAGE
from tests.integration.ecs.conftest import IMAGE as ECS_IMAGE

NAME, TAGS = job_name("d", "t", "manual__1"), job_tags("d", "t", "manual__1")


def test_batch_reuses_the_job_of_the_same_spec_and_reruns_a_changed_one(batch_env):
    spec = JobSpec(name="train", entry_point="trainium_trainer.allreduce", instance_type="trn1.32xlarge", nodes=2,
                   image=BATCH_IMAGE, output_uri="s3://b/runs/1")  # fmt: skip
    first = find_or_submit(batch_env.backend(), spec, NAME, TAGS)
    moto_batch.hold_running(batch_env.region, [first.handle.job_id])
    (job,) = batch_env.batch.describe_jobs(jobs=[first.handle.job_id])["jobs"]
    assert job["tags"][SPEC_HASH_TAG] == spec.content_hash()

    retry = find_or_submit(batch_env.backend(), spec, NAME, TAGS)  # a new worker: everything from AWS
    assert retry.handle.job_id == first.handle.job_id and retry.status.state is JobState.RUNNING

    changed = spec.with_changes(args=("--size-mb", "64"))
    cleared = find_or_submit(batch_env.backend(), changed, NAME, TAGS)
    assert cleared.status is None and cleared.handle.job_id != first.handle.job_id
    assert cleared.handle.details["spec_hash"] == changed.content_hash()
    found = batch_env.backend().find_existing(NAME, TAGS)
    assert found.job_id == cleared.handle.job_id and found.details["spec_hash"] == changed.content_hash()


def test_ecs_reuses_the_task_of_the_same_spec_and_reruns_a_changed_one(ecs_world, task_progress):
    from airflow_provider_trainium.compute.ecs.backend import EcsBackend

    task_progress({"progression": "manual", "times": 10_000})
    ecs_world.add_instance("trn1.2xlarge")
    ecs_world.add_instance("trn1.2xlarge")
    spec = JobSpec(name="train", entry_point="trainium_trainer.mnist_mlp.train", image=ECS_IMAGE, output_uri="s3://b/r")

    def backend() -> EcsBackend:
        return EcsBackend(ecs_world.config(), poll_interval_seconds=0)

    first = find_or_submit(backend(), spec, NAME, TAGS)
    retry = find_or_submit(backend(), spec, NAME, TAGS)
    assert retry.handle.job_id == first.handle.job_id and retry.status.state is JobState.RUNNING
    assert retry.handle.details["spec_hash"] == spec.content_hash()  # read back from the task's tags

    changed = spec.with_changes(args=("--epochs", "3"))
    cleared = find_or_submit(backend(), changed, NAME, TAGS)
    assert cleared.status is None and cleared.handle.job_id != first.handle.job_id
    tasks = ecs_world.ecs.list_tasks(cluster=ecs_world.cluster, startedBy=NAME)["taskArns"]
    assert sorted(tasks) == sorted([first.handle.job_id, cleared.handle.job_id])
