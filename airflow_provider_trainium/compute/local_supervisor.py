"""Runs one node of a local job and records how it ended, so any later worker can judge the job.

    python local_supervisor.py <exit record> -- <argv...>

The supervisor leads the node's process group, runs ``argv`` (the container argv) as its child, and when
the child ends writes ``{"exit_code": N}`` to the exit record (atomically) and exits with the same code.
The worker that started the job may die meanwhile: the job keeps running (its output goes to a file, not
to a pipe the dead worker held), and whoever looks next judges it by the record, not by its own memory.
Run by path with the standard library only: it imports neither Airflow nor the provider.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path


def write_record(path: Path, exit_code: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"exit_code": exit_code}))
    tmp.replace(path)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: local_supervisor.py <exit record> -- <argv...>", file=sys.stderr)
        return 2
    record, command = Path(argv[0]), argv[2:]
    child = subprocess.Popen(command)
    # A TERM for the group reaches the child too; the supervisor outlives it to record how it ended.
    signal.signal(signal.SIGTERM, lambda *_: None)
    code = child.wait()
    code = code if code >= 0 else 128 - code  # killed by signal N: the shell's 128 + N
    write_record(record, code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
