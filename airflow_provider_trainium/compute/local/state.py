"""The record of each local job that outlives the worker that started it: one JSON file per job name.

A worker can die while its job runs (the nodes keep running under their supervisors). The next try of the task
runs in another worker, maybe another process of this host, and knows the job only through this file: its id,
the spec hash it was asked for, when it started, and each node's process group, log, exit record and rank logs.
So the retry attaches to the job or takes its result, and never trains it twice. Writes replace the file in one
rename, so a reader never sees half a record.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def local_state_dir() -> Path:
    """Where local compute keeps its job records: under ``$AIRFLOW_HOME`` so every worker of this host sees them."""
    home = os.environ.get("AIRFLOW_HOME") or str(Path.home() / "airflow")
    return Path(home) / "trainium-local"


class JobRecords:
    """The job records under ``state_dir``, by job name (the name every try of a task asks for)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir

    def path(self, job_name: str) -> Path:
        return self.state_dir / f"{job_name}.json"

    def read(self, job_name: str) -> dict[str, object]:
        """The job's record; empty when no job of that name ever started here."""
        path = self.path(job_name)
        return json.loads(path.read_text()) if path.exists() else {}

    def write(self, job_name: str, state: dict[str, object]) -> None:
        """Replace the job's record at once (a temporary file renamed over it)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path(job_name).with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(self.path(job_name))

    def update(self, job_name: str, job_id: str, **changes: object) -> None:
        """Change the record of ``job_id`` only: a later job of the same name has replaced it otherwise."""
        state = self.read(job_name)
        if state.get("job_id") == job_id:
            self.write(job_name, {**state, **changes})
