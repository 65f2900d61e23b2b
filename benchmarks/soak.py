"""Soak: deferred Batch and ECS jobs through the whole deployment while AWS misbehaves and components die.

The deployment (``devserver``: PostgreSQL, API server, scheduler, DAG processor,
triggerer) runs ``trainium_allreduce_smoke`` on ``compute=batch`` (2 nodes) and ``compute=ecs`` (one
instance), half each by default, against a moto server in this process, reached through
:mod:`benchmarks.fault_proxy` (5% of calls throttled, failed, reset or slow by default). This process plays
the Batch scheduler (``tests/integration/batch/moto_batch``) and the ECS agent: each submitted Batch job
starts two nodes, each ECS task runs on a container instance of its own, their streams get lines, and jobs
end one by one, their last lines written as they end. Meanwhile the triggerer is killed and restarted
(twice), the scheduler once, and PostgreSQL stops for 20 s.

It prints, with each goal: SubmitJob calls per Batch job and RunTask calls per ECS job (1), jobs lost or
stuck (0), repeated and missing log lines (0), DescribeJobs and DescribeTasks calls per poll interval,
triggerer memory per deferred job and the time from a job's end to its task's end.

    make soak                                   # 200 jobs, at most SOAK_MINUTES (40)
    python -m benchmarks.soak --jobs 20 --minutes 5 --triggerer-restarts 1 --scheduler-restarts 0 --pg-outage 0
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.fault_proxy import FaultPlan, FaultProxy

REPO = Path(__file__).resolve().parents[1]
HOME = REPO / "test-artifacts" / "soak-home"
REGION = "us-east-1"
POLL_INTERVAL = 30.0  # the Batch backend's DescribeJobs round
LINES_PER_BATCH = 3  # per node and batch of lines
BATCHES = 4  # batches of lines per job before its end batch
ECS_CLUSTER = "trainium-soak"
SMOKE = "trainium_allreduce_smoke"
#: Trusted images only: a digest in the connection's ECR repository.
REPOSITORY = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium"
IMAGE = f"{REPOSITORY}@sha256:{'cd' * 32}"
QUEUE = "trn-queue"
LOG_GROUP = "/trainium/jobs"
BUCKET = "trainium-artifacts"
SOAK_LINE = re.compile(r"soak \S+ node \d+ batch \d+ line \d+")


@dataclass
class Job:
    """One run of the smoke DAG and what this process did to its Batch job."""

    run_id: str
    compute: str = "batch"  # or "ecs"
    job_id: str | None = None  # the Batch job id or the ECS task ARN
    streams: list[str] = field(default_factory=list)
    batches: int = 0
    written: list[str] = field(default_factory=list)
    ended_at: float | None = None
    next_write: float = 0.0
    done_at: float | None = None
    state: str = "queued"


@dataclass
class Results:
    jobs: int
    ecs_jobs: int
    submit_calls: int
    run_task_calls: int
    submitted_jobs: int
    duplicates: int
    lost: list[str]
    stuck: list[str]
    lines_written: int
    repeated: int
    missing: int
    describe_per_interval: list[int]
    describe_tasks_per_interval: list[int]
    memory_per_job_mib: float | None
    peak_deferred: int
    detect_seconds: list[float]
    faults: Counter[tuple[str, str]]
    calls: Counter[str]
    events: list[str]
    wall_seconds: float

    def table(self) -> str:
        busy = [n for n in self.describe_per_interval if n] or [0]
        busy_ecs = [n for n in self.describe_tasks_per_interval if n] or [0]
        detect = sorted(self.detect_seconds) or [float("nan")]
        batch_jobs = self.jobs - self.ecs_jobs
        rows = [
            ("SubmitJob calls per Batch job", f"{self.submit_calls / max(batch_jobs, 1):.2f} "
             f"({self.submit_calls} calls for {batch_jobs} jobs)", "1"),
            ("RunTask calls per ECS job", f"{self.run_task_calls / max(self.ecs_jobs, 1):.2f} "
             f"({self.run_task_calls} calls for {self.ecs_jobs} jobs)", "1"),
            ("jobs started in AWS", f"{self.submitted_jobs} ({self.duplicates} duplicates)", f"{self.jobs}"),
            ("jobs lost", f"{len(self.lost)}", "0"),
            ("jobs stuck", f"{len(self.stuck)}", "0"),
            ("repeated log lines", f"{self.repeated} of {self.lines_written}", "0"),
            ("missing log lines", f"{self.missing} of {self.lines_written}", "0"),
            (f"DescribeJobs per {POLL_INTERVAL:.0f} s", f"median {statistics.median(busy):.0f}, max {max(busy)}",
             "~ceil(deferred/100) + tasks' own"),
            (f"DescribeTasks per {POLL_INTERVAL:.0f} s", f"median {statistics.median(busy_ecs):.0f}, "
             f"max {max(busy_ecs)}", "~ceil(deferred/100) + tasks' own"),
            ("triggerer memory per deferred job",
             "n/a" if self.memory_per_job_mib is None else f"{self.memory_per_job_mib * 1024:.0f} KiB "
             f"(peak {self.peak_deferred} deferred)", "small"),
            ("job end -> task done", f"median {statistics.median(detect):.0f} s, max {detect[-1]:.0f} s",
             f"<= {POLL_INTERVAL:.0f} s poll + scheduling"),
            ("calls that reached moto", ", ".join(f"{k} {n}" for k, n in self.calls.most_common(6)), ""),
            ("faults injected", f"{sum(self.faults.values())} ({self._fault_kinds()})", "5% of calls"),
        ]  # fmt: skip
        width = max(len(r[0]) for r in rows)
        lines = [f"{'':{width}}  {'measured':<58}  goal", *(f"{a:{width}}  {b:<58}  {c}" for a, b, c in rows)]
        lines.append(f"{self.jobs} jobs in {self.wall_seconds / 60:.1f} min; " + "; ".join(self.events))
        return "\n".join(lines)

    def _fault_kinds(self) -> str:
        kinds = Counter()
        for (_, kind), n in self.faults.items():
            kinds[kind] += n
        return ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))

    def at_goal(self) -> bool:
        return (
            self.submit_calls == self.jobs - self.ecs_jobs
            and self.run_task_calls == self.ecs_jobs
            and self.submitted_jobs == self.jobs
            and self.duplicates == 0
            and not self.lost
            and not self.stuck
            and self.repeated == 0
            and self.missing == 0
        )


class Soak:
    """One soak on a started deployment, its REST API and the moto server behind ``proxy``."""

    def __init__(self, deployment: Any, api: Any, moto_url: str, proxy: FaultProxy, *, jobs: int,
                 fault_rate: float, minutes: float, triggerer_restarts: int, scheduler_restarts: int,
                 pg_outage: float, ecs_share: float = 0.5, seed: int = 25,
                 held: set[str] | None = None) -> None:  # fmt: skip
        self.deployment = deployment
        #: The supervisor's components not to restart (``Supervisor.held``): PostgreSQL is held down for the
        #: outage, or the supervisor would start it again within a second.
        self.held = held if held is not None else set()
        self.api = api
        self.moto_url = moto_url
        self.proxy = proxy
        self.count = jobs
        self.ecs_count = round(jobs * ecs_share)
        self.fault_rate = fault_rate
        self.minutes = minutes
        self.triggerer_restarts = triggerer_restarts
        self.scheduler_restarts = scheduler_restarts
        self.pg_outage = pg_outage
        self.seed = seed
        self.jobs: dict[str, Job] = {}
        self.events: list[str] = []
        self.memory: list[tuple[int, float]] = []  # (deferred tasks, triggerer RSS MiB)
        self.clients: dict[str, Any] = {}
        self._stop = threading.Event()

    # -- the fake cloud ------------------------------------------------------------------------------------
    def setup(self) -> None:
        """A Batch queue, an S3 artifact root, CloudWatch logs, the EFA network and a trusted image in moto, and
        the ``aws_moto`` and ``trainium_default`` connections,
        with the AWS connection's endpoint the fault proxy; and an ECS cluster with one trn1.32xlarge container
        instance per ECS job, whose tasks run until this process stops them."""
        import boto3
        from moto.batch_simple.models import BatchSimpleBackend
        from moto.moto_api import state_manager

        from tests.integration.batch import moto_batch
        from tests.integration.conftest import EXECUTION_ROLE_ARN, JOB_ROLE_ARN, efa_network, register_image

        BatchSimpleBackend._mark_job_as_finished = moto_batch.keep_running  # jobs run until this process ends them
        self.clients = {
            name: boto3.client(
                name,
                endpoint_url=self.moto_url,
                region_name=REGION,
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            )  # fmt: skip
            for name in ("batch", "iam", "s3", "logs", "ec2", "ecr", "ecs")
        }
        # ECS tasks stay RUNNING (moto would stop them on the first DescribeTasks) until _write stops them
        state_manager.set_transition(model_name="ecs::task", transition={"progression": "manual", "times": 10**9})
        moto_batch.create_queue(self.clients["batch"], self.clients["iam"], QUEUE)
        self.clients["s3"].create_bucket(Bucket=BUCKET)
        with contextlib.suppress(self.clients["logs"].exceptions.ResourceAlreadyExistsException):
            self.clients["logs"].create_log_group(logGroupName=LOG_GROUP)
        subnet, group = efa_network(self.clients["ec2"])
        register_image(self.clients["ecr"], IMAGE)
        self._ecs_cluster(subnet, group)
        self.image, self.log_group = IMAGE, LOG_GROUP
        connections = {
            "aws_moto": {"conn_type": "aws", "login": "testing", "password": "testing",
                         "extra": {"endpoint_url": self.proxy.url, "region_name": REGION}},
            "trainium_default": {"conn_type": "trainium", "extra": {
                "aws_conn_id": "aws_moto", "region_name": REGION, "artifact_root": f"s3://{BUCKET}/trainium",
                "batch_job_queues": {"trn1.32xlarge": QUEUE}, "image": IMAGE, "ecr_repository": REPOSITORY,
                "log_group": LOG_GROUP, "job_role_arn": JOB_ROLE_ARN, "ecs_execution_role_arn": EXECUTION_ROLE_ARN,
                "ecs_cluster": ECS_CLUSTER, "subnets": [subnet], "security_groups": [group]}},
        }  # fmt: skip
        for conn_id, conn in connections.items():
            self.api.request("DELETE", f"connections/{conn_id}")
            resp = self.api.request("POST", "connections", json={"connection_id": conn_id, **conn,
                                                                 "extra": json.dumps(conn["extra"])})  # fmt: skip
            resp.raise_for_status()

    def _ecs_cluster(self, subnet: str, group: str) -> None:
        """The cluster and its container instances, registered as ``tests/integration/ecs`` registers them."""
        from tests.integration.ecs.conftest import EcsWorld

        ec2 = self.clients["ec2"]
        vpc = ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]["VpcId"]
        ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})  # as awsvpc tasks need
        self.clients["ecs"].create_cluster(clusterName=ECS_CLUSTER)
        world = EcsWorld("", subnet, group, cluster=ECS_CLUSTER, clients=self.clients)
        for _ in range(self.ecs_count):
            world.add_instance("trn1.32xlarge")

    def teardown(self) -> None:
        for conn_id in ("aws_moto", "trainium_default"):
            with contextlib.suppress(Exception):
                self.api.request("DELETE", f"connections/{conn_id}")

    # -- the run ---------------------------------------------------------------------------------------------
    def run(self) -> Results:
        started = time.time()
        deadline = time.monotonic() + self.minutes * 60
        self.proxy.set_plan(FaultPlan(rate=self.fault_rate, seed=self.seed, slow_seconds=2.0))
        self.api.unpause(SMOKE)
        baseline = self._triggerer_rss()
        for index in range(self.count):
            # spread evenly (exactly ecs_count of them), so both kinds are deferred through every fault
            compute = (
                "ecs"
                if (index * self.ecs_count) // self.count != ((index + 1) * self.ecs_count) // self.count
                else "batch"
            )
            conf = {"compute": compute, "nodes": 1 if compute == "ecs" else 2, "instance_type": "trn1.32xlarge",
                    "image": self.image, "bandwidth_mb": 1}  # fmt: skip
            resp = self.api.trigger(SMOKE, conf)
            resp.raise_for_status()
            run_id = resp.json()["dag_run_id"]
            self.jobs[run_id] = Job(run_id, compute)
        # jobs end over the first 60% of the run, so every restart and the outage find deferred jobs
        self.pace = self.minutes * 60 * 0.6 / (BATCHES + 1)
        chaos = threading.Thread(target=self._chaos, args=(deadline,), name="soak-chaos", daemon=True)
        chaos.start()
        try:
            while time.monotonic() < deadline and any(j.state not in ("success", "failed") for j in self.jobs.values()):
                self._drive()
                time.sleep(2)
        finally:
            self._stop.set()
            chaos.join(timeout=120)
            self.proxy.set_plan(FaultPlan())
        ended = time.time()
        return self._results(started, ended, baseline)

    def _drive(self) -> None:
        """One step of the fake Batch scheduler: start submitted jobs, write lines, end jobs in turn; and
        read where the runs stand."""
        with contextlib.suppress(Exception):
            states = self._task_states()
            for job in self.jobs.values():
                if job.run_id in states:
                    job.state = states[job.run_id]["state"] or job.state
                    if job.state in ("success", "failed") and job.done_at is None:
                        job.done_at = _epoch(states[job.run_id].get("end_date"))
            deferred = sum(1 for s in states.values() if s["state"] == "deferred")
            self.memory.append((deferred, self._triggerer_rss()))
        for job in self.jobs.values():
            if job.ended_at is not None:
                continue
            if job.job_id is None:
                self._find(job, SMOKE)
                continue
            if job.state != "deferred" or time.monotonic() < job.next_write:
                continue  # lines only while the trigger follows the job, one batch per pace
            job.next_write = time.monotonic() + self.pace
            self._write(job, end=job.batches >= BATCHES)

    def _find(self, job: Job, dag_id: str) -> None:
        from airflow_provider_trainium.compute.naming import job_name
        from tests.integration.batch import moto_batch

        name = job_name(dag_id, "allreduce", job.run_id)
        if job.compute == "ecs":
            from airflow_provider_trainium.compute.ecs.definitions import log_stream_name

            tasks = [t for t in _ecs_tasks() if t.started_by == name]
            if tasks:
                job.job_id = tasks[0].task_arn
                job.streams = [log_stream_name(tasks[0].id)]
                self.clients["logs"].create_log_stream(logGroupName=self.log_group, logStreamName=job.streams[0])
            return
        found = [j for j in list(moto_batch._backend(REGION)._jobs.values()) if j.job_name == name
                 and "#" not in j.job_id]  # fmt: skip
        if found:
            job.job_id = found[0].job_id
            job.streams = moto_batch.start_nodes(REGION, job.job_id, 2, self.clients["logs"], self.log_group)

    def _write(self, job: Job, *, end: bool) -> None:
        from tests.integration.batch import moto_batch

        batch = job.batches
        now_ms = int(time.time() * 1000)
        for node, stream in enumerate(job.streams):
            lines = [f"soak {_short(job.job_id)} node {node} batch {batch} line {i}" for i in range(LINES_PER_BATCH)]
            moto_batch.write_log(self.clients["logs"], self.log_group, stream, lines, now_ms)
            job.written += lines
        job.batches += 1
        if end:  # the last lines come with the job's end, as the log driver flushes
            if job.compute == "ecs":  # the essential container exited 0 (moto's containers report exit code 0)
                self.clients["ecs"].stop_task(cluster=ECS_CLUSTER, task=job.job_id,
                                              reason="Essential container in task exited")  # fmt: skip
            else:
                moto_batch.finish(REGION, job.job_id, success=True)
            job.ended_at = time.time()

    def _task_states(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        offset = 0
        while True:
            page = self.api.get(f"dags/{SMOKE}/dagRuns/~/taskInstances", task_id="allreduce", limit=100,
                                offset=offset)  # fmt: skip
            for ti in page["task_instances"]:
                if ti["task_id"] == "allreduce":
                    found[ti["dag_run_id"]] = ti
            offset += len(page["task_instances"])
            if not page["task_instances"] or offset >= page["total_entries"]:
                return found

    def _triggerer_rss(self) -> float:
        """The triggerer's resident memory (MiB), its child processes included."""
        import psutil

        proc = self.deployment.procs.get("triggerer")
        if proc is None:
            return float("nan")
        try:
            root = psutil.Process(proc.pid)
            return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]) / 2**20
        except psutil.Error:
            return float("nan")

    def _chaos(self, deadline: float) -> None:
        """Triggerer restarts, scheduler restarts and the PostgreSQL outage, spread over the first 60% of the
        run while jobs are deferred."""
        plan: list[tuple[float, str]] = []
        span = (deadline - time.monotonic()) * 0.6
        steps = ["triggerer"] * self.triggerer_restarts + ["scheduler"] * self.scheduler_restarts
        if self.pg_outage > 0:
            steps.insert(min(2, len(steps)), "postgres")
        for index, step in enumerate(steps):
            plan.append((time.monotonic() + span * (index + 1) / (len(steps) + 1), step))
        for at, step in plan:
            while time.monotonic() < at:
                if self._stop.wait(1):
                    return
            at_s = time.monotonic() - (deadline - self.minutes * 60)
            try:
                if step == "postgres":
                    self.held.add("postgres")
                    try:
                        self.deployment.postgres.stop()
                        self._stop.wait(self.pg_outage)
                    finally:
                        self.held.discard("postgres")  # the supervisor starts it again, as after a crash
                    self.events.append(f"PostgreSQL down {self.pg_outage:.0f} s at {at_s:.0f} s")
                else:
                    self.deployment.restart(step, group=step != "scheduler")
                    self.events.append(f"{step} killed and restarted at {at_s:.0f} s")
            except Exception as err:  # noqa: BLE001 - reported, the soak goes on
                self.events.append(f"{step} at {at_s:.0f} s failed: {err}")

    # -- the counts ------------------------------------------------------------------------------------------
    def _results(self, started: float, ended: float, baseline: float) -> Results:
        from airflow_provider_trainium.compute.naming import job_name
        from tests.integration.batch import moto_batch

        jobs_by_name = Counter(j.job_name for j in list(moto_batch._backend(REGION)._jobs.values())
                               if "#" not in j.job_id)  # fmt: skip
        jobs_by_name.update(t.started_by for t in _ecs_tasks())
        names = {job_name(SMOKE, "allreduce", j.run_id) for j in self.jobs.values()}
        lost = [j.run_id for j in self.jobs.values() if j.state == "failed" or (j.state == "success" and not j.job_id)]
        stuck = [j.run_id for j in self.jobs.values() if j.state not in ("success", "failed")]
        repeated = missing = written = 0
        for job in self.jobs.values():
            if not job.written:
                continue
            written += len(job.written)
            tries = self._logged(job)
            counts = Counter({line: len(found) for line, found in tries.items()})
            missing += sum(1 for line in job.written if counts[line] == 0)
            repeated += sum(counts[line] - 1 for line in job.written if counts[line] > 1)
            twice = [line for line in job.written if counts[line] > 1]
            if twice:  # where they are tells a triggerer's replay (one try) from a second try (two tries)
                self.events.append(f"repeated in run {job.run_id}: {twice[0]!r} and {len(twice) - 1} more, "
                                   f"in tries {tries[twice[0]]}")  # fmt: skip
        peak = max((d for d, _ in self.memory), default=0)
        at_peak = [rss for d, rss in self.memory if d == peak and rss == rss]
        per_job = (max(at_peak) - baseline) / peak if peak and at_peak and baseline == baseline else None
        return Results(
            jobs=self.count,
            ecs_jobs=self.ecs_count,
            submit_calls=self.proxy.stats.forwarded["SubmitJob"],
            run_task_calls=self.proxy.stats.forwarded["RunTask"],
            submitted_jobs=sum(n for name, n in jobs_by_name.items() if name in names),
            duplicates=sum(n - 1 for name, n in jobs_by_name.items() if name in names and n > 1),
            lost=lost,
            stuck=stuck,
            lines_written=written,
            repeated=repeated,
            missing=missing,
            describe_per_interval=self.proxy.stats.per_interval("DescribeJobs", POLL_INTERVAL, started, ended),
            describe_tasks_per_interval=self.proxy.stats.per_interval("DescribeTasks", POLL_INTERVAL, started, ended),
            memory_per_job_mib=per_job,
            peak_deferred=peak,
            detect_seconds=[j.done_at - j.ended_at for j in self.jobs.values() if j.done_at and j.ended_at],
            faults=Counter(self.proxy.stats.faults),
            calls=Counter(self.proxy.stats.forwarded),
            events=self.events,
            wall_seconds=ended - started,
        )

    def _logged(self, job: Job) -> dict[str, list[int]]:
        """The try of each time each ``soak ...`` line is in the task's log (every try), with or without the
        ``[node N]`` prefix multi-node logs get."""
        found_in: dict[str, list[int]] = {}
        try:
            ti = self.api.task_instance(SMOKE, job.run_id, "allreduce")
            for try_number in range(1, int(ti.get("try_number") or 1) + 1):
                for entry in self.api.log_entries(SMOKE, job.run_id, "allreduce", try_number):
                    found = SOAK_LINE.search(str(entry.get("event", "")))
                    if found:
                        found_in.setdefault(found.group(0), []).append(try_number)
        except Exception:  # noqa: BLE001 - an unreadable log counts as missing lines
            pass
        return found_in


def _short(job_id: str) -> str:
    """8 characters that tell jobs apart: a Batch job id's start, an ECS task ARN's task id."""
    return job_id.rsplit("/", 1)[-1][:8]


def _ecs_tasks() -> list[Any]:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ecs.models import ecs_backends

    return [t for tasks in list(ecs_backends[DEFAULT_ACCOUNT_ID][REGION].tasks.values()) for t in list(tasks.values())]


def _epoch(value: str | None) -> float | None:
    if not value:
        return None
    from datetime import datetime

    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("SOAK_JOBS", 200)))
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", 40)))
    parser.add_argument("--fault-rate", type=float, default=0.05)
    parser.add_argument("--triggerer-restarts", type=int, default=2)
    parser.add_argument("--scheduler-restarts", type=int, default=1)
    parser.add_argument("--pg-outage", type=float, default=20.0, help="seconds PostgreSQL is down (0: none)")
    parser.add_argument("--ecs-share", type=float, default=0.5, help="share of the jobs run on ECS (the rest on Batch)")
    args = parser.parse_args(argv)

    import requests
    from moto.server import ThreadedMotoServer

    from devserver import Deployment
    from devserver.deployment import USERNAME, stop_recorded
    from devserver.supervisor import Supervisor
    from tests.conftest import free_port
    from tests.e2e.conftest import Api

    os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    port = free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    moto_url = f"http://127.0.0.1:{port}"
    requests.post(f"{moto_url}/moto-api/config", json={"batch": {"use_docker": False}}, timeout=10).raise_for_status()
    if (HOME / "deployment" / "state.json").exists():
        stop_recorded(HOME)
    shutil.rmtree(HOME, ignore_errors=True)
    HOME.mkdir(parents=True)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_CONN_", "AIRFLOW_VAR_"))}
    deployment = Deployment(HOME, ui_port=free_port(), base_env=base_env, extra_env=deployment_env(args.jobs))
    print(f"starting the deployment in {HOME} ...", flush=True)
    deployment.start()
    # supervised as make airflow supervises it: what dies or hangs (the outage may take a component down) is
    # started again, and the counts say whether anything was lost meanwhile
    supervisor = Supervisor(deployment)
    stop_supervising = threading.Event()
    threading.Thread(target=supervisor.run, args=(stop_supervising,), name="supervisor", daemon=True).start()
    try:
        with FaultProxy(moto_url) as proxy:
            api = Api(deployment.url, USERNAME, deployment.passwords[USERNAME])
            soak = Soak(deployment, api, moto_url, proxy, jobs=args.jobs, fault_rate=args.fault_rate,
                        minutes=args.minutes, triggerer_restarts=args.triggerer_restarts,
                        scheduler_restarts=args.scheduler_restarts, pg_outage=args.pg_outage,
                        ecs_share=args.ecs_share, held=supervisor.held)  # fmt: skip
            soak.setup()
            results = soak.run()
            soak.teardown()
    finally:
        stop_supervising.set()
        deployment.stop()
        moto.stop()
    print(results.table())
    return 0 if results.at_goal() else 1


def deployment_env(jobs: int) -> dict[str, str]:
    """Every run active at once (deferred tasks hold no worker slot), no scheduled runs."""
    return {
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__CORE__MAX_ACTIVE_RUNS_PER_DAG": str(max(16, jobs)),
        "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": str(max(16, jobs)),
        "AIRFLOW__TRIGGERER__CAPACITY": str(max(1000, jobs)),
    }


if __name__ == "__main__":
    sys.exit(main())
