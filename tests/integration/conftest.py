"""Fixtures of the integration tests (moto server, dag.test()); the moto server itself is in tests/conftest.py."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests


@pytest.fixture
def moto_requests(
    moto_reset: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """Every request the moto server receives from now on, read through moto's recorder API.

    The recorder appends to ``moto_recording`` in the server's working directory: the test's own tmp_path.
    """
    monkeypatch.chdir(tmp_path)
    requests.post(f"{moto_reset}/moto-api/recorder/reset-recording", timeout=10).raise_for_status()
    requests.post(f"{moto_reset}/moto-api/recorder/start-recording", timeout=10).raise_for_status()

    def recorded() -> list[dict[str, Any]]:
        response = requests.get(f"{moto_reset}/moto-api/recorder/download-recording", timeout=10)
        response.raise_for_status()
        return [json.loads(line) for line in response.text.splitlines() if line.strip()]

    yield recorded
    requests.post(f"{moto_reset}/moto-api/recorder/stop-recording", timeout=10).raise_for_status()


@pytest.fixture(scope="module")
def llama_data_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A small synthetic Llama data set with its own newly trained tokenizer, made once per test module: what
    the Llama, TorchTitan and stream tests train on (both stacks; the import waits for the fixture's use)."""
    from trainium_trainer.llama.data import prepare

    root = tmp_path_factory.mktemp("llama-data")
    prepare(str(root / "data"), synthetic_date="2026-01-01", tokenizer_uri=str(root / "tokenizer.json"),
            train_new_tokenizer=True)  # fmt: skip
    return str(root / "data")


def trainer_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """For a fixture (``yield from``): the AWS_* environment a trainer gets, pointing at the moto server of the
    ``aws_moto`` connection, and a bucket ``runs`` there; yields an S3 client. fsspec's cached S3 clients are
    dropped on the way in (a fresh one sees this test's environment) and out."""
    import boto3
    import fsspec

    from tests.conftest import MOTO_REGION

    endpoint = json.loads(os.environ["AIRFLOW_CONN_AWS_MOTO"])["extra"]["endpoint_url"]
    for key, value in {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
                       "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": MOTO_REGION}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    fsspec.filesystem("s3").clear_instance_cache()
    client = boto3.client("s3", endpoint_url=endpoint, region_name=MOTO_REGION)
    client.create_bucket(Bucket="runs")
    yield client
    fsspec.filesystem("s3").clear_instance_cache()


@pytest.fixture
def artifact_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's tmp_path as the artifact root of ``trainium_default`` (defined through the environment)."""
    from tests.conftest import set_trainium_connection

    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    return tmp_path


def calls(recorded: list[dict[str, Any]], *, path: str | None = None, target: str | None = None) -> int:
    """How many recorded requests went to a REST ``path`` (Batch) or a JSON ``X-Amz-Target`` action (ECS)."""
    count = 0
    for entry in recorded:
        url = str(entry.get("url", ""))
        headers = {k.lower(): v for k, v in (entry.get("headers") or {}).items()}
        if (path and url.split("?")[0].endswith(path)) or (target and headers.get("x-amz-target", "").endswith(target)):
            count += 1
    return count


#: The roles the base stack creates, as the trainium connection names them.
JOB_ROLE_ARN = "arn:aws:iam::123456789012:role/trainium-job"
EXECUTION_ROLE_ARN = "arn:aws:iam::123456789012:role/trainium-execution"


def efa_network(ec2: Any) -> tuple[str, str]:
    """A subnet and a security group that allows all traffic to and from itself (what EFA needs), as the base
    stack makes them: (subnet id, group id)."""
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.1.0.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="trainium-nodes", Description="trainium nodes", VpcId=vpc)["GroupId"]
    self_rule = [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group}]}]
    ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=self_rule)
    ec2.authorize_security_group_egress(GroupId=group, IpPermissions=self_rule)
    return subnet, group


def register_image(ecr: Any, image: str) -> None:
    """Put ``image`` (``<account>.dkr.ecr.<region>.amazonaws.com/<name>@sha256:...``) into the moto server's
    ECR under exactly that digest, as a push would: preflight then finds it."""
    repository, _, digest = image.partition("@")
    name = repository.split("/", 1)[1]
    with contextlib.suppress(ecr.exceptions.RepositoryAlreadyExistsException):
        ecr.create_repository(repositoryName=name)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 2, "digest": digest},
        "layers": [],
    }
    ecr.put_image(repositoryName=name, imageManifest=json.dumps(manifest), imageDigest=digest)
