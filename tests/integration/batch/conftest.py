"""Fixtures for the Batch tests: a job queue in the moto server and a ``trainium`` connection naming it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import MOTO_REGION, set_trainium_connection
from tests.integration.batch import moto_batch
from tests.integration.conftest import EXECUTION_ROLE_ARN, JOB_ROLE_ARN, efa_network, register_image

REPOSITORY = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium"
#: Jobs run only digest-pinned images of the connection's repository.
IMAGE = f"{REPOSITORY}@sha256:{'cd' * 32}"
LOG_GROUP = "/trainium/jobs"
QUEUE = "trn-queue"
#: Remote compute only takes S3 locations.
ARTIFACT_ROOT = "s3://trainium-test-artifacts/trainium"


@dataclass
class BatchEnv:
    config: Any  # TrainiumConfig
    batch: Any  # boto3 Batch client through the Airflow AWS connection
    logs: Any
    region: str = MOTO_REGION
    queue: str = QUEUE
    log_group: str = LOG_GROUP

    def backend(self, **options: Any) -> Any:
        from airflow_provider_trainium.compute.batch.backend import BatchBackend

        options.setdefault("poll_interval", 0.2)
        options.setdefault("log_interval", 0.0)
        return BatchBackend(self.config, **options)


@pytest.fixture
def batch_env(aws_conn_id: str, monkeypatch: pytest.MonkeyPatch) -> BatchEnv:
    """A Batch queue in moto and the rest of what the base stack makes (bucket, network with the EFA self rules,
    roles, the image in ECR), with ``trainium_default`` as ``airflow trainium configure`` would write it."""
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook
    from airflow.providers.amazon.aws.hooks.ecr import EcrHook
    from airflow.providers.amazon.aws.hooks.logs import AwsLogsHook
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    from airflow_provider_trainium.hooks.batch import TrainiumBatchHook
    from airflow_provider_trainium.hooks.trainium import TrainiumHook

    batch = TrainiumBatchHook(aws_conn_id=aws_conn_id, region_name=MOTO_REGION).client
    logs = AwsLogsHook(aws_conn_id=aws_conn_id, region_name=MOTO_REGION).conn
    iam = AwsBaseHook(aws_conn_id=aws_conn_id, client_type="iam").conn
    moto_batch.create_queue(batch, iam, QUEUE)
    queues = {t: QUEUE for t in ("trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge")}
    S3Hook(aws_conn_id=aws_conn_id, region_name=MOTO_REGION).create_bucket(ARTIFACT_ROOT.split("/")[2])
    subnet, group = efa_network(AwsBaseHook(aws_conn_id=aws_conn_id, client_type="ec2", region_name=MOTO_REGION).conn)
    register_image(EcrHook(aws_conn_id=aws_conn_id, region_name=MOTO_REGION).conn, IMAGE)
    set_trainium_connection(
        monkeypatch,
        aws_conn_id=aws_conn_id,
        region_name=MOTO_REGION,
        artifact_root=ARTIFACT_ROOT,
        batch_job_queues=queues,
        image=IMAGE,
        ecr_repository=REPOSITORY,
        log_group=LOG_GROUP,
        job_role_arn=JOB_ROLE_ARN,
        ecs_execution_role_arn=EXECUTION_ROLE_ARN,
        subnets=[subnet],
        security_groups=[group],
    )
    return BatchEnv(TrainiumHook().get_config(), batch, logs)


class CallCounter:
    """Counts API calls a botocore client makes (event hooks on the client itself, no patching)."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    def __call__(self, model: Any, **_: Any) -> None:
        self.calls[model.name] = self.calls.get(model.name, 0) + 1

    def attach(self, client: Any) -> CallCounter:
        client.meta.events.register("before-call.batch", self)
        return self

    def __getitem__(self, name: str) -> int:
        return self.calls.get(name, 0)
