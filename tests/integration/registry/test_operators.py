"""The Airflow faces in real ``dag.test()`` runs: asset event and extra, XCom, promotion, sensor, retry."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timedelta

import pytest
from airflow.sdk import DAG, Asset

from airflow_provider_trainium.operators.registry import (
    TrainiumPromoteModelAliasOperator,
    TrainiumRegisterModelOperator,
)
from airflow_provider_trainium.registry.assets import model_asset, openlineage_id
from airflow_provider_trainium.sensors.registry import TrainiumRegisteredModelSensor
from airflow_provider_trainium.triggers.registry import TrainiumRegisteredModelTrigger
from tests.integration.registry.conftest import run_dag, serialize_dags

START = datetime(2026, 11, 1)


def _xcom(dag_run, task_id):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalar(
            XComModel.__table__.select()
            .with_only_columns(XComModel.value)
            .where(
                XComModel.dag_id == dag_run.dag_id,
                XComModel.run_id == dag_run.run_id,
                XComModel.task_id == task_id,
                XComModel.key == "return_value",
            )
        )
    return XComModel.deserialize_value(type("X", (), {"value": row})()) if row is not None else None


def _asset_events(uri, dag_run):
    """Events on ``uri`` emitted by ``dag_run`` (the metadata DB outlives single tests)."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        events = session.scalars(
            select(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(
                AssetModel.uri == uri,
                AssetEvent.source_dag_id == dag_run.dag_id,
                AssetEvent.source_run_id == dag_run.run_id,
            )
        ).all()
        return [(e.source_dag_id, e.source_run_id, dict(e.extra)) for e in events]


def _queued_for(dag_id):
    from airflow.models.asset import AssetDagRunQueue, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return list(
            session.scalars(
                select(AssetModel.uri)
                .join(AssetDagRunQueue, AssetDagRunQueue.asset_id == AssetModel.id)
                .where(AssetDagRunQueue.target_dag_id == dag_id)
            )
        )


def _states(dag_run):
    return {ti.task_id: ti.state for ti in dag_run.get_task_instances()}


@pytest.fixture
def local_root(tmp_path):
    return (tmp_path / "root").as_uri()


def test_register_emits_asset_event_with_version_and_metrics(backend, trained_dir):
    source, _ = trained_dir("a")
    dag_id = f"registry_asset_{backend.name}"
    # the one model in the backend's registry, for each of the three tasks
    model = {"model_name": "mnist-mlp", "artifact_root": backend.root_uri, "aws_conn_id": backend.conn_id}
    with DAG(dag_id, schedule=None, start_date=START, params={"lr": 0.01, "epochs": 2}) as dag:
        register = TrainiumRegisterModelOperator(
            task_id="register",
            source_uri="{{ params.source }}",
            image="repo/trainium@sha256:" + "cd" * 32,
            promote_alias="staging",
            promote_manual_runs=True,
            require_evaluation=False,  # no evaluation in this DAG: the author says so
            params={"source": source},
            **model,
        )
        promote = TrainiumPromoteModelAliasOperator(
            task_id="promote",
            alias="production",
            version=register.output,
            reason="accuracy above 0.9",
            require_evaluation=False,
            **model,
        )
        wait = TrainiumRegisteredModelSensor(
            task_id="wait_production", alias="production", poke_interval=1, timeout=60, **model
        )
        register >> promote >> wait
    with DAG(f"evaluate_{backend.name}", schedule=[model_asset("mnist-mlp")], start_date=START) as downstream:
        pass
    serialize_dags(downstream, unpause=True)

    run = run_dag(dag)
    assert _states(run) == {"register": "success", "promote": "success", "wait_production": "success"}
    result = _xcom(run, "register")
    assert result == {
        "name": "mnist-mlp",
        "version": 1,
        "uri": f"{backend.root_uri}/models/mnist-mlp/versions/1/files",
        "manifest_uri": f"{backend.root_uri}/models/mnist-mlp/versions/1/manifest.json",
        "created": True,
    }
    events = _asset_events("x-trainium-model://mnist-mlp", run)
    assert len(events) == 1
    source_dag, source_run, extra = events[0]
    assert (source_dag, source_run) == (dag_id, run.run_id)
    assert extra["version"] == 1 and extra["created"] is True
    assert extra["uri"] == result["uri"]
    assert extra["registry"] == backend.root_uri
    assert extra["metrics"] == {"accuracy": 0.93, "steps": 100, "torch_version": "2.9.0"}
    assert _xcom(run, "wait_production")["version"] == 1
    assert _queued_for(downstream.dag_id) == ["x-trainium-model://mnist-mlp"]  # the consumer DAG is due

    from airflow_provider_trainium.registry import ModelRegistry

    registry = ModelRegistry(backend.root_uri, backend.conn_id)
    manifest = registry.get_version("mnist-mlp", 1).manifest
    assert manifest["source"]["dag_id"] == dag_id
    assert manifest["source"]["run_id"] == run.run_id
    assert manifest["source"]["task_id"] == "register"
    assert manifest["source"]["try_number"] == 1
    assert manifest["params"] == {"lr": 0.01, "epochs": 2, "source": source}
    assert manifest["image"]["digest"] == "sha256:" + "cd" * 32
    assert registry.get_alias("mnist-mlp", "staging").version == 1
    production = registry.get_alias("mnist-mlp", "production")
    assert production.version == 1 and production.reason == "accuracy above 0.9"
    assert production.moved_by["task_id"] == "promote"

    # A second run with the same trained files: no new version, but an event saying so.
    second = run_dag(dag)
    assert _xcom(second, "register")["version"] == 1
    assert _xcom(second, "register")["created"] is False
    assert [e[2]["created"] for e in _asset_events("x-trainium-model://mnist-mlp", second)] == [False]
    assert registry.list_versions("mnist-mlp") == [1]


class FailsAfterRegistering(TrainiumRegisterModelOperator):
    """The worker dies after the manifest is written, on the first try only."""

    def execute(self, context):
        result = super().execute(context)
        if context["ti"].try_number == 1:
            raise RuntimeError("lost the worker after registering")
        return result


def test_retry_of_the_same_task_is_a_noop(local_root, tmp_path):
    """Storage-independent (the registry tests cover both stores), so run on a local root only."""
    source = tmp_path / "run"
    source.mkdir()
    (source / "model.safetensors").write_bytes(b"\x01" * 64)
    (source / "metrics.json").write_text('{"accuracy": 0.9}')
    with DAG("registry_retry", schedule=None, start_date=START) as dag:
        FailsAfterRegistering(
            task_id="register",
            model_name="m",
            source_uri=str(source),
            artifact_root=local_root,
            require_evaluation=False,
            retries=1,
            retry_delay=timedelta(0),
        )
    run = run_dag(dag)
    assert _states(run) == {"register": "success"}
    from airflow_provider_trainium.registry import ModelRegistry

    registry = ModelRegistry(local_root)
    assert registry.list_versions("m") == [1]
    assert _xcom(run, "register")["created"] is False  # the retry found the version its first try published
    assert registry.get_version("m", 1).manifest["source"]["try_number"] == 1


def test_model_asset_is_one_per_model():
    assert model_asset("mnist-mlp") == Asset(
        name="x-trainium-model://mnist-mlp", uri="x-trainium-model://mnist-mlp", group="model"
    )
    assert model_asset("mnist-mlp") != model_asset("llama2-7b")
    register = TrainiumRegisterModelOperator(task_id="r", model_name="mnist-mlp", source_uri="s3://b/run")
    assert model_asset("mnist-mlp") in register.outlets


def test_bad_inputs_fail_at_parse_time():
    with pytest.raises(ValueError, match="invalid model name"):
        TrainiumRegisterModelOperator(task_id="r", model_name="Bad Name", source_uri="s3://b/x")
    with pytest.raises(ValueError, match="version or alias"):
        TrainiumRegisteredModelSensor(task_id="w", model_name="m", version=1, alias="production")


def test_trigger_fires_when_a_newer_version_arrives(registry, backend, trained_dir):
    registry.register("m", trained_dir("a")[0])
    trigger = TrainiumRegisteredModelTrigger(
        model_name="m",
        artifact_root=backend.root_uri,
        conn_id=backend.conn_id,
        newer_than=1,
        poke_interval=0.05,
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_provider_trainium.triggers.registry.TrainiumRegisteredModelTrigger"
    assert TrainiumRegisteredModelTrigger(**kwargs).serialize() == (classpath, kwargs)
    assert trigger.check() is None  # version 1 is not newer than 1
    newer, _ = trained_dir("b")

    async def wait_while_registering():
        registering = threading.Thread(target=registry.register, args=("m", newer))
        events = trigger.run()
        first = asyncio.ensure_future(events.__anext__())
        registering.start()
        event = await asyncio.wait_for(first, timeout=60)
        registering.join()
        return event

    event = asyncio.run(wait_while_registering())
    assert event.payload["status"] == "success"
    assert event.payload["model"]["version"] == 2
    assert event.payload["model"]["metrics"]["accuracy"] == 0.93


def test_trigger_reports_errors_as_events(tmp_path):
    trigger = TrainiumRegisteredModelTrigger(model_name="m", artifact_root="gs://nope/x", poke_interval=0.01)

    async def first():
        return await trigger.run().__anext__()

    event = asyncio.run(first())
    assert event.payload["status"] == "error"
    assert "unsupported URI" in event.payload["message"]


def test_openlineage_dataset_names():
    assert openlineage_id("s3://bucket/models/m/versions/1/files") == (
        "s3://bucket",
        "models/m/versions/1/files",
    )
    assert openlineage_id("file:///data/mnist") == ("file", "/data/mnist")
