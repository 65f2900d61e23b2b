"""The forged-verdict attack on S3, with the job role's policy as ``cloudformation/base.yaml`` writes it: jobs act
with a session of that role on a moto S3 that enforces IAM (``iam_moto``); Airflow registers with the published
Airflow policy. ``evaluate`` is marked success without running (``dag.test(mark_success_pattern=...)``), so the
only evidence is what the jobs left under the run's prefix.

The job role lets every forgery through (it writes every run's ``runs/`` and the shared ``data/``); the model is
never registered nor promoted: an edited verdict, or another run's, fails its seal for this run's evaluation job,
and a verdict on a swapped hold-out set names a manifest this run's data job never sealed
(``registry.holdout``). The controls, the records as this run's jobs sealed them, register and promote. The
local-compute twin is ``test_evidence.py``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from airflow_provider_trainium.compute.naming import job_name, run_key
from airflow_provider_trainium.registry import ModelRegistry
from airflow_provider_trainium.registry.holdout import VERDICT_FIELD
from airflow_provider_trainium.registry.seal import job_key
from tests.conftest import set_trainium_connection
from tests.integration.registry.conftest import run_dag
from tests.integration.security import iam_moto
from tests.integration.security.iam_moto import IamS3, airflow_connection
from trainium_trainer import boundary
from trainium_trainer.common import holdout

RUN_AFTER = datetime(2026, 1, 2, tzinfo=UTC)
OTHER_RUN = "scheduled__2026-01-01T00:00:00+00:00"
MODEL_FILES = {"model.safetensors": b"\x02" * 64, "metrics.json": b'{"accuracy": 0.5}'}
HOLDOUT_FILES = {"test.jsonl": b'{"text": "a held-out example"}\n'}
EASY_FILES = {"test.jsonl": b'{"text": "an example the model trained on"}\n'}
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


def verdict(model_uri: str, value: float, key: str, **more: str) -> dict:
    """What ``trainium_trainer.common.verdict.write_verdict`` writes for ``MODEL_FILES``, sealed with ``key``."""
    record = {"format": boundary.VERDICT_FORMAT, "metric": "accuracy", "value": value, "threshold": 0.9,
              "comparison": ">=", "passed": boundary.passes(value, ">=", 0.9), "model_uri": model_uri,
              "model_fingerprint": FINGERPRINT, "model_files": len(MODEL_FILES), "details": {}, **more}  # fmt: skip
    return {**record, boundary.SEAL_FIELD: boundary.seal(record, key)}


def evaluation_key(dag_id: str, run: str | None = None) -> str:
    return job_key(job_name(dag_id, "evaluate", run or run_id()))


class Case:
    """One DAG run of ``[prepare_holdout >>] evaluate >> register`` on the IAM-enforcing S3, as Airflow."""

    def __init__(self, world: IamS3, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
        self.world, self.job = world, world.s3("job")  # every object written here is a job's, with the job role
        self.dag_id = "forged_on_s3_" + "".join(c if c.isalnum() else "_" for c in name)
        self.model = self.dag_id.replace("_", "-")  # one per case: the module's cases share one bucket
        self.conn_id = airflow_connection(world, monkeypatch)
        set_trainium_connection(monkeypatch, artifact_root=world.root, aws_conn_id=self.conn_id)
        self.run = f"{world.prefix}/runs/{self.dag_id}/{run_key(run_id())}"
        self.model_uri = f"s3://{world.bucket}/{self.run}/train/model"
        #: The shared hold-out set's place (a data prefix every run of the DAG reads).
        self.holdout = f"{world.prefix}/data/{self.dag_id}/holdout"
        for name, data in MODEL_FILES.items():
            self.put(f"{self.run}/train/model/{name}", data)

    def put(self, key: str, body: bytes | dict) -> None:
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        self.job.put_object(Bucket=self.world.bucket, Key=key, Body=data)

    def put_verdict(self, record: dict) -> None:
        self.put(f"{self.run}/evaluate/{boundary.VERDICT_FILE}", record)

    def put_holdout(self, files: dict[str, bytes], key: str | None = None) -> str:
        """Write ``files`` and their manifest as the hold-out set, and with ``key`` the data job's sealed copy
        (``trainium_trainer.common.holdout.write_manifest``); the manifest's fingerprint."""
        for name, data in files.items():
            self.put(f"{self.holdout}/{name}", data)
        record = holdout.manifest(files)
        self.put(f"{self.holdout}/{boundary.HOLDOUT_MANIFEST_FILE}", record)
        if key:
            seal = f"{self.holdout}/{boundary.HOLDOUT_SEALS_DIR}/{boundary.key_id(key)}.json"
            self.put(seal, {**record, boundary.SEAL_FIELD: boundary.seal(record, key)})
        return boundary.record_fingerprint(record)

    def register(self, with_holdout: bool = False) -> dict[str, str]:
        """Run the DAG with the jobs' tasks marked success (never run): the task states, and what Airflow reads is
        only what the jobs left on S3."""
        from airflow.sdk import DAG

        from airflow_provider_trainium.operators.job import TrainiumJobOperator
        from airflow_provider_trainium.operators.registry import TrainiumRegisterModelOperator

        job = {"distributed": False, "compute": "local"}
        with DAG(self.dag_id, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
            evaluate = TrainiumJobOperator(task_id="evaluate", entry_point="trainium_trainer.mnist_mlp.evaluate", **job)
            register = TrainiumRegisterModelOperator(
                task_id="register", model_name=self.model, source_uri=self.model_uri, promote_alias="latest",
                promote_manual_runs=True, retries=0, holdout_task_id="prepare_holdout" if with_holdout else None,
            )  # fmt: skip
            if with_holdout:
                prepare = TrainiumJobOperator(task_id="prepare_holdout", entry_point="trainium_trainer.llama.data",
                                              output_uri=f"s3://{self.world.bucket}/{self.holdout}", **job)  # fmt: skip
                prepare >> evaluate
            evaluate >> register
        ran = run_dag(dag, mark_success_pattern="^(evaluate|prepare_holdout)$", run_after=RUN_AFTER,
                      logical_date=RUN_AFTER)  # fmt: skip
        return {ti.task_id: ti.state for ti in ran.get_task_instances() if ti.task_id != "prepare_holdout"}

    def registered(self) -> bool:
        registry = ModelRegistry(self.world.root, self.conn_id)
        if self.model not in registry.list_models():
            return False
        assert registry.get_alias(self.model, "latest").version == 1
        return True


def refused_for(capsys: pytest.CaptureFixture[str], words: str) -> bool:
    printed = capsys.readouterr()
    return words in printed.out + printed.err


PASSED = {"evaluate": "success", "register": "success"}
REFUSED = {"evaluate": "success", "register": "failed"}


@pytest.mark.parametrize("attack", ["none", "passed flipped", "value raised", "another run's job"])
def test_a_verdict_forged_with_the_job_role_promotes_nothing(world, monkeypatch, capsys, attack):
    """A job edits this run's verdict (0.4958 < 0.9), or another run's evaluation job plants its own verdict,
    correctly sealed with its own key."""
    case = Case(world, monkeypatch, attack)
    record = verdict(case.model_uri, 0.97 if attack == "none" else 0.4958, evaluation_key(case.dag_id))
    if attack == "passed flipped":
        record = {**record, "passed": True}
    elif attack == "value raised":
        record = {**record, "value": 0.97, "passed": True}
    elif attack == "another run's job":
        record = verdict(case.model_uri, 0.97, evaluation_key(case.dag_id, OTHER_RUN))
    case.put_verdict(record)
    if attack == "none":
        assert (case.register(), case.registered()) == (PASSED, True)
    else:
        assert (case.register(), case.registered()) == (REFUSED, False)
        assert refused_for(capsys, "is not sealed by evaluation job")


@pytest.mark.parametrize("attack", ["none", "files and manifest swapped", "seal replaced by another run's job"])
def test_a_swapped_hold_out_set_promotes_nothing(world, monkeypatch, capsys, attack):
    """This run's data job writes the hold-out set and seals its manifest; a job of another run then swaps the
    files and the manifest for easy ones (the job role writes ``data/``), and, in the second attack, replaces this
    data job's sealed copy with one sealed by its own key. The evaluation, honest, judges on what it finds and names
    that manifest in its verdict, sealed with its own key: 0.97, a pass on the wrong data."""
    case = Case(world, monkeypatch, "holdout " + attack)
    data_key = job_key(job_name(case.dag_id, "prepare_holdout", run_id()))
    judged = case.put_holdout(HOLDOUT_FILES, data_key)
    if attack != "none":
        judged = case.put_holdout(EASY_FILES)
    if attack == "seal replaced by another run's job":
        record = holdout.manifest(EASY_FILES)
        other_key = job_key(job_name(case.dag_id, "prepare_holdout", OTHER_RUN))
        seal = f"{case.holdout}/{boundary.HOLDOUT_SEALS_DIR}/{boundary.key_id(data_key)}.json"
        case.put(seal, {**record, boundary.SEAL_FIELD: boundary.seal(record, other_key)})
    case.put_verdict(verdict(case.model_uri, 0.97, evaluation_key(case.dag_id), **{VERDICT_FIELD: judged}))
    if attack == "none":
        assert (case.register(with_holdout=True), case.registered()) == (PASSED, True)
    else:
        assert (case.register(with_holdout=True), case.registered()) == (REFUSED, False)
        why = "the hold-out files were replaced" if attack == "files and manifest swapped" else "not sealed by data job"
        assert refused_for(capsys, why)
