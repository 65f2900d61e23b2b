"""Local compute: a job's N nodes as N torchrun agents on this machine, talking over loopback.

Each node gets the AWS_BATCH_JOB_* variables a Batch multi-node job would see, so the code path matches
the real cluster. Output of every process streams into the task log as ``[node i rank r]``. The whole
process tree is killed on timeout, on task kill, or as soon as one node fails.
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
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from airflow_provider_trainium.compute.base import (
    ComputeBackend,
    JobHandle,
    JobState,
    JobStatus,
    LogSink,
)
from airflow_provider_trainium.neuron.launch import batch_node_environment, job_environment, node_command
from airflow_provider_trainium.neuron.spec import JobSpec

#: Exit code the trainer uses for bad input (see trainer.common.errors): retrying cannot help.
EXIT_BAD_INPUT = 65
TAIL_LINES = 40
_RANK_PREFIX = re.compile(r"^\[default(\d+)\]:(.*)$")
_ROOT_CAUSE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)\s*\n\s*exitcode\s*:\s*(-?\d+)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_process_group(pid: int, grace_seconds: float = 10.0) -> None:
    """SIGTERM the process group led by ``pid``, then SIGKILL what is left after the grace period."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    _signal_group(pid, signal.SIGKILL)


@dataclass
class _Node:
    index: int
    process: subprocess.Popen[str]
    processes_per_node: int
    log_dir: Path | None = None
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=400))
    agent_tail: deque[str] = field(default_factory=lambda: deque(maxlen=200))
    rank_tails: dict[int, deque[str]] = field(default_factory=dict)
    reader: threading.Thread | None = None


@dataclass
class _LocalJob:
    handle: JobHandle
    spec: JobSpec
    nodes: list[_Node]
    lines: queue.Queue[tuple[int, str | None]]
    failed_first: list[_Node] = field(default_factory=list)

    def stop(self, grace_seconds: float = 10.0) -> None:
        """TERM every node's process group, reap the agents, then KILL whatever ignored TERM."""
        for node in self.nodes:
            _signal_group(node.process.pid, signal.SIGTERM)
        for node in self.nodes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.process.wait(timeout=grace_seconds)
            _signal_group(node.process.pid, signal.SIGKILL)
            node.process.wait()


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


class LocalBackend(ComputeBackend):
    """Runs jobs as child processes of the Airflow worker. Needs the ``trainer`` extra installed."""

    name = "local"

    def __init__(self, state_dir: str | Path, python: str | None = None, max_processes_per_node: int = 2):
        self.state_dir = Path(state_dir)
        self.python = python or sys.executable
        self.max_processes_per_node = max_processes_per_node
        self._jobs: dict[str, _LocalJob] = {}

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

    def local_spec(self, spec: JobSpec) -> JobSpec:
        """This machine is not a Trn1: cap processes per node (each stands in for a NeuronCore)."""
        if spec.distributed and spec.nproc_per_node > self.max_processes_per_node:
            return spec.with_changes(processes_per_node=self.max_processes_per_node)
        return spec

    # -- ComputeBackend ---------------------------------------------------------------------------
    def find_existing(self, job_name: str, tags: dict[str, str]) -> JobHandle | None:
        state = self._read_state(job_name)
        if state.get("state") == JobState.SUCCEEDED.value:
            return JobHandle(self.name, str(state["job_id"]), job_name, {"spec_hash": state.get("spec_hash")})
        return None

    def submit(self, spec: JobSpec, job_name: str, tags: dict[str, str]) -> JobHandle:
        self._kill_orphans(job_name)
        requested_hash = spec.content_hash()  # what the operator asked for, before this machine's caps
        spec = self.local_spec(spec)
        handle = JobHandle(self.name, f"{job_name}-{uuid.uuid4().hex[:8]}", job_name, {"spec_hash": requested_hash})
        port = free_port()
        base_env = {**os.environ, **job_environment(spec), "TRAINIUM_JOB_NAME": job_name}
        base_env["TRAINIUM_JOB_HASH"] = spec.content_hash()
        lines: queue.Queue[tuple[int, str | None]] = queue.Queue()
        nodes: list[_Node] = []
        for index in range(spec.nodes):
            env = {**base_env, **batch_node_environment(spec.nodes, index, 0, "127.0.0.1")}
            command = node_command(spec, node_rank=index, master_addr="127.0.0.1", master_port=port, python=self.python)
            log_dir = self.state_dir / "logs" / handle.job_id / f"node{index}"
            if spec.distributed:
                at = command.index("torch.distributed.run") + 1
                # --tee prefixes every worker line with its local rank; the per-rank files under --log-dir
                # keep the whole output, which the console tail may cut short when a rank fails.
                command[at:at] = ["--tee=3", "--redirects=3", f"--log-dir={log_dir}"]
            process = subprocess.Popen(
                command,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                bufsize=1,
                start_new_session=True,
            )
            node = _Node(index, process, spec.nproc_per_node, log_dir)
            node.reader = threading.Thread(target=self._pump, args=(node, lines), daemon=True)
            node.reader.start()
            nodes.append(node)
        self._jobs[handle.job_id] = _LocalJob(handle, spec, nodes, lines)
        self._write_state(
            job_name,
            {
                "state": JobState.RUNNING.value,
                "job_id": handle.job_id,
                "pids": [n.process.pid for n in nodes],
            },
        )
        return handle

    def status(self, handle: JobHandle) -> JobStatus:
        job = self._jobs.get(handle.job_id)
        if job is None:
            state = self._read_state(handle.job_name)
            if state.get("job_id") == handle.job_id and state.get("state") == JobState.SUCCEEDED.value:
                return JobStatus(JobState.SUCCEEDED)
            return JobStatus(JobState.FAILED, reason="the local job is not running in this worker")
        codes = [n.process.poll() for n in job.nodes]
        for node, code in zip(job.nodes, codes, strict=True):
            if code not in (None, 0) and node not in job.failed_first:
                job.failed_first.append(node)
        if job.failed_first:
            return self._failure(job, "a node exited with an error")
        if all(c == 0 for c in codes):
            return JobStatus(JobState.SUCCEEDED)
        return JobStatus(JobState.RUNNING)

    def cancel(self, handle: JobHandle, reason: str) -> None:
        job = self._jobs.get(handle.job_id)
        if job is not None:
            job.stop()
        else:
            for pid in self._read_state(handle.job_name).get("pids", []):  # type: ignore[union-attr]
                kill_process_group(int(pid))
        self._write_state(
            handle.job_name, {"state": JobState.CANCELLED.value, "job_id": handle.job_id, "reason": reason}
        )

    def wait(self, handle: JobHandle, log: LogSink, timeout_seconds: float) -> JobStatus:
        job = self._jobs[handle.job_id]
        deadline = time.monotonic() + timeout_seconds
        open_streams = len(job.nodes)
        status = JobStatus(JobState.RUNNING)
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
            status = self.status(handle)
            if status.state is JobState.FAILED:
                break
            if status.state is JobState.SUCCEEDED and open_streams == 0:
                break
            if time.monotonic() > deadline:
                self.cancel(handle, "timeout")
                self._drain(job, log)
                return JobStatus(JobState.FAILED, reason=f"timed out after {timeout_seconds:.0f} s")
        if status.state is JobState.FAILED:
            job.stop()
            self._drain(job, log)
            status = self._failure(job, status.reason)
        state = {
            "state": status.state.value,
            "job_id": handle.job_id,
            "spec_hash": handle.details.get("spec_hash"),
        }
        self._write_state(handle.job_name, state)
        return status

    # -- internals ----------------------------------------------------------------------------------
    def _pump(self, node: _Node, lines: queue.Queue[tuple[int, str | None]]) -> None:
        assert node.process.stdout is not None
        for raw in node.process.stdout:
            text = raw.rstrip("\n")
            match = _RANK_PREFIX.match(text)
            if match:
                local_rank = int(match.group(1))
                rank = node.index * node.processes_per_node + local_rank
                node.rank_tails.setdefault(local_rank, deque(maxlen=TAIL_LINES)).append(match.group(2))
                text = f"[node {node.index} rank {rank}] {match.group(2)}"
            else:
                node.agent_tail.append(text)
                text = f"[node {node.index}] {text}"
            node.tail.append(text)
            lines.put((node.index, text))
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
        exit_code = failed.process.returncode
        tail: list[str] = list(failed.tail)[-TAIL_LINES:]
        where = f"node {failed.index}"
        summary = "\n".join(failed.agent_tail)
        cause = _ROOT_CAUSE.search(summary)
        if cause:
            rank, local_rank, exit_code = int(cause.group(1)), int(cause.group(2)), int(cause.group(3))
            where = f"node {failed.index} rank {rank}"
            tail = self._rank_log_tail(failed, local_rank) or list(failed.rank_tails.get(local_rank, tail))
        return JobStatus(
            JobState.FAILED,
            reason=f"{where} exited with code {exit_code}",
            exit_code=exit_code,
            log_tail=tuple(tail),
        )

    @staticmethod
    def _rank_log_tail(node: _Node, local_rank: int) -> list[str]:
        """The rank's last stdout lines then its last stderr lines, from torchrun's per-rank log files."""
        if node.log_dir is None:
            return []
        tail: list[str] = []
        for stream in ("stdout", "stderr"):
            for path in sorted(node.log_dir.glob(f"*/attempt_*/{local_rank}/{stream}.log")):
                lines = path.read_text(errors="replace").splitlines()
                tail.extend(lines[-TAIL_LINES // 2 :])
        return tail[-TAIL_LINES:]

    def _kill_orphans(self, job_name: str) -> None:
        """Processes a previous try left behind (worker restart): stop them before starting again."""
        state = self._read_state(job_name)
        if state.get("state") != JobState.RUNNING.value:
            return
        for pid in state.get("pids", []):  # type: ignore[union-attr]
            if _alive(int(pid)):
                kill_process_group(int(pid))
