"""The backend table: choices, the auto policy, the factory and each backend's declared capabilities."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_provider_trainium.compute import backends as table
from airflow_provider_trainium.compute.base import NEURON_PARALLEL_COMPILE
from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.neuron.spec import JobSpec

CONFIGURED = TrainiumConfig(configured=True, ecs_cluster="c", subnets=("s",), log_group="/g", image="i")


@pytest.fixture
def extra_backend() -> Iterator[table.BackendEntry]:
    entry = table.register_backend(
        table.BackendEntry("sagemaker", "tests.unit.compute.test_backends:NoSuchClass", description="elsewhere")
    )
    yield entry
    table.unregister_backend(entry.name)


def test_the_param_the_choices_and_the_factory_come_from_one_table(extra_backend):
    from airflow_provider_trainium.params import compute_param, layout_params

    assert table.compute_choices() == ["auto", "local", "ecs", "batch", "sagemaker"]
    assert layout_params()["compute"].schema["enum"] == table.compute_choices()
    assert compute_param(only={"local", "batch"}).schema["enum"] == ["auto", "local", "batch"]
    assert "sagemaker: elsewhere" in compute_param().description
    assert table.resolve_compute("SageMaker ", CONFIGURED, 1) == "sagemaker"


def test_auto_is_local_without_a_connection_else_ecs_for_one_node_and_batch_for_more():
    local = TrainiumConfig()
    assert [table.resolve_compute("auto", local, n) for n in (1, 4)] == ["local", "local"]
    assert [table.resolve_compute(None, CONFIGURED, n) for n in (1, 2, 16)] == ["ecs", "batch", "batch"]


def test_an_unknown_compute_names_every_choice():
    with pytest.raises(ValueError, match="'k8s' is not one of: auto, local, ecs, batch"):
        table.resolve_compute("k8s", CONFIGURED, 1)
    with pytest.raises(ValueError, match="identifier other than 'auto'"):
        table.register_backend(table.BackendEntry("auto", "x:Y"))


def test_each_backend_declares_what_it_can_do(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    local = table.build_backend("local", TrainiumConfig(), {"local_max_processes_per_node": 3})
    ecs = table.build_backend("ecs", CONFIGURED)
    batch = table.build_backend("batch", CONFIGURED)
    assert (local.defers, ecs.defers, batch.defers) == (False, True, True)
    assert (local.runs_image, ecs.runs_image, batch.runs_image) == (False, True, True)
    assert local.compile_wrapper() == () and batch.compile_wrapper() == ecs.compile_wrapper() == (
        NEURON_PARALLEL_COMPILE,
    )
    assert local.max_processes_per_node == 3 and local.state_dir == tmp_path / "trainium-local"
    spec = JobSpec(name="t", entry_point="m", instance_type="trn1.32xlarge", image="repo@sha256:" + "a" * 64)
    assert local.runs_as(spec).nproc_per_node == 3 and batch.runs_as(spec).nproc_per_node == 32
    assert batch.compiler_version(spec) == f"image:{spec.image}"
    assert ecs.job_environment("s3://b/cache") == {"NEURON_COMPILE_CACHE_URL": "s3://b/cache"}
    assert local.job_environment("file:///cache") == {}  # torch-xla's own cache; no S3 credentials needed
    assert {type(link).__name__ for link in table.backend_links("ecs")} == {"EcsTaskLink", "EcsTaskLogLink"}
    assert table.backend_links("local") == ()


def test_checks_run_before_any_call():
    ecs = table.build_backend("ecs", CONFIGURED)
    with pytest.raises(ValueError, match="runs one instance per job"):
        ecs.check(JobSpec(name="t", entry_point="m", instance_type="trn1.32xlarge", nodes=2, image="i"))


def test_local_jobs_get_aws_credentials_only_when_they_may_reach_s3():
    from airflow_provider_trainium.compute.local.backend import LocalBackend

    def conn(**extra) -> str | None:
        config = TrainiumConfig(configured=True, aws_conn_id="aws_team", **extra)
        return LocalBackend.from_config(config, {}).aws_conn_id

    assert conn(artifact_root="file:///tmp/artifacts") is None
    assert conn(artifact_root="s3://bucket/artifacts") == "aws_team"
    # a base model or data set on S3, read from a prefix the connection allows, with a local artifact root
    assert conn(artifact_root="file:///tmp/artifacts", allowed_input_prefixes=("s3://models/",)) == "aws_team"
