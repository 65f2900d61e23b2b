"""A local job's output: each node's log file followed into the task log, and a failure told with its own lines.

The main rank's output (rank 0) and each node's own lines stream into the task log as ``[node i rank 0]`` /
``[node i]``; every rank's output stays in the node's log file and torchrun's per-rank files, so the task log
stays readable with many ranks and nothing is lost. ``all_ranks`` (``LocalBackend(all_ranks=True)`` or
``TRAINIUM_TASK_LOG_ALL_RANKS=1``) forwards every rank. A failing rank's last lines are reported with the
failure, since the task log may not hold them.
"""

from __future__ import annotations

import queue
import re
import threading
import time

from airflow_provider_trainium.compute.base import JobState, JobStatus, LogSink
from airflow_provider_trainium.compute.local.processes import LOST, LocalJob, Node

TAIL_LINES = 40
POLL_SECONDS = 0.05
RANK_PREFIX = re.compile(r"^\[default(\d+)\]:(.*)$")
ROOT_CAUSE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)\s*\n\s*exitcode\s*:\s*(-?\d+)")


def label(node: Node, text: str) -> str:
    """``[node i rank r] line`` for a rank's line (torchrun's ``[defaultN]:`` prefix), ``[node i] line`` else."""
    match = RANK_PREFIX.match(text)
    if match:
        rank = node.index * node.processes_per_node + int(match.group(1))
        return f"[node {node.index} rank {rank}] {match.group(2)}"
    return f"[node {node.index}] {text}"


def forwarded(node: Node, text: str, all_ranks: bool) -> str | None:
    """The labelled line for the task log; None for a rank other than 0 unless every rank goes there."""
    match = RANK_PREFIX.match(text)
    if match and not all_ranks and node.index * node.processes_per_node + int(match.group(1)) != 0:
        return None
    return label(node, text)


def pump(node: Node, lines: queue.Queue[tuple[int, str | None]], all_ranks: bool) -> None:
    """Follow the node's output file until the node has ended and every line is read."""
    pending = b""
    with node.log_path.open("rb") as source:
        while True:
            chunk = source.readline()
            if chunk.endswith(b"\n"):
                text = forwarded(node, (pending + chunk).decode(errors="replace").rstrip("\n"), all_ranks)
                if text is not None:
                    lines.put((node.index, text))
                pending = b""
                continue
            pending += chunk
            if node.exit_code() is not None:
                rest = pending + source.read()
                for raw in rest.decode(errors="replace").splitlines():
                    text = forwarded(node, raw, all_ranks)
                    if text is not None:
                        lines.put((node.index, text))
                break
            time.sleep(POLL_SECONDS)
    lines.put((node.index, None))


def start_readers(job: LocalJob, all_ranks: bool) -> None:
    """One reader thread per node (once per job in this worker), each queueing its node's lines on ``job.lines``."""
    for node in job.nodes:
        if node.reader is None:
            node.reader = threading.Thread(target=pump, args=(node, job.lines, all_ranks), daemon=True)
            node.reader.start()


def drain(job: LocalJob, log: LogSink) -> None:
    """Give the readers a moment to finish, then log every line they queued."""
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


def failure(job: LocalJob, reason: str) -> JobStatus:
    """The first failing node's exit code, and the last lines of the rank that failed there."""
    failed = job.failed_first[0] if job.failed_first else None
    if failed is None:
        return JobStatus(JobState.FAILED, reason=reason)
    exit_code = failed.exit_code()
    if exit_code == LOST:
        return JobStatus(JobState.FAILED, reason=f"node {failed.index} was killed (no exit record)")
    output = failed.log_path.read_text(errors="replace").splitlines()[-400:] if failed.log_path.exists() else []
    labelled = [label(failed, line) for line in output]
    tail = labelled[-TAIL_LINES:]
    where = f"node {failed.index}"
    cause = ROOT_CAUSE.search("\n".join(line for line in output if not RANK_PREFIX.match(line)))
    if cause:
        rank, local_rank, exit_code = int(cause.group(1)), int(cause.group(2)), int(cause.group(3))
        where = f"node {failed.index} rank {rank}"
        own = [m.group(2) for m in map(RANK_PREFIX.match, output) if m and int(m.group(1)) == local_rank]
        tail = rank_log_tail(failed, local_rank) or own[-TAIL_LINES:] or tail
    return JobStatus(
        JobState.FAILED,
        reason=f"{where} exited with code {exit_code}",
        exit_code=exit_code,
        log_tail=tuple(tail),
    )


def rank_log_tail(node: Node, local_rank: int) -> list[str]:
    """The rank's last stdout lines then its last stderr lines, from torchrun's per-rank log files."""
    tail: list[str] = []
    for stream in ("stdout", "stderr"):
        for path in sorted(node.rank_log_dir.glob(f"*/attempt_*/{local_rank}/{stream}.log")):
            lines = path.read_text(errors="replace").splitlines()
            tail.extend(lines[-TAIL_LINES // 2 :])
    return tail[-TAIL_LINES:]
