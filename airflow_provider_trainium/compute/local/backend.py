"""Local compute: a job's N nodes as N container launchers on this machine, talking over loopback.

Each node runs the job's container plan (``neuron.plan``): the argv a training container runs, with the
container's environment, so every local job exercises the container's entry point. This module sequences the
backend's steps, each done by one module of the folder: ``environment`` (a node's allowlisted environment and the
loopback rendezvous), ``processes`` (each node under ``supervisor.py``, judged by its exit record, stopped as a
tree), ``state`` (the record a later worker finds, so a retry attaches to the job or takes its result and never
trains it twice) and ``logs`` (the nodes' output into the task log, a failure with the failing rank's lines).

A job's ``secrets`` are read through the ``trainium`` connection's AWS connection (``job_secrets``), masked in the
task log, and put in the nodes' environment only: the spec, the state file and the log lines hold the references
alone. A job that may reach S3 gets a scoped session (``job_credentials``), never the connection's own keys.
"""

from __future__ import annotations

import os
import queue
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from airflow_provider_trainium.compute.base import (
    ComputeBackend,
    JobHandle,
    JobState,
    JobStatus,
    LogSink,
    WatchRequest,
)
from airflow_provider_trainium.compute.local import environment, logs
from airflow_provider_trainium.compute.local.processes import LOST, LocalJob, Node, kill_live_groups, start_node
from airflow_provider_trainium.compute.local.state import JobRecords, local_state_dir
from airflow_provider_trainium.neuron.plan import ContainerPlan
from airflow_provider_trainium.neuron.spec import JobSpec
from trainium_trainer import boundary

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig

__all__ = ["EXIT_BAD_INPUT", "LocalBackend", "local_compiler_version", "local_state_dir", "reads_s3"]

#: Exit code the trainer uses for bad input: retrying cannot help.
EXIT_BAD_INPUT = boundary.EXIT_BAD_INPUT


def keep_work_folders_setting() -> bool:
    """``[trainium] local_keep_work_folders``: keep a succeeded local job's working folders (default: removed)."""
    from airflow.providers.common.compat.sdk import conf

    keep: bool = conf.getboolean("trainium", "local_keep_work_folders", fallback=False)
    return keep


def local_compiler_version() -> str:
    """torch-xla's version, read from package metadata (no torch import in the worker)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"torch-xla=={version('torch-xla')}"
    except PackageNotFoundError:
        return "eager"


def reads_s3(config: TrainiumConfig) -> bool:
    """Whether a job may reach S3: its artifact root, or an input prefix it may read (a base model), is there."""
    return any(uri.startswith("s3://") for uri in (config.artifact_root, *config.allowed_input_prefixes))


class LocalBackend(ComputeBackend):
    """Runs jobs as process groups on the Airflow worker's machine. Needs the ``trainer`` extra installed."""

    name = "local"
    defers = False
    runs_image = False  # runs this machine's trainer package: no image to trust

    def __init__(
        self,
        state_dir: str | Path,
        python: str | None = None,
        max_processes_per_node: int = 2,
        aws_conn_id: str | None = None,
        all_ranks: bool | None = None,
        secrets_conn_id: str | None = None,
        region_name: str | None = None,
        artifact_root: str | None = None,
        job_role_arn: str | None = None,
        keep_work_folders: bool = False,
        inherited_env: tuple[str, ...] = (),
    ):
        self.state_dir = Path(state_dir)
        #: keep a succeeded job's working folders (``environment.work_folder``); by default they go once the job
        #: has succeeded: their contents are uploaded, and a file:// artifact root would hold everything twice
        self.keep_work_folders = keep_work_folders
        self.records = JobRecords(self.state_dir)
        if all_ranks is None:
            all_ranks = os.environ.get("TRAINIUM_TASK_LOG_ALL_RANKS", "").strip() == "1"
        self.all_ranks = all_ranks
        self.python = python or sys.executable
        self.max_processes_per_node = max_processes_per_node
        #: the AWS connection a job's scoped S3 session is made from when it may reach S3 (``reads_s3``)
        self.aws_conn_id = aws_conn_id
        #: the artifact root whose Airflow-only prefixes that session may not write; the role it assumes
        self.artifact_root = artifact_root
        self.job_role_arn = job_role_arn
        #: the AWS connection (and region, for ``ssm:<name>``) a job's secret references are read through
        self.secrets_conn_id = secrets_conn_id
        self.region_name = region_name
        #: the worker's variables a job keeps beyond the built-in allowlist (``local_inherited_env``)
        self.inherited_env = inherited_env
        self._jobs: dict[str, LocalJob] = {}
        #: secret values read by ``check``, kept in memory only for the ``submit`` of the same references
        self._secret_values: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}

    @classmethod
    def from_config(cls, config: TrainiumConfig, options: dict[str, Any]) -> LocalBackend:
        return cls(
            local_state_dir(),
            max_processes_per_node=int(options.get("local_max_processes_per_node", 2)),
            aws_conn_id=config.aws_conn_id if reads_s3(config) else None,
            secrets_conn_id=config.aws_conn_id,
            region_name=config.region_name,
            artifact_root=config.artifact_root,
            job_role_arn=config.job_role_arn,
            keep_work_folders=keep_work_folders_setting(),
            inherited_env=config.local_inherited_env,
        )

    def check(self, spec: JobSpec) -> None:
        """Read the job's secrets now: one that cannot be read fails the task before anything starts, and every
        try registers the values with the log masker (a try that attaches to a running job too). A worker
        without the stack's trainer extra is refused here too, naming the extra."""
        from airflow_provider_trainium.compute.local.extras import missing_trainer_extra

        problem = missing_trainer_extra(spec.entry_point, spec.stack)
        if problem:
            raise ValueError(problem)
        if spec.capacity_reservation:
            import logging

            # a DAG that names a reservation still runs locally (a laptop has no reservation to use)
            logging.getLogger(__name__).info(
                "capacity reservation %s ignored: local compute runs on this machine", spec.capacity_reservation
            )
        self.secret_values(spec, fresh=True)

    def secret_values(self, spec: JobSpec, *, fresh: bool = False) -> dict[str, str]:
        """name -> value of the job's secrets (``job_secrets``); read again when ``fresh``."""
        if not spec.secrets:
            return {}
        key = tuple(sorted(spec.secrets.items()))
        if fresh or key not in self._secret_values:
            from airflow_provider_trainium.compute.local.job_secrets import resolve_secrets

            self._secret_values[key] = resolve_secrets(spec.secrets, self.secrets_conn_id, self.region_name)
        return self._secret_values[key]

    # -- capabilities ---------------------------------------------------------------------------------
    def compile_wrapper(self) -> tuple[str, ...]:
        return ()  # torch-xla on CPU fills its own persistent cache during the trial

    def compiler_version(self, spec: JobSpec) -> str:
        return local_compiler_version()

    def runs_as(self, spec: JobSpec) -> JobSpec:
        return self.local_spec(spec)

    def job_environment(self, compile_cache_uri: str | None) -> dict[str, str]:
        """Nothing: a job's S3 credentials are made at submit (``job_credentials``), never kept in its spec,
        whose hash must stay the same across tries and which is stored in XComs and state files."""
        return {}

    def job_credentials(self, spec: JobSpec, job_name: str) -> dict[str, str]:
        """A short-lived S3 session that cannot write the registry (``job_credentials``), when the job may reach
        S3; none otherwise. Never the AWS connection's own keys."""
        if self.aws_conn_id is None:
            return {}
        from airflow_provider_trainium.compute.local.job_credentials import scoped_job_environment

        return scoped_job_environment(self.aws_conn_id, self.artifact_root or "", job_name=job_name,
                                      duration_s=spec.timeout_seconds, role_arn=self.job_role_arn)  # fmt: skip

    def billed_intervals(self, handle: JobHandle) -> None:
        return None  # this machine is free: the cost record is the estimate for the layout it stands in for

    # -- the job this worker knows, or the one another worker recorded -------------------------------
    def _job(self, handle: JobHandle) -> LocalJob | None:
        """The job in this worker's memory, or rebuilt from the state file another worker wrote."""
        job = self._jobs.get(handle.job_id)
        if job is None:
            job = LocalJob.from_state(handle, self.records.read(handle.job_name))
            if job is not None:
                self._jobs[handle.job_id] = job
        return job

    def local_spec(self, spec: JobSpec) -> JobSpec:
        """This machine is not a Trn1: cap processes per node (each stands in for a NeuronCore)."""
        if spec.distributed and spec.nproc_per_node > self.max_processes_per_node:
            return spec.with_changes(processes_per_node=self.max_processes_per_node)
        return spec

    def node_environment(
        self, plan: ContainerPlan, job_name: str, index: int, port: int, rank_logs: Path
    ) -> dict[str, str]:
        """The container's environment for node ``index``, plus the local rendezvous and this machine's essentials."""
        return environment.node_environment(os.environ, plan, job_name, index, port, rank_logs, self.inherited_env)

    def node_argv(self, plan: ContainerPlan) -> list[str]:
        """The container argv, with this machine's interpreter for the image's ``python``."""
        argv = list(plan.argv)
        return [self.python, *argv[1:]] if argv[0] == "python" else argv

    # -- ComputeBackend ---------------------------------------------------------------------------
    def find_existing(self, job_name: str, tags: dict[str, str]) -> JobHandle | None:
        """A job that succeeded, or one still running (or ended unobserved) after its worker died."""
        state = self.records.read(job_name)
        if not state.get("job_id"):
            return None
        details = {"spec_hash": state.get("spec_hash"), "started_at": state.get("started_at")}
        handle = JobHandle(self.name, str(state["job_id"]), job_name, details)
        if state.get("state") == JobState.SUCCEEDED.value:
            return handle
        if state.get("state") == JobState.RUNNING.value:
            job = self._job(handle)
            if job is not None and LOST not in [n.exit_code() for n in job.nodes]:
                return handle
        return None

    def submit(self, spec: JobSpec, job_name: str, tags: dict[str, str]) -> JobHandle:
        secrets = self.secret_values(spec)  # before anything starts: a reference that cannot be read stops here
        credentials = self.job_credentials(spec, job_name)
        previous = self.records.read(job_name)
        if previous.get("state") == JobState.RUNNING.value:  # a previous try's processes (a failed node's peers)
            kill_live_groups(cast("list[int]", previous.get("pids", [])))  # the record submit wrote: process ids
        requested_hash = spec.content_hash()  # what the operator asked for, before this machine's caps
        spec = self.local_spec(spec)
        started_at = time.time()  # the local run's cost estimate counts from here (the supervisor survives us)
        details = {"spec_hash": requested_hash, "started_at": started_at}
        handle = JobHandle(self.name, f"{job_name}-{uuid.uuid4().hex[:8]}", job_name, details)
        port = environment.free_port()
        job_dir = self.state_dir / "jobs" / handle.job_id
        job_dir.mkdir(parents=True, exist_ok=True)
        plan = self.plan(spec)  # runs_image is False: this machine's CPU, no Trainium peak for MFU
        argv = self.node_argv(plan)
        nodes: list[Node] = []
        for index in range(spec.nodes):
            rank_logs = job_dir / f"node{index}"
            env = {**self.node_environment(plan, job_name, index, port, rank_logs), **credentials, **secrets}
            log_path, record_path = job_dir / f"node{index}.log", job_dir / f"node{index}.exit"
            process = start_node(self.python, argv, env, log_path, record_path)
            nodes.append(Node(index, process.pid, spec.nproc_per_node, log_path, record_path, rank_logs, process))
        job = LocalJob(handle, nodes)
        self._jobs[handle.job_id] = job
        self.records.write(
            job_name,
            {
                "state": JobState.RUNNING.value,
                "job_id": handle.job_id,
                "spec_hash": requested_hash,
                "started_at": started_at,
                "processes_per_node": spec.nproc_per_node,
                "nodes": [n.to_state() for n in nodes],
                "pids": [n.pid for n in nodes],
            },
        )
        return handle

    def status(self, handle: JobHandle) -> JobStatus:
        state = self.records.read(handle.job_name)
        if state.get("job_id") == handle.job_id and state.get("state") in (JobState.SUCCEEDED, JobState.CANCELLED):
            return JobStatus(JobState(str(state["state"])), reason=str(state.get("reason", "")))
        job = self._job(handle)
        if job is None:
            return JobStatus(JobState.FAILED, reason=f"local job {handle.job_id} is unknown to {self.state_dir}")
        codes = [n.exit_code() for n in job.nodes]
        job.note_failures(codes)
        if job.failed_first:
            return logs.failure(job, "a node exited with an error")
        if all(c == 0 for c in codes):
            self.records.update(handle.job_name, handle.job_id, state=JobState.SUCCEEDED.value)
            if not self.keep_work_folders:
                for node in job.nodes:  # uploaded already: what a retry or the registry needs is at the URIs
                    shutil.rmtree(environment.work_folder(node.rank_log_dir), ignore_errors=True)
            return JobStatus(JobState.SUCCEEDED)
        return JobStatus(JobState.RUNNING)

    def cancel(self, handle: JobHandle, reason: str) -> None:
        job = self._job(handle)
        if job is not None:
            job.stop()
        self.records.write(
            handle.job_name, {"state": JobState.CANCELLED.value, "job_id": handle.job_id, "reason": reason}
        )

    def wait_until(self, request: WatchRequest, log: LogSink) -> JobStatus:
        """Reads the processes' pipes (no log cursor); a local job costs nothing, so no budget stops it."""
        handle = request.handle
        timeout_seconds = request.deadline - time.time()
        job = self._job(handle)
        if job is None:
            return self.status(handle)
        logs.start_readers(job, self.all_ranks)
        deadline = time.monotonic() + timeout_seconds
        open_streams = len(job.nodes)
        status = JobStatus(JobState.RUNNING)
        checked = 0.0
        while True:
            try:
                node_index, line = job.lines.get(timeout=0.5)
            except queue.Empty:
                pass
            else:
                if line is None:
                    open_streams -= 1
                else:
                    log(line)
                    if time.monotonic() - checked < 0.5:
                        continue  # a burst of lines: look at the nodes at most twice a second
            checked = time.monotonic()
            status = self.status(handle)
            if status.state in (JobState.FAILED, JobState.CANCELLED):
                break
            if status.state is JobState.SUCCEEDED and open_streams == 0:
                break
            if time.monotonic() > deadline:
                self.cancel(handle, "timeout")
                logs.drain(job, log)
                return JobStatus(JobState.FAILED, reason=f"timed out after {timeout_seconds:.0f} s")
        if status.state is JobState.CANCELLED:  # cancelled while we waited (task killed, a log callback)
            logs.drain(job, log)
            return status
        if status.state is JobState.FAILED:
            job.stop()
            logs.drain(job, log)
            status = logs.failure(job, status.reason)
        self.records.update(handle.job_name, handle.job_id, state=status.state.value)
        return status
