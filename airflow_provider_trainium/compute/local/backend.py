"""Local compute: a job's N nodes as N container launchers on this machine, talking over loopback.

Each node renders the job's container plan (``neuron.plan``): exactly the argv a training container runs (the
launcher and the arguments ECS and Batch send) with the environment the container gets, plus the local
rendezvous in the neutral contract every backend maps onto (``TRAINIUM_NUM_NODES``, ``TRAINIUM_NODE_RANK``,
the loopback address as ``TRAINIUM_MAIN_ADDR`` and a free port). So every local job exercises the container's
entry point. The main rank's output (rank 0) and each
node's own lines stream into the task log as ``[node i rank 0]`` / ``[node i]``; every rank's output stays in
the node's log file and torchrun's per-rank files, and a failing rank's last lines are reported with the
failure. ``all_ranks=True`` (or ``TRAINIUM_TASK_LOG_ALL_RANKS=1``) forwards every rank. The whole process
tree is killed on timeout, on task kill, or as soon as one node fails.

A job outlives the worker that started it: each node runs under ``supervisor.py``, which leads the
node's process group, writes its output to a file and records its exit code. A job is alive while a
node's process group is and is judged by those records, so the next try of a killed worker finds the job,
attaches to it or takes its result, and never trains it twice.

The trainer gets an allowlisted environment: what the container would get, plus the few variables of this
machine a Python process needs (``INHERITED_NAMES``, ``INHERITED_PREFIXES``); the worker's other variables
(AWS keys, Airflow secrets) stay behind. A job's ``secrets`` are read here through the ``trainium``
connection's AWS connection (``hooks.job_secrets``), masked in the task log, and put in the nodes' environment
only: the spec, the state file and the log lines this backend writes hold the references alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_trainium.compute.base import (
    ComputeBackend,
    JobHandle,
    JobState,
    JobStatus,
    LogSink,
)
from airflow_provider_trainium.neuron.launch import rendezvous_environment
from airflow_provider_trainium.neuron.plan import ContainerPlan
from airflow_provider_trainium.neuron.spec import JobSpec
from trainium_trainer import boundary

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig

#: Exit code the trainer uses for bad input: retrying cannot help.
EXIT_BAD_INPUT = boundary.EXIT_BAD_INPUT
TAIL_LINES = 40
SUPERVISOR = Path(__file__).with_name("supervisor.py")
#: Variables of the worker's environment a local trainer keeps; everything else is left behind.
INHERITED_NAMES = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "TZ", "LANG", "LANGUAGE",
        "PYTHONPATH", "PYTHONHASHSEED", "VIRTUAL_ENV", "LD_LIBRARY_PATH",
        "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM",
    }
)  # fmt: skip
INHERITED_PREFIXES = ("LC_", "PJRT_", "XLA_", "TPU_", "NEURON_", boundary.ENV_PREFIX, "OMP_", "MKL_")
#: Set by this backend on every node; never taken from the worker's environment.
LOCAL_RENDEZVOUS = (
    *boundary.RENDEZVOUS_ENV, boundary.ENV_LEGACY_MAIN_ADDR, boundary.ENV_LEGACY_MAIN_PORT, boundary.ENV_RANK_LOG_DIR,
)  # fmt: skip
LOOPBACK = "127.0.0.1"
_POLL_SECONDS = 0.05
_LOST = -1  # a node whose process group is gone without an exit record (killed with its supervisor)
_RANK_PREFIX = re.compile(r"^\[default(\d+)\]:(.*)$")
_ROOT_CAUSE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)\s*\n\s*exitcode\s*:\s*(-?\d+)")


def local_state_dir() -> Path:
    """Where local compute keeps its job records: under ``$AIRFLOW_HOME`` so every worker of this host sees them."""
    home = os.environ.get("AIRFLOW_HOME") or str(Path.home() / "airflow")
    return Path(home) / "trainium-local"


def inherited_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The allowlisted part of this machine's environment a local trainer needs to start at all."""
    return {
        k: v
        for k, v in environ.items()
        if (k in INHERITED_NAMES or k.startswith(INHERITED_PREFIXES)) and k not in LOCAL_RENDEZVOUS
    }


def local_compiler_version() -> str:
    """torch-xla's version, read from package metadata (no torch import in the worker)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"torch-xla=={version('torch-xla')}"
    except PackageNotFoundError:
        return "eager"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is still running (zombies do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    with contextlib.suppress(OSError, IndexError):  # the common case: the leader (the supervisor) still runs
        if (proc / str(pgid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def kill_process_group(pid: int, grace_seconds: float = 10.0) -> None:
    """SIGTERM the process group led by ``pid``, then SIGKILL what is left after the grace period."""
    _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline and group_alive(pid):
        time.sleep(0.1)
    _signal_group(pid, signal.SIGKILL)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


@dataclass
class _Node:
    index: int
    pid: int  # leader of the node's process group: the supervisor
    processes_per_node: int
    log_path: Path
    record_path: Path
    rank_log_dir: Path
    process: subprocess.Popen[bytes] | None = None  # only in the worker that started it
    reader: threading.Thread | None = None

    def to_state(self) -> dict[str, object]:
        return {"pid": self.pid, "log": str(self.log_path), "record": str(self.record_path),
                "rank_logs": str(self.rank_log_dir)}  # fmt: skip

    def exit_code(self) -> int | None:
        """None while the node runs; its recorded exit code after; ``_LOST`` if it vanished without one."""
        if self.process is not None:
            self.process.poll()  # reap our own child so its group can end
        for _ in range(2):  # the record is written before the group ends: read, check the group, read again
            with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
                return int(json.loads(self.record_path.read_text())["exit_code"])
            if group_alive(self.pid):
                return None
        return _LOST


@dataclass
class _LocalJob:
    handle: JobHandle
    nodes: list[_Node]
    lines: queue.Queue[tuple[int, str | None]] = field(default_factory=queue.Queue)
    failed_first: list[_Node] = field(default_factory=list)

    def stop(self, grace_seconds: float = 10.0) -> None:
        """TERM every node's process group, wait for them, then KILL whatever ignored TERM."""
        for node in self.nodes:
            _signal_group(node.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        for node in self.nodes:
            while time.monotonic() < deadline and node.exit_code() is None:
                time.sleep(0.1)
            _signal_group(node.pid, signal.SIGKILL)
            if node.process is not None:
                node.process.wait()


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
    ):
        self.state_dir = Path(state_dir)
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
        self._jobs: dict[str, _LocalJob] = {}
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
        """name -> value of the job's secrets (``hooks.job_secrets``); read again when ``fresh``."""
        if not spec.secrets:
            return {}
        key = tuple(sorted(spec.secrets.items()))
        if fresh or key not in self._secret_values:
            from airflow_provider_trainium.hooks.job_secrets import resolve_secrets

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
        """A short-lived S3 session that cannot write the registry (``hooks.aws_env``), when the job may reach
        S3; none otherwise. Never the AWS connection's own keys."""
        if self.aws_conn_id is None:
            return {}
        from airflow_provider_trainium.hooks.aws_env import scoped_job_environment

        return scoped_job_environment(self.aws_conn_id, self.artifact_root or "", job_name=job_name,
                                      duration_s=spec.timeout_seconds, role_arn=self.job_role_arn)  # fmt: skip

    def billed_intervals(self, handle: JobHandle) -> None:
        return None  # this machine is free: the cost record is the estimate for the layout it stands in for

    # -- bookkeeping that survives a worker restart -------------------------------------------------
    def _state_file(self, job_name: str) -> Path:
        return self.state_dir / f"{job_name}.json"

    def _read_state(self, job_name: str) -> dict[str, object]:
        path = self._state_file(job_name)
        return json.loads(path.read_text()) if path.exists() else {}

    def _write_state(self, job_name: str, state: dict[str, object]) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self._state_file(job_name).with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(self._state_file(job_name))

    def _update_state(self, job_name: str, job_id: str, **changes: object) -> None:
        state = self._read_state(job_name)
        if state.get("job_id") == job_id:
            self._write_state(job_name, {**state, **changes})

    def _job(self, handle: JobHandle) -> _LocalJob | None:
        """The job in this worker's memory, or rebuilt from the state file another worker wrote."""
        job = self._jobs.get(handle.job_id)
        if job is not None:
            return job
        state = self._read_state(handle.job_name)
        if state.get("job_id") != handle.job_id or not state.get("nodes"):
            return None
        per_node = int(state.get("processes_per_node") or 1)  # type: ignore[call-overload]
        nodes = [
            _Node(i, int(n["pid"]), per_node, Path(n["log"]), Path(n["record"]), Path(n["rank_logs"]))
            for i, n in enumerate(state["nodes"])  # type: ignore[arg-type]
        ]
        job = _LocalJob(handle, nodes)
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
        return {
            **inherited_environment(os.environ),
            **plan.environment,
            boundary.ENV_JOB_NAME: job_name,
            boundary.ENV_JOB_HASH: plan.spec.content_hash(),
            **rendezvous_environment(plan.spec.nodes, index, LOOPBACK, port),
            boundary.ENV_RANK_LOG_DIR: str(rank_logs),
            # a user's job's working, output, checkpoint and code folders, as /tmp/trainium-job in a container
            boundary.ENV_JOB_DIR: str(rank_logs.with_name(f"{rank_logs.name}-job")),
        }

    def node_argv(self, plan: ContainerPlan) -> list[str]:
        """The container argv, with this machine's interpreter for the image's ``python``."""
        argv = list(plan.argv)
        return [self.python, *argv[1:]] if argv[0] == "python" else argv

    # -- ComputeBackend ---------------------------------------------------------------------------
    def find_existing(self, job_name: str, tags: dict[str, str]) -> JobHandle | None:
        """A job that succeeded, or one still running (or ended unobserved) after its worker died."""
        state = self._read_state(job_name)
        if not state.get("job_id"):
            return None
        details = {"spec_hash": state.get("spec_hash"), "started_at": state.get("started_at")}
        handle = JobHandle(self.name, str(state["job_id"]), job_name, details)
        if state.get("state") == JobState.SUCCEEDED.value:
            return handle
        if state.get("state") == JobState.RUNNING.value:
            job = self._job(handle)
            if job is not None and _LOST not in [n.exit_code() for n in job.nodes]:
                return handle
        return None

    def submit(self, spec: JobSpec, job_name: str, tags: dict[str, str]) -> JobHandle:
        secrets = self.secret_values(spec)  # before anything starts: a reference that cannot be read stops here
        credentials = self.job_credentials(spec, job_name)
        self._kill_orphans(job_name)
        requested_hash = spec.content_hash()  # what the operator asked for, before this machine's caps
        spec = self.local_spec(spec)
        started_at = time.time()  # the local run's cost estimate counts from here (the supervisor survives us)
        details = {"spec_hash": requested_hash, "started_at": started_at}
        handle = JobHandle(self.name, f"{job_name}-{uuid.uuid4().hex[:8]}", job_name, details)
        port = free_port()
        job_dir = self.state_dir / "jobs" / handle.job_id
        job_dir.mkdir(parents=True, exist_ok=True)
        plan = self.plan(spec)  # runs_image is False: this machine's CPU, no Trainium peak for MFU
        argv = self.node_argv(plan)
        nodes: list[_Node] = []
        for index in range(spec.nodes):
            rank_logs = job_dir / f"node{index}"
            env = {**self.node_environment(plan, job_name, index, port, rank_logs), **credentials, **secrets}
            log_path, record_path = job_dir / f"node{index}.log", job_dir / f"node{index}.exit"
            with log_path.open("wb") as out:
                process = subprocess.Popen(
                    [self.python, str(SUPERVISOR), str(record_path), "--", *argv],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            nodes.append(_Node(index, process.pid, spec.nproc_per_node, log_path, record_path, rank_logs, process))
        job = _LocalJob(handle, nodes)
        self._jobs[handle.job_id] = job
        self._write_state(
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
        state = self._read_state(handle.job_name)
        if state.get("job_id") == handle.job_id and state.get("state") in (JobState.SUCCEEDED, JobState.CANCELLED):
            return JobStatus(JobState(str(state["state"])), reason=str(state.get("reason", "")))
        job = self._job(handle)
        if job is None:
            return JobStatus(JobState.FAILED, reason=f"local job {handle.job_id} is unknown to {self.state_dir}")
        codes = [n.exit_code() for n in job.nodes]
        ended = sorted(
            (n for n, c in zip(job.nodes, codes, strict=True) if c not in (None, 0) and n not in job.failed_first),
            key=lambda n: n.record_path.stat().st_mtime if n.record_path.exists() else float("inf"),
        )
        job.failed_first.extend(ended)
        if job.failed_first:
            return self._failure(job, "a node exited with an error")
        if all(c == 0 for c in codes):
            self._update_state(handle.job_name, handle.job_id, state=JobState.SUCCEEDED.value)
            return JobStatus(JobState.SUCCEEDED)
        return JobStatus(JobState.RUNNING)

    def cancel(self, handle: JobHandle, reason: str) -> None:
        job = self._job(handle)
        if job is not None:
            job.stop()
        self._write_state(
            handle.job_name, {"state": JobState.CANCELLED.value, "job_id": handle.job_id, "reason": reason}
        )

    def wait(
        self, handle: JobHandle, log: LogSink, timeout_seconds: float, budget: dict[str, float] | None = None
    ) -> JobStatus:  # a local job costs nothing: its budget never stops it
        job = self._job(handle)
        if job is None:
            return self.status(handle)
        self._start_readers(job)
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
                self._drain(job, log)
                return JobStatus(JobState.FAILED, reason=f"timed out after {timeout_seconds:.0f} s")
        if status.state is JobState.CANCELLED:  # cancelled while we waited (task killed, a log callback)
            self._drain(job, log)
            return status
        if status.state is JobState.FAILED:
            job.stop()
            self._drain(job, log)
            status = self._failure(job, status.reason)
        self._update_state(handle.job_name, handle.job_id, state=status.state.value)
        return status

    # -- internals ----------------------------------------------------------------------------------
    def _start_readers(self, job: _LocalJob) -> None:
        for node in job.nodes:
            if node.reader is None:
                node.reader = threading.Thread(target=self._pump, args=(node, job.lines), daemon=True)
                node.reader.start()

    @staticmethod
    def _label(node: _Node, text: str) -> str:
        """``[node i rank r] line`` for a rank's line (torchrun's ``[defaultN]:`` prefix), ``[node i] line`` else."""
        match = _RANK_PREFIX.match(text)
        if match:
            rank = node.index * node.processes_per_node + int(match.group(1))
            return f"[node {node.index} rank {rank}] {match.group(2)}"
        return f"[node {node.index}] {text}"

    def _forwarded(self, node: _Node, text: str) -> str | None:
        """The labelled line for the task log; None for a rank other than 0 unless every rank goes there."""
        match = _RANK_PREFIX.match(text)
        if match and not self.all_ranks and node.index * node.processes_per_node + int(match.group(1)) != 0:
            return None
        return self._label(node, text)

    def _pump(self, node: _Node, lines: queue.Queue[tuple[int, str | None]]) -> None:
        """Follow the node's output file until the node has ended and every line is read."""
        pending = b""
        with node.log_path.open("rb") as source:
            while True:
                chunk = source.readline()
                if chunk.endswith(b"\n"):
                    label = self._forwarded(node, (pending + chunk).decode(errors="replace").rstrip("\n"))
                    if label is not None:
                        lines.put((node.index, label))
                    pending = b""
                    continue
                pending += chunk
                if node.exit_code() is not None:
                    rest = pending + source.read()
                    for raw in rest.decode(errors="replace").splitlines():
                        label = self._forwarded(node, raw)
                        if label is not None:
                            lines.put((node.index, label))
                    break
                time.sleep(_POLL_SECONDS)
        lines.put((node.index, None))

    def _drain(self, job: _LocalJob, log: LogSink) -> None:
        for node in job.nodes:
            if node.reader is not None:
                node.reader.join(timeout=5)
        while True:
            try:
                _, line = job.lines.get_nowait()
            except queue.Empty:
                return
            if line is not None:
                log(line)

    def _failure(self, job: _LocalJob, reason: str) -> JobStatus:
        """The first failing node's exit code, and the last lines of the rank that failed there."""
        failed = job.failed_first[0] if job.failed_first else None
        if failed is None:
            return JobStatus(JobState.FAILED, reason=reason)
        exit_code = failed.exit_code()
        if exit_code == _LOST:
            return JobStatus(JobState.FAILED, reason=f"node {failed.index} was killed (no exit record)")
        output = failed.log_path.read_text(errors="replace").splitlines()[-400:] if failed.log_path.exists() else []
        labelled = [self._label(failed, line) for line in output]
        tail = labelled[-TAIL_LINES:]
        where = f"node {failed.index}"
        cause = _ROOT_CAUSE.search("\n".join(line for line in output if not _RANK_PREFIX.match(line)))
        if cause:
            rank, local_rank, exit_code = int(cause.group(1)), int(cause.group(2)), int(cause.group(3))
            where = f"node {failed.index} rank {rank}"
            own = [m.group(2) for m in map(_RANK_PREFIX.match, output) if m and int(m.group(1)) == local_rank]
            tail = self._rank_log_tail(failed, local_rank) or own[-TAIL_LINES:] or tail
        return JobStatus(
            JobState.FAILED,
            reason=f"{where} exited with code {exit_code}",
            exit_code=exit_code,
            log_tail=tuple(tail),
        )

    @staticmethod
    def _rank_log_tail(node: _Node, local_rank: int) -> list[str]:
        """The rank's last stdout lines then its last stderr lines, from torchrun's per-rank log files."""
        tail: list[str] = []
        for stream in ("stdout", "stderr"):
            for path in sorted(node.rank_log_dir.glob(f"*/attempt_*/{local_rank}/{stream}.log")):
                lines = path.read_text(errors="replace").splitlines()
                tail.extend(lines[-TAIL_LINES // 2 :])
        return tail[-TAIL_LINES:]

    def _kill_orphans(self, job_name: str) -> None:
        """Processes a previous try left behind (a failed node's peers): stop them before starting again."""
        state = self._read_state(job_name)
        if state.get("state") != JobState.RUNNING.value:
            return
        for pid in state.get("pids", []):  # type: ignore[union-attr]
            if group_alive(int(pid)):
                kill_process_group(int(pid))
