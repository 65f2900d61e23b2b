"""Components dying mid-run, as they do in real deployments: the scheduler, the worker running a job, and
PostgreSQL for 20 s while a job runs (the triggerer killed while Batch and ECS jobs are deferred: the soak,
tests/e2e/test_soak.py).

The job is ``trainium_e2e_hold``'s (tests/e2e/dags): a local job that stays in flight until the test lets it
finish, so a fault lands mid-job without paying for a training run; the counts are the ones a training run
must keep (one job started, the next task run once)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from airflow_provider_trainium.compute.naming import job_name
from devserver.deployment import processes_in_groups
from devserver.supervisor import POSTGRES
from tests.e2e.conftest import training_processes, wait_for, wait_run

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
    held = []
    for proc in processes_in_groups({pgid}):
        with contextlib.suppress(psutil.Error):
            if any(c.raddr and c.raddr.port == deployment.postgres.port for c in proc.net_connections(kind="inet")):
                held.append(" ".join(proc.info["cmdline"] or []))
    return held


def test_a_hung_scheduler_is_replaced_and_its_reset_try_attaches_to_the_running_job(deployment, supervisor, api):
    """The new scheduler finds the hung one's heartbeat stale and resets its running try (LocalExecutor adopts
    nothing); Airflow then kills that try, and its ``on_kill`` must leave the job for the next try."""
    run_id = start_hold(api, deployment)
    reset_try = psutil.Process(api.task_instance(HOLD, run_id, "hold")["pid"])
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
    wait_for(lambda: api.task_instance(HOLD, run_id, "hold")["try_number"] == 2
             and api.task_instance(HOLD, run_id, "hold")["state"] == "running", 300,
             "the reset try's successor to attach", deployment)  # fmt: skip
    wait_for(lambda: not reset_try.is_running(), 300, "Airflow to kill the reset try", deployment)
    release_and_check(api, deployment, run_id, hold_tries=2)


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
