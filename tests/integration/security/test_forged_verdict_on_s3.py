"""The forged-verdict attack on S3, with the job role's policy as ``cloudformation/base.yaml`` writes it: jobs act
with a session of that role on a moto S3 that enforces IAM (``iam_moto``); Airflow registers with the published
Airflow policy. ``evaluate`` is marked success without running (``dag.test(mark_success_pattern=...)``), so the
only evidence is what the jobs left under the run's prefix.

The job role lets every forgery through (it writes every run's ``runs/``); the model is never registered nor
promoted, because the verdict's seal no longer holds for this run's evaluation job. The control, the verdict as
that job sealed it, registers and promotes. The local-compute twin is ``test_evidence.py``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from airflow_provider_trainium.compute.naming import job_name, run_key
from airflow_provider_trainium.registry import ModelRegistry
from airflow_provider_trainium.registry.seal import job_key
from tests.conftest import set_trainium_connection
from tests.integration.registry.conftest import run_dag
from tests.integration.security import iam_moto
from tests.integration.security.iam_moto import IamS3, airflow_connection
from trainium_trainer import boundary

RUN_AFTER = datetime(2026, 1, 2, tzinfo=UTC)
OTHER_RUN = "scheduled__2026-01-01T00:00:00+00:00"
MODEL_FILES = {"model.safetensors": b"\x02" * 64, "metrics.json": b'{"accuracy": 0.5}'}
FINGERPRINT = boundary.model_fingerprint(
    (name, len(data), hashlib.sha256(data).hexdigest()) for name, data in MODEL_FILES.items()
)


@pytest.fixture(scope="module")
def world() -> Iterator[IamS3]:
    yield from iam_moto.start()


def run_id() -> str:
    """The run ``dag.test(run_after=RUN_AFTER, logical_date=RUN_AFTER)`` creates."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.types import DagRunType

    return DagRun.generate_run_id(run_type=DagRunType.MANUAL, logical_date=RUN_AFTER, run_after=RUN_AFTER)


def verdict(model_uri: str, value: float, key: str) -> dict:
    """What ``trainium_trainer.common.verdict.write_verdict`` writes for ``MODEL_FILES``, sealed with ``key``."""
    record = {"format": boundary.VERDICT_FORMAT, "metric": "accuracy", "value": value, "threshold": 0.9,
              "comparison": ">=", "passed": boundary.passes(value, ">=", 0.9), "model_uri": model_uri,
              "model_fingerprint": FINGERPRINT, "model_files": len(MODEL_FILES), "details": {}}  # fmt: skip
    return {**record, boundary.SEAL_FIELD: boundary.seal(record, key)}


@pytest.mark.parametrize("attack", ["none", "passed flipped", "value raised", "another run's job"])
def test_a_verdict_forged_with_the_job_role_promotes_nothing(world, monkeypatch, capsys, attack):
    from airflow.sdk import DAG

    from airflow_provider_trainium.operators.job import TrainiumJobOperator
    from airflow_provider_trainium.operators.registry import TrainiumRegisterModelOperator

    dag_id = "forged_on_s3_" + "".join(c if c.isalnum() else "_" for c in attack)
    model = dag_id.replace("_", "-")  # one per case: the module's cases share one bucket
    conn_id = airflow_connection(world, monkeypatch)
    set_trainium_connection(monkeypatch, artifact_root=world.root, aws_conn_id=conn_id)
    run = f"{world.prefix}/runs/{dag_id}/{run_key(run_id())}"
    model_uri = f"s3://{world.bucket}/{run}/train/model"
    job = world.s3("job")  # every write below is a job's, with the job role
    for name, data in MODEL_FILES.items():
        job.put_object(Bucket=world.bucket, Key=f"{run}/train/model/{name}", Body=data)
    record = verdict(model_uri, 0.97 if attack == "none" else 0.4958, job_key(job_name(dag_id, "evaluate", run_id())))
    if attack == "passed flipped":  # 0.4958 < 0.9, the flag edited
        record = {**record, "passed": True}
    elif attack == "value raised":
        record = {**record, "value": 0.97, "passed": True}
    elif attack == "another run's job":  # its own verdict, correctly sealed with its own key
        record = verdict(model_uri, 0.97, job_key(job_name(dag_id, "evaluate", OTHER_RUN)))
    job.put_object(Bucket=world.bucket, Key=f"{run}/evaluate/{boundary.VERDICT_FILE}", Body=json.dumps(record))

    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        evaluate = TrainiumJobOperator(task_id="evaluate", entry_point="trainium_trainer.mnist_mlp.evaluate",
                                       distributed=False, compute="local")  # fmt: skip
        register = TrainiumRegisterModelOperator(task_id="register", model_name=model, source_uri=model_uri,
                                                 promote_alias="latest", promote_manual_runs=True,
                                                 retries=0)  # fmt: skip
        evaluate >> register
    ran = run_dag(dag, mark_success_pattern="^evaluate$", run_after=RUN_AFTER, logical_date=RUN_AFTER)
    states = {ti.task_id: ti.state for ti in ran.get_task_instances()}

    registry = ModelRegistry(world.root, conn_id)
    if attack == "none":
        assert states == {"evaluate": "success", "register": "success"}
        assert registry.get_alias(model, "latest").version == 1
    else:
        assert states == {"evaluate": "success", "register": "failed"}
        assert model not in registry.list_models()
        printed = capsys.readouterr()
        assert "is not sealed by evaluation job" in printed.out + printed.err  # refused for its seal
