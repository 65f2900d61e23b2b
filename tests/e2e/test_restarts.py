"""Components dying mid-run, as they do in real deployments: the scheduler, the worker running ``train``, the
triggerer while a Batch job (moto server) is deferred, and PostgreSQL for 20 s while ``train`` runs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_trainium.compute.naming import job_name
from devserver.supervisor import POSTGRES
from tests.conftest import MOTO_REGION
from tests.e2e.conftest import training_processes, wait_for, wait_run
from tests.integration.batch import moto_batch
from tests.integration.conftest import EXECUTION_ROLE_ARN, JOB_ROLE_ARN, efa_network, register_image

pytestmark = pytest.mark.slow

MNIST = "trainium_mnist_mlp"
MNIST_FAST = {"compute": "local"}  # default epochs: the DAG's accuracy gate is fixed
TRAIN = "trainium_trainer.mnist_mlp.train"


def start_mnist_until_training(api, deployment) -> str:
    """Trigger a run and return once ``train`` is running and its torchrun agents exist."""
    api.unpause(MNIST)
    resp = api.trigger(MNIST, MNIST_FAST)
    assert resp.status_code == 200, resp.text
    run_id = resp.json()["dag_run_id"]

    def training() -> bool:
        if api.task_instance(MNIST, run_id, "train")["state"] != "running":
            return False
        procs = training_processes(deployment.home, TRAIN)
        return any("--compile-only" not in " ".join(p.cmdline()) for p in procs if p.is_running())

    wait_for(training, 900, "train to start its job", deployment)
    return run_id


def test_scheduler_killed_and_restarted_mid_run_the_run_still_succeeds(deployment, api):
    run_id = start_mnist_until_training(api, deployment)
    deployment.restart("scheduler", group=False)  # the scheduler process dies; its workers keep running
    # The new scheduler cannot adopt the LocalExecutor tasks of the dead one: it resets them, and they rerun
    # as their next try. The run goes on to success.
    assert wait_run(api, deployment, MNIST, run_id) == "success", api.task_states(MNIST, run_id)
    deployment.wait_healthy(60, components=("scheduler",))


def test_a_hung_scheduler_is_killed_and_started_again_by_the_supervisor(deployment, supervisor):
    hung = deployment.procs["scheduler"]
    hung_after = supervisor.hung_after
    supervisor.hung_after = 30  # the default (240 s) leaves room for a loaded machine; this test has no load
    try:
        os.kill(hung.pid, signal.SIGSTOP)  # alive, but it heartbeats no more: hung, not dead

        def replaced() -> bool:
            proc = deployment.procs["scheduler"]
            return proc.pid != hung.pid and proc.poll() is None

        wait_for(replaced, 300, "the supervisor to replace the hung scheduler", deployment)
    finally:
        supervisor.hung_after = hung_after
        with contextlib.suppress(ProcessLookupError):
            os.kill(hung.pid, signal.SIGCONT)
    assert hung.poll() == -signal.SIGKILL
    deployment.wait_healthy(120, components=("scheduler",), exit_fails=False)


def test_killed_worker_retry_attaches_to_the_same_job_and_leaves_no_orphans(deployment, api, registry):
    run_id = start_mnist_until_training(api, deployment)
    pid = api.task_instance(MNIST, run_id, "train")["pid"]
    os.kill(pid, signal.SIGKILL)  # the task process running train; its torchrun agents live in their own session
    assert wait_run(api, deployment, MNIST, run_id) == "success", api.task_states(MNIST, run_id)
    assert api.task_instance(MNIST, run_id, "train")["try_number"] == 2
    assert training_processes(deployment.home, "trainium_trainer.mnist_mlp") == []
    name = job_name(MNIST, "train", run_id)
    jobs = sorted(p.name for p in (deployment.home / "trainium-local" / "jobs").glob(f"{name}-*"))
    assert len(jobs) == 1, f"train ran as {len(jobs)} jobs: {jobs}"
    registered = api.xcom(MNIST, run_id, "register")
    assert registry.get_version("mnist-mlp", registered["version"]).metrics["samples_per_second"] > 0


def test_a_20_s_postgres_outage_mid_training_ends_with_one_job_one_version_and_the_deployment_up(
    deployment, supervisor, api, registry
):
    versions = len(registry.list_versions("mnist-mlp")) if "mnist-mlp" in registry.list_models() else 0
    run_id = start_mnist_until_training(api, deployment)
    supervisor.held.add(POSTGRES)  # the supervisor would start it again at once: hold it for the outage
    try:
        deployment.postgres.stop()
        time.sleep(20)  # the fault itself: the database is gone for 20 s
    finally:
        supervisor.held.discard(POSTGRES)
    deployment.wait_healthy(300, exit_fails=False)  # the database and every component back, whichever had died
    assert wait_run(api, deployment, MNIST, run_id) == "success", api.task_states(MNIST, run_id)
    name = job_name(MNIST, "train", run_id)
    jobs = sorted(p.name for p in (deployment.home / "trainium-local" / "jobs").glob(f"{name}-*"))
    assert len(jobs) == 1, f"train ran as {len(jobs)} jobs: {jobs}"
    assert len(registry.list_versions("mnist-mlp")) == versions + 1
    deployment.wait_healthy(60, exit_fails=False)
    assert all(proc.poll() is None for proc in deployment.procs.values()), deployment.tail()


# -- the triggerer, with a Batch job deferred against the moto server ---------------------------------------

# Trusted images only: a digest in the connection's ECR repository.
REPOSITORY = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium"
IMAGE = f"{REPOSITORY}@sha256:{'cd' * 32}"
QUEUE = "trn-queue"
LOG_GROUP = "/trainium/jobs"
BUCKET = "trainium-artifacts"
SMOKE = "trainium_allreduce_smoke"


def _keep_running(self: Any, include_start_attempt: bool, job: Any) -> None:
    """What AWS Batch does after SubmitJob: the job starts and runs until it is finished (moto's simple Batch
    would mark it SUCCEEDED inside SubmitJob)."""
    import datetime

    self.backend._jobs[job.job_id] = job
    job.job_started_at = datetime.datetime.now()
    job.log_stream_name = job._stream_name
    if include_start_attempt:
        job._start_attempt()
    job.status = "RUNNING"


@pytest.fixture
def batch_deployment(deployment, api, moto_reset, monkeypatch) -> Iterator[dict[str, Any]]:
    """A Batch queue, an S3 artifact root and CloudWatch logs in moto, and the ``trainium_default`` and
    ``aws_moto`` connections created through the REST API (removed afterwards)."""
    import boto3
    from moto.batch_simple.models import BatchSimpleBackend

    monkeypatch.setattr(BatchSimpleBackend, "_mark_job_as_finished", _keep_running)
    clients = {
        name: boto3.client(
            name,
            endpoint_url=moto_reset,
            region_name=MOTO_REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )  # fmt: skip
        for name in ("batch", "iam", "s3", "logs", "ec2", "ecr")
    }
    moto_batch.create_queue(clients["batch"], clients["iam"], QUEUE)
    clients["s3"].create_bucket(Bucket=BUCKET)
    subnet, group = efa_network(clients["ec2"])  # what the base stack makes, so the first task's preflight passes
    register_image(clients["ecr"], IMAGE)
    connections = {
        "aws_moto": {"conn_type": "aws", "login": "testing", "password": "testing",
                     "extra": {"endpoint_url": moto_reset, "region_name": MOTO_REGION}},
        "trainium_default": {"conn_type": "trainium", "extra": {
            "aws_conn_id": "aws_moto", "region_name": MOTO_REGION, "artifact_root": f"s3://{BUCKET}/trainium",
            "batch_job_queues": {"trn1.32xlarge": QUEUE}, "image": IMAGE, "ecr_repository": REPOSITORY,
            "log_group": LOG_GROUP, "job_role_arn": JOB_ROLE_ARN, "ecs_execution_role_arn": EXECUTION_ROLE_ARN,
            "subnets": [subnet], "security_groups": [group]}},
    }  # fmt: skip
    for conn_id, conn in connections.items():
        resp = api.request("POST", "connections", json={"connection_id": conn_id, **conn,
                                                        "extra": json.dumps(conn["extra"])})  # fmt: skip
        assert resp.status_code == 201, resp.text
    try:
        yield clients
    finally:
        for conn_id in connections:
            api.request("DELETE", f"connections/{conn_id}")


def test_triggerer_killed_while_a_batch_job_is_deferred_one_submit_and_no_repeated_lines(
    deployment, api, batch_deployment
):
    api.unpause(SMOKE)
    conf = {"compute": "batch", "nodes": 2, "instance_type": "trn1.32xlarge", "image": IMAGE, "bandwidth_mb": 1}
    resp = api.trigger(SMOKE, conf)
    assert resp.status_code == 200, resp.text
    run_id = resp.json()["dag_run_id"]
    wait_for(lambda: api.task_instance(SMOKE, run_id, "allreduce")["state"] == "deferred", 600,
             "allreduce to defer", deployment)  # fmt: skip
    name = job_name(SMOKE, "allreduce", run_id)
    jobs = batch_deployment["batch"].list_jobs(jobQueue=QUEUE, filters=[{"name": "JOB_NAME", "values": [name]}])
    (job,) = jobs["jobSummaryList"]
    streams = moto_batch.start_nodes(MOTO_REGION, job["jobId"], 2, batch_deployment["logs"], LOG_GROUP)
    start_ms = job["createdAt"] + 1000
    before = [[f"node {n} step {i} before the restart" for i in range(5)] for n in range(2)]
    for node, stream in enumerate(streams):
        moto_batch.write_log(batch_deployment["logs"], LOG_GROUP, stream, before[node], start_ms)

    def log_has(lines: list[str]) -> bool:
        text = api.log(SMOKE, run_id, "allreduce", 1)
        return all(line in text for line in lines)

    wait_for(lambda: log_has(before[0] + before[1]), 300, "the streamed lines in the task log", deployment)
    deployment.restart("triggerer")
    deployment.wait_healthy(120, components=("triggerer",))
    after = [[f"node {n} step {i} after the restart" for i in range(5)] for n in range(2)]
    for node, stream in enumerate(streams):
        moto_batch.write_log(batch_deployment["logs"], LOG_GROUP, stream, after[node], start_ms + 100)
    wait_for(lambda: log_has(after[0] + after[1]), 300, "the lines written after the restart", deployment)
    moto_batch.finish(MOTO_REGION, job["jobId"], success=True)
    assert wait_run(api, deployment, SMOKE, run_id) == "success", api.task_states(SMOKE, run_id)

    submitted = [
        j for j in moto_batch._backend(MOTO_REGION)._jobs.values() if j.job_name == name and "#" not in j.job_id
    ]
    assert len(submitted) == 1
    streamed = [str(e.get("event")) for e in api.log_entries(SMOKE, run_id, "allreduce", 1)]
    counts = Counter(e for e in streamed if "the restart" in e)
    assert len(counts) == 20 and set(counts.values()) == {1}, {e: c for e, c in counts.items() if c > 1}
