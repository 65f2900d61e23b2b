import pytest

from airflow_provider_trainium.hooks.trainium import TrainiumConfig, TrainiumHook
from tests.conftest import set_trainium_connection


def test_no_connection_means_local_compute_under_airflow_home(monkeypatch, tmp_path):
    monkeypatch.delenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", raising=False)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    config = TrainiumHook().get_config()
    assert not config.configured
    assert config.artifact_root == (tmp_path / "trainium").as_uri()
    assert config.default_compute(nodes=4) == "local"


def test_connection_extras_become_the_config(monkeypatch):
    set_trainium_connection(
        monkeypatch,
        artifact_root="s3://bucket/prefix",
        subnets="subnet-a, subnet-b",
        security_groups=["sg-1"],
        batch_job_queues={"trn1.32xlarge": "q1"},
        image_builder="codebuild",
    )
    config = TrainiumHook().get_config()
    assert config.configured and config.artifact_root == "s3://bucket/prefix"
    assert config.subnets == ("subnet-a", "subnet-b") and config.security_groups == ("sg-1",)
    assert config.batch_job_queues == {"trn1.32xlarge": "q1"}
    assert config.image_builder == "codebuild"
    assert (config.default_compute(1), config.default_compute(2)) == ("ecs", "batch")


def test_unknown_extra_fields_are_named():
    with pytest.raises(ValueError, match=r"unknown extra fields \['ecs_clustr'\]; allowed:"):
        TrainiumConfig.from_extra({"ecs_clustr": "x"})
