"""A local job's processes: each node started under its supervisor, judged by its exit record, stopped as a tree.

A job outlives the worker that started it: each node runs under ``supervisor.py``, which leads the node's process
group, writes its output to a file and records its exit code. A node is alive while its process group is, and is
judged by that record, so a later worker that never started the job judges it the same way. The whole process
tree is stopped on timeout, on task kill, or as soon as one node fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_trainium.compute.base import JobHandle

SUPERVISOR = Path(__file__).with_name("supervisor.py")
#: A node whose process group is gone without an exit record (killed with its supervisor).
LOST = -1


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
    signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline and group_alive(pid):
        time.sleep(0.1)
    signal_group(pid, signal.SIGKILL)


def kill_live_groups(pids: Sequence[int]) -> None:
    """Stop every group of ``pids`` still running: the processes a previous try left behind (a failed node's
    peers), before the job starts again."""
    for pid in pids:
        if group_alive(int(pid)):
            kill_process_group(int(pid))


def signal_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the group led by ``pid``; a group already gone (or not ours) is left alone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def start_node(
    python: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path, record_path: Path
) -> subprocess.Popen[bytes]:
    """Start one node: ``argv`` under its supervisor, in a session of its own, its output to ``log_path``.

    The output goes to a file, not a pipe, so the node keeps running when the worker that started it dies.
    """
    with log_path.open("wb") as out:
        return subprocess.Popen(
            [python, str(SUPERVISOR), str(record_path), "--", *argv],
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


@dataclass
class Node:
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

    @classmethod
    def from_state(cls, index: int, data: Mapping[str, Any], processes_per_node: int) -> Node:
        """The node as another worker recorded it (``to_state``): no process object, judged by its group."""
        return cls(index, int(data["pid"]), processes_per_node, Path(data["log"]), Path(data["record"]),
                   Path(data["rank_logs"]))  # fmt: skip

    def exit_code(self) -> int | None:
        """None while the node runs; its recorded exit code after; ``LOST`` if it vanished without one."""
        if self.process is not None:
            self.process.poll()  # reap our own child so its group can end
        for _ in range(2):  # the record is written before the group ends: read, check the group, read again
            with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
                return int(json.loads(self.record_path.read_text())["exit_code"])
            if group_alive(self.pid):
                return None
        return LOST


@dataclass
class LocalJob:
    """A job's nodes as one worker knows them, with the lines its readers queue for the task log."""

    handle: JobHandle
    nodes: list[Node]
    lines: queue.Queue[tuple[int, str | None]] = field(default_factory=queue.Queue)
    failed_first: list[Node] = field(default_factory=list)

    @classmethod
    def from_state(cls, handle: JobHandle, state: Mapping[str, Any]) -> LocalJob | None:
        """The job as the worker that started it recorded it; None when ``state`` is not a record of this job."""
        if state.get("job_id") != handle.job_id or not state.get("nodes"):
            return None
        per_node = int(state.get("processes_per_node") or 1)
        return cls(handle, [Node.from_state(i, n, per_node) for i, n in enumerate(state["nodes"])])

    def note_failures(self, codes: Sequence[int | None]) -> None:
        """Add the nodes (``codes``: each one's exit code) that ended with an error since the last look, in the
        order their exit records were written: the first node to fail is the one whose lines explain the job's
        failure (its peers fail after it)."""
        ended = sorted(
            (n for n, c in zip(self.nodes, codes, strict=True) if c not in (None, 0) and n not in self.failed_first),
            key=lambda n: n.record_path.stat().st_mtime if n.record_path.exists() else float("inf"),
        )
        self.failed_first.extend(ended)

    def stop(self, grace_seconds: float = 10.0) -> None:
        """TERM every node's process group, wait for them, then KILL whatever ignored TERM."""
        for node in self.nodes:
            signal_group(node.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        for node in self.nodes:
            while time.monotonic() < deadline and node.exit_code() is None:
                time.sleep(0.1)
            signal_group(node.pid, signal.SIGKILL)
            if node.process is not None:
                node.process.wait()
