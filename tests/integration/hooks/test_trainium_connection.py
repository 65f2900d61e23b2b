import pytest

from airflow_provider_trainium.compute.backends import resolve_compute
from airflow_provider_trainium.hooks.trainium import TrainiumConfig, TrainiumHook
from tests.conftest import set_trainium_connection


def test_no_connection_means_local_compute_under_airflow_home(monkeypatch, tmp_path):
    monkeypatch.delenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", raising=False)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    config = TrainiumHook().get_config()
    assert not config.configured
    assert config.artifact_root == (tmp_path / "trainium").as_uri()
    assert resolve_compute("auto", config, 4) == "local"


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
    assert (resolve_compute("auto", config, 1), resolve_compute("auto", config, 2)) == ("ecs", "batch")


def test_unknown_extra_fields_are_named():
    with pytest.raises(ValueError, match=r"unknown extra fields \['ecs_clustr'\]; allowed:"):
        TrainiumConfig.from_extra({"ecs_clustr": "x"})


def test_connection_test_finds_cluster_queues_bucket_and_repository(aws_conn_id, monkeypatch):
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    from tests.integration.batch import moto_batch

    def client(kind: str):
        return AwsBaseHook(aws_conn_id=aws_conn_id, client_type=kind, region_name="us-east-1").conn

    client("ecs").create_cluster(clusterName="trainium")
    moto_batch.create_queue(client("batch"), client("iam"), "trn-queue")
    client("s3").create_bucket(Bucket="artifacts")
    client("ecr").create_repository(repositoryName="trainium/train")
    extra = {
        "aws_conn_id": aws_conn_id,
        "region_name": "us-east-1",
        "ecs_cluster": "trainium",
        "batch_job_queues": {"trn1.32xlarge": "trn-queue"},
        "artifact_root": "s3://artifacts/prefix",
        "ecr_repository": "trainium/train",
    }
    set_trainium_connection(monkeypatch, **extra)
    ok, message = TrainiumHook().test_connection()
    assert ok, message
    assert "ECS cluster trainium" in message and "ECR repository trainium/train" in message

    wrong = {**extra, "ecs_cluster": "gone", "batch_job_queues": {"trn1.2xlarge": "nope"}}
    set_trainium_connection(monkeypatch, **{**wrong, "artifact_root": "s3://no-bucket/x", "ecr_repository": "x/y"})
    ok, message = TrainiumHook().test_connection()
    assert not ok
    for problem in ("ECS cluster gone", "nope (trn1.2xlarge) not found", "bucket no-bucket", "'x/y' does not exist"):
        assert problem in message


def test_connection_test_reports_bad_extras_without_calling_aws(monkeypatch):
    set_trainium_connection(monkeypatch, artifact_root="gs://bucket")
    ok, message = TrainiumHook().test_connection()
    assert not ok and "artifact_root" in message


def test_connection_test_without_aws_resources_passes(monkeypatch, tmp_path):
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    assert TrainiumHook().test_connection() == (True, "no AWS resources configured (local compute)")
