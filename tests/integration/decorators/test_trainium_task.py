"""``@task.trainium`` in real ``dag.test()`` runs on local compute: the function runs on every torchrun rank.

The DAG file is what a user writes: ``from airflow.sdk import task`` and ``@task.trainium(...)`` (the decorator
comes from the provider's ``task-decorators``). Local compute runs the container's argv, so each rank runs the
in-image runner ``trainium_trainer.function`` on the job's code bundle, as on ECS and Batch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import set_trainium_connection
from tests.dag_files import import_dag_file

DAG_FILE = """
import datetime as dt

from airflow.sdk import DAG, task

with DAG("trainium_function", schedule=None, start_date=dt.datetime(2026, 1, 1)) as dag:

    @task.trainium(instance_type="trn1.32xlarge", compute="local", retries=0)
    def all_reduce(values: list[int], scale: float = 1.0) -> dict:
        import os

        import torch
        import torch.distributed as dist

        dist.init_process_group("gloo")
        mine = torch.tensor([sum(values) * scale * (dist.get_rank() + 1)])
        dist.all_reduce(mine)
        if os.environ["RANK"] == "1" and os.environ.get("FAIL_ON_RANK_1") == "1":
            raise RuntimeError("rank 1 refuses")
        return {
            "rank": dist.get_rank(), "world": dist.get_world_size(), "total": mine.item(),
            "local_rank": int(os.environ["LOCAL_RANK"]), "master": os.environ["MASTER_ADDR"],
            "cwd_is_output": os.getcwd() == os.environ["TRAINIUM_OUTPUT_DIR"],
        }

    all_reduce([1, 2, 3], scale=2.0)
"""


def load_dag(folder: Path, source: str, monkeypatch: pytest.MonkeyPatch):
    return import_dag_file(folder, "trainium_function", source, "function", monkeypatch).dag


def failed_run_log(tmp_path: Path, source: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture) -> str:
    """What a ``dag.test()`` run of ``source`` printed; the run must have failed."""
    run = load_dag(tmp_path / "dags", source, monkeypatch).test()
    assert str(run.state) == "failed"
    return "".join(capfd.readouterr())


@pytest.fixture
def artifacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "artifacts"
    set_trainium_connection(monkeypatch, artifact_root=root.as_uri())
    return root


def test_the_function_runs_on_two_ranks_and_rank_0s_value_is_the_xcom(artifacts, tmp_path, monkeypatch):
    dag = load_dag(tmp_path / "dags", DAG_FILE, monkeypatch)
    run = dag.test()
    assert str(run.state) == "success"
    value = run.get_task_instance("all_reduce").xcom_pull(task_ids="all_reduce")
    # both ranks contributed: sum(values) * scale * (1 + 2)
    assert value == {"rank": 0, "world": 2, "total": 6 * 2.0 * 3, "local_rank": 0, "master": "127.0.0.1",
                     "cwd_is_output": True}  # fmt: skip
    (bundle,) = (artifacts / "code").iterdir()
    source = (bundle / "_trainium_function" / "function.py").read_text()
    assert "@task.trainium" not in source and "def all_reduce" in source
    assert json.loads((bundle / "_trainium_function" / "call.json").read_text())["kwargs"] == {"scale": 2.0}


def test_a_failing_rank_fails_the_task_with_its_traceback(artifacts, tmp_path, monkeypatch, capfd):
    source = DAG_FILE.replace('compute="local", retries=0', 'compute="local", retries=0, env={"FAIL_ON_RANK_1": "1"}')
    log = failed_run_log(tmp_path, source, monkeypatch, capfd)
    assert "RuntimeError: rank 1 refuses" in log
    assert "the function raised on rank 1" in log


def test_an_import_the_image_lacks_is_named_and_not_retried(artifacts, tmp_path, monkeypatch, capfd):
    source = DAG_FILE.replace("import torch\n", "import torch\n        import no_such_package_here\n", 1).replace(
        "retries=0", "retries=3, distributed=False"
    )
    log = failed_run_log(tmp_path, source, monkeypatch, capfd)
    assert "the function imports 'no_such_package_here', which this image does not have" in log
    assert "bad input: not retried" in log


def test_an_argument_json_cannot_carry_is_refused_before_any_job(artifacts, tmp_path, monkeypatch, capfd):
    source = DAG_FILE.replace("all_reduce([1, 2, 3], scale=2.0)", "all_reduce({1, 2, 3})")
    log = failed_run_log(tmp_path, source, monkeypatch, capfd)
    assert "argument 0 of all_reduce() is a set, which cannot cross to a Trainium job" in log
    assert not (artifacts / "code").exists()  # nothing was shipped, nothing started
