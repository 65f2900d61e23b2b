"""What a new worker finds of a job an earlier try's worker started (its state file), without starting one."""

from __future__ import annotations

import json
import os
from pathlib import Path

from airflow_provider_trainium.compute.base import JobState
from airflow_provider_trainium.compute.local.backend import LocalBackend


def write_running_job(state_dir: Path, name: str, node_group: int) -> None:
    """The state file a worker writes when its job starts: one node whose process group is ``node_group``."""
    state_dir.mkdir(parents=True, exist_ok=True)
    node = {"pid": node_group, "log": str(state_dir / "log"), "record": str(state_dir / "no-record-yet.json"),
            "rank_logs": str(state_dir / "ranks")}  # fmt: skip
    state = {
        "job_id": "job-1",
        "state": JobState.RUNNING.value,
        "spec_hash": "abc",
        "nodes": [node],
        "processes_per_node": 1,
    }
    (state_dir / f"{name}.json").write_text(json.dumps(state))


def test_a_job_still_running_after_its_worker_died_is_found_by_the_retry(tmp_path):
    """The retry of a killed task attaches to its job instead of starting a second one."""
    write_running_job(tmp_path, "train-1", os.getpgid(0))  # a live group: this test's own
    found = LocalBackend(tmp_path).find_existing("train-1", {})
    assert found is not None and found.job_id == "job-1"


def test_a_job_whose_processes_vanished_without_an_exit_record_is_not_attached(tmp_path):
    write_running_job(tmp_path, "train-1", 2**22 + 7)  # no such process group
    assert LocalBackend(tmp_path).find_existing("train-1", {}) is None
