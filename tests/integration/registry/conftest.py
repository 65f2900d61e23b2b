"""Registry fixtures: the same tests run on a local root and on a moto S3 bucket."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from airflow.sdk import ObjectStoragePath

from airflow_provider_trainium.registry import ModelRegistry

BUCKET = "trainium-registry-test"


@dataclass
class Backend:
    name: str
    root_uri: str
    conn_id: str | None
    scratch_uri: str  # where the tests write fake trained-model directories

    def path(self, uri: str) -> ObjectStoragePath:
        return ObjectStoragePath(uri, conn_id=self.conn_id if uri.startswith("s3://") else None)


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path) -> Backend:
    if request.param == "local":
        return Backend("local", (tmp_path / "root").as_uri(), None, (tmp_path / "runs").as_uri())
    conn_id = request.getfixturevalue("aws_conn_id")
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    S3Hook(aws_conn_id=conn_id).create_bucket(BUCKET)
    return Backend("s3", f"s3://{BUCKET}/registry", conn_id, f"s3://{BUCKET}/runs")


@pytest.fixture
def registry(backend: Backend) -> ModelRegistry:
    return ModelRegistry(backend.root_uri, backend.conn_id)


TrainedDir = Callable[..., tuple[str, dict[str, bytes]]]


@pytest.fixture
def trained_dir(backend: Backend) -> TrainedDir:
    """Writes a fake trained-model directory (small files, no torch) and returns (uri, {path: bytes})."""
    counter = iter(range(1_000_000))

    def make(seed: str = "a", metrics: dict | None = None, extra: dict[str, bytes] | None = None):
        uri = f"{backend.scratch_uri}/run-{next(counter)}-{seed}"
        files = {
            "model.safetensors": hashlib.sha256(seed.encode()).digest() * 64,
            "model_config.json": json.dumps({"architecture": "mlp", "hidden": [120, 84]}).encode(),
            "metrics.json": json.dumps(
                metrics
                if metrics is not None
                else {
                    "accuracy": 0.93,
                    "steps": 100,
                    "torch_version": "2.9.0",
                    "software": {"neuron_sdk": "2.31.0", "trainer_revision": "abc123"},
                    "history": [{"step": i, "loss": 1.0 / (i + 1)} for i in range(50)],
                }
            ).encode(),
            "_SUCCESS": json.dumps({"job_hash": f"job-{seed}"}).encode(),
            "tokenizer/vocab.txt": f"vocab {seed}\n".encode(),
            **(extra or {}),
        }
        root = backend.path(uri)
        for rel, data in files.items():
            target = root / rel
            if backend.name == "local":
                os.makedirs(os.path.dirname(target.path), exist_ok=True)
            target.write_bytes(data)
        return uri, files

    return make


def serialize_dags(*dags, unpause: bool = False) -> None:
    """Write DAGs defined in a test to the metadata DB, as parsing the DAGs folder would."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.collection import update_dag_parsing_results_in_db
    from airflow.serialization.serialized_objects import LazyDeserializedDAG
    from airflow.utils.session import create_session

    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)
    with create_session() as session:
        update_dag_parsing_results_in_db(
            "dags-folder",
            None,
            [LazyDeserializedDAG.from_dag(d) for d in dags],
            {},
            None,
            set(),
            session=session,
        )
    if unpause:  # new DAGs start paused, and paused DAGs are not queued by asset events
        from airflow.models.dag import DagModel
        from sqlalchemy import update

        with create_session() as session:
            ids = [dag.dag_id for dag in dags]
            session.execute(update(DagModel).where(DagModel.dag_id.in_(ids)).values(is_paused=False))


def run_dag(dag, **kwargs):
    """``dag.test()`` for a DAG defined in a test: Airflow 3.3 only runs DAGs serialized in the
    metadata DB, so write this one there first."""
    serialize_dags(dag)
    return dag.test(**kwargs)
