"""Components dying mid-run, as they do in real deployments: the scheduler, the worker running a job, the
triggerer while a Batch job (moto server) is deferred, and PostgreSQL for 20 s while a job runs.

The job is ``trainium_e2e_hold``'s (tests/e2e/dags): a local job that stays in flight until the test lets it
finish, so a fault lands mid-job without paying for a training run; the counts are the ones a training run
must keep (one job started, the next task run once)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.compute.naming import job_name
from devserver.supervisor import POSTGRES
from tests.conftest import MOTO_REGION
from tests.e2e.conftest import training_processes, wait_for, wait_run
from tests.integration.batch import moto_batch
from tests.integration.conftest import EXECUTION_ROLE_ARN, JOB_ROLE_ARN, efa_network, register_image

pytestmark = pytest.mark.slow

HOLD = "trainium_e2e_hold"


def work_dir(deployment, run_id: str) -> Path:
    """The hold job's work folder (``HOLD_ROOT`` of the DAG)."""
    return deployment.home / "hold" / run_id


def start_hold(api, deployment) -> str:
    """Trigger a run and return once its job is in flight (it has written its start line)."""
    api.unpause(HOLD)
    resp = api.trigger(HOLD, {})
    assert resp.status_code == 200, resp.text
    run_id = resp.json()["dag_run_id"]
    started = work_dir(deployment, run_id) / "started"
    wait_for(lambda: started.exists() and api.task_instance(HOLD, run_id, "hold")["state"] == "running", 600,
             "the hold job to start", deployment)  # fmt: skip
    return run_id


def release_and_check(api, deployment, run_id: str, *, hold_tries: int | None) -> None:
    """Let the job finish; the run succeeds with one job started once and no process of it left, ``hold`` took
    ``hold_tries`` tries (None: any), and ``after`` ran once."""
    (work_dir(deployment, run_id) / "go").touch()
    assert wait_run(api, deployment, HOLD, run_id, timeout=600) == "success", api.task_states(HOLD, run_id)
    starts = (work_dir(deployment, run_id) / "started").read_text().splitlines()
    assert len(starts) == 1, f"the job started {len(starts)} times: {starts}"
    name = job_name(HOLD, "hold", run_id)
    jobs = sorted(p.name for p in (deployment.home / "trainium-local" / "jobs").glob(f"{name}-*"))
    assert len(jobs) == 1, f"hold ran as {len(jobs)} jobs: {jobs}"
    assert training_processes(deployment.home, "tests.integration.jobs.count_runs") == []
    if hold_tries is not None:
        assert api.task_instance(HOLD, run_id, "hold")["try_number"] == hold_tries
    assert api.task_instance(HOLD, run_id, "after")["try_number"] == 1


def test_scheduler_killed_and_restarted_mid_run_the_next_task_still_runs(deployment, api):
    """The scheduler dies mid-transaction as often as not; its LocalExecutor workers keep its database session
    (and row locks) open. The run must still reach ``after``: the supervisor kills the dead scheduler's idle
    workers, and PostgreSQL ends a session idle in a transaction (devserver/postgres.py)."""
    run_id = start_hold(api, deployment)
    dead = deployment.procs["scheduler"].pid
    deployment.restart("scheduler", group=False)  # the scheduler process dies; its workers keep running
    release_and_check(api, deployment, run_id, hold_tries=1)
    deployment.wait_healthy(60, components=("scheduler",))
    wait_for(lambda: not sessions_of_group(deployment, dead), 60,
             "the dead scheduler's workers to let go of its database sessions", deployment)  # fmt: skip


def sessions_of_group(deployment, pgid: int) -> list[str]:
    """Connections to the deployment's PostgreSQL held by processes of process group ``pgid``."""
    import psutil

    held = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(ProcessLookupError, psutil.Error):
            if os.getpgid(proc.pid) == pgid:
                conns = proc.net_connections(kind="inet")
                if any(c.raddr and c.raddr.port == deployment.postgres.port for c in conns):
                    held.append(" ".join(proc.info["cmdline"] or []))
    return held


def test_a_hung_scheduler_is_killed_and_started_again_by_the_supervisor(deployment, supervisor):
    hung = deployment.procs["scheduler"]
    hung_after = supervisor.hung_after
    supervisor.hung_after = 30  # the lane's default leaves room for a loaded machine; this test has no load
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


def test_killed_worker_retry_attaches_to_the_same_job_and_leaves_no_orphans(deployment, api):
    run_id = start_hold(api, deployment)
    pid = api.task_instance(HOLD, run_id, "hold")["pid"]
    os.kill(pid, signal.SIGKILL)  # the task process; the job's processes live in their own session
    wait_for(lambda: api.task_instance(HOLD, run_id, "hold")["try_number"] == 2
             and api.task_instance(HOLD, run_id, "hold")["state"] == "running", 600,
             "the retry to attach", deployment)  # fmt: skip
    release_and_check(api, deployment, run_id, hold_tries=2)


def test_a_20_s_postgres_outage_mid_job_ends_with_one_job_and_the_deployment_up(deployment, supervisor, api):
    run_id = start_hold(api, deployment)
    supervisor.held.add(POSTGRES)  # the supervisor would start it again at once: hold it for the outage
    try:
        deployment.postgres.stop()
        time.sleep(20)  # the fault itself: the database is gone for 20 s
    finally:
        supervisor.held.discard(POSTGRES)
    deployment.wait_healthy(300, exit_fails=False)  # the database and every component back, whichever had died
    release_and_check(api, deployment, run_id, hold_tries=None)  # a try the outage failed attaches again
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
