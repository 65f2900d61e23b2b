"""A user's unchanged scripts run through ``command=``/``script=`` on local compute, as they would in the container.

Local compute runs the container's argv: the launcher in ``--user-code`` mode copies the job's code bundle into
the node's code folder, runs the command (under torchrun) in the node's output folder, mirrors that folder
(and the checkpoint folder) to the job's URIs on an interval and once more at the end, and restores both
before a retry starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import torch

from airflow_provider_trainium.compute.base import JobState
from airflow_provider_trainium.compute.local.backend import LocalBackend
from airflow_provider_trainium.neuron.spec import JobSpec
from tests.conftest import set_trainium_connection
from tests.integration.decorators.test_trainium_task import load_dag

SCRIPTS = Path(__file__).resolve().parents[1] / "jobs" / "user_scripts"

DAG_FILE = f'''
import datetime as dt

from airflow.sdk import DAG

from airflow_provider_trainium.operators.job import TrainiumJobOperator

with DAG("trainium_user_scripts", schedule=None, start_date=dt.datetime(2026, 1, 1)) as dag:
    TrainiumJobOperator(task_id="torchrun_script", script="ddp_regression.py", job_args=["--epochs", "3"],
                        code_dir="{SCRIPTS}", instance_type="trn1.32xlarge", compute="local", retries=0)
    TrainiumJobOperator(task_id="hf_trainer", command=["python", "hf_trainer_script.py"], code_dir="{SCRIPTS}",
                        instance_type="trn1.2xlarge", processes_per_node=1, compute="local", retries=0,
                        metric_patterns="huggingface",  # its curves from its own log lines, the script unchanged
                        env={{"HF_HUB_OFFLINE": "1", "USE_TORCH_XLA": "0"}})  # the CPU, not torch-xla
'''


@pytest.mark.slow
def test_unchanged_scripts_leave_their_outputs_under_output_uri(tmp_path, monkeypatch):
    root = tmp_path / "artifacts"
    set_trainium_connection(monkeypatch, artifact_root=root.as_uri())
    run = load_dag(tmp_path / "dags", DAG_FILE, monkeypatch).test()
    assert str(run.state) == "success"

    ddp = Path(run.get_task_instance("torchrun_script").xcom_pull(task_ids="torchrun_script").removeprefix("file://"))
    summary = json.loads((ddp / "outputs" / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["started_at_epoch"] == 0
    weights = torch.load(ddp / "outputs" / "model.pt", weights_only=True)
    assert set(weights) == {"weight", "bias"}
    assert sorted(p.name for p in (ddp / "checkpoints").iterdir()) == ["epoch-0.pt", "epoch-1.pt", "epoch-2.pt"]

    hf = Path(run.get_task_instance("hf_trainer").xcom_pull(task_ids="hf_trainer").removeprefix("file://"))
    output = hf / "trainer_output"
    assert {"checkpoint-2", "checkpoint-4", "final"} <= {p.name for p in output.iterdir()}
    state = json.loads((output / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["global_step"] == 4
    assert (output / "final" / "model.safetensors").stat().st_size > 0
    records = [json.loads(line) for chunk in sorted((hf / "stream" / "train").glob("*.jsonl"))
               for line in chunk.read_text().splitlines()]  # fmt: skip
    train = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2, 3, 4] and all(r["loss"] > 0 for r in train)


def kill_job(backend: LocalBackend, handle) -> None:
    """SIGKILL the whole job, as a lost instance takes it: each node's group (supervisor, launcher, torchrun) and
    its ranks, which torchrun starts in sessions of their own (a signal to the group misses them); returns once
    every one of them is gone."""
    everything = []
    for node in backend._job(handle).nodes:
        everything += psutil.Process(node.pid).children(recursive=True)  # found while their parents still run
        os.killpg(node.pid, signal.SIGKILL)
    for proc in everything:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    _, alive = psutil.wait_procs(everything, timeout=30)
    assert not alive, f"still running after SIGKILL: {alive}"


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[LocalBackend]:
    """Local compute that stops every job it started when the test ends, passed or not."""
    local = LocalBackend(tmp_path / "state", max_processes_per_node=2)
    yield local
    for job in list(local._jobs.values()):
        local.cancel(job.handle, "the test is over")


def wait_until(condition, backend: LocalBackend, handle, what: str, limit_s: float = 300) -> None:
    """Poll the job's own progress (its output, its state), failing if it ends first."""
    deadline = time.monotonic() + limit_s
    while not condition():
        status = backend.status(handle)
        assert not status.state.terminal, f"the job ended before {what}: {status}"
        assert time.monotonic() < deadline, f"no {what} within {limit_s} s"
        time.sleep(0.1)


@pytest.mark.slow
def test_a_retry_after_a_kill_resumes_from_the_uploaded_checkpoint(tmp_path, backend):
    from airflow_provider_trainium.code_bundle import upload_bundle

    bundle = upload_bundle(SCRIPTS, (tmp_path / "artifacts").as_uri(), None)
    output = tmp_path / "out"
    spec = JobSpec(name="resume", command=("python", "ddp_regression.py"), args=("--epochs", "4"),
                   instance_type="trn1.32xlarge", output_uri=output.as_uri(), code_uri=bundle,
                   checkpoint_uri=(tmp_path / "ckpt").as_uri(), env={"TRAINIUM_CHECKPOINT_SYNC_S": "0.2"})  # fmt: skip

    first = backend.submit(spec.with_changes(env={**spec.env, "PAUSE_AFTER_EPOCH": "1"}), "resume-1", {})
    uploaded = output / "checkpoints" / "epoch-1.pt"
    wait_until(uploaded.exists, backend, first, "epoch 1's checkpoint was uploaded")
    kill_job(backend, first)
    assert backend.wait(first, lambda line: None, 60).state is not JobState.SUCCEEDED

    lines: list[str] = []
    second = backend.submit(spec, "resume-2", {})
    assert backend.wait(second, lines.append, 300).state is JobState.SUCCEEDED
    assert any("resuming after epoch 1" in line for line in lines), lines[-20:]
    assert json.loads((output / "outputs" / "summary.json").read_text())["started_at_epoch"] == 2

    uninterrupted = tmp_path / "uninterrupted"
    third = backend.submit(spec.with_changes(output_uri=uninterrupted.as_uri(), checkpoint_uri=None), "whole", {})
    assert backend.wait(third, lines.append, 300).state is JobState.SUCCEEDED
    resumed = torch.load(output / "outputs" / "model.pt", weights_only=True)
    whole = torch.load(uninterrupted / "outputs" / "model.pt", weights_only=True)
    assert all(torch.equal(resumed[name], whole[name]) for name in whole)
