"""Runs one node of a local job and records how it ended, so any later worker can judge the job.

    python supervisor.py <exit record> -- <argv...>

The supervisor leads the node's process group, runs ``argv`` (the container argv) as its child, and when
the child ends writes ``{"exit_code": N}`` to the exit record (atomically) and exits with the same code.
torchrun starts each rank in a session of its own; the supervisor is their subreaper, so a rank whose
agent died is adopted here and stopped before the record is written: no rank outlives its node.
The worker that started the job may die meanwhile: the job keeps running (its output goes to a file, not
to a pipe the dead worker held), and whoever looks next judges it by the record, not by its own memory.
Run by path with the standard library only: it imports neither Airflow nor the provider.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
GRACE_SECONDS = 10.0


def become_subreaper() -> None:
    """Orphaned descendants (ranks whose torchrun agent died) become our children, not init's (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def children() -> list[int]:
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == me and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def stop_adopted() -> None:
    """TERM the descendants left behind, KILL them after the grace period, and reap every one."""
    deadline = time.monotonic() + GRACE_SECONDS
    sig = signal.SIGTERM
    while True:
        while True:  # reap whatever has ended
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                break
        left = children()
        if not left:
            return
        if time.monotonic() > deadline:
            sig = signal.SIGKILL
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        time.sleep(0.1)


def write_record(path: Path, exit_code: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"exit_code": exit_code}))
    tmp.replace(path)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: supervisor.py <exit record> -- <argv...>", file=sys.stderr)
        return 2
    record, command = Path(argv[0]), argv[2:]
    become_subreaper()
    child = subprocess.Popen(command)
    # A TERM for the group reaches the child too; the supervisor outlives it to record how it ended.
    signal.signal(signal.SIGTERM, lambda *_: None)
    code = child.wait()
    code = code if code >= 0 else 128 - code  # killed by signal N: the shell's 128 + N
    stop_adopted()
    write_record(record, code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
