"""Container registry failures stop the pipeline before anything is built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_provider_trainium.image.builders.buildah import BuildahBuilder
from airflow_provider_trainium.image.container_registry import EcrRegistry, OciRegistry
from airflow_provider_trainium.image.context import BuildContext
from airflow_provider_trainium.image.ensure import ensure_image
from airflow_provider_trainium.image.errors import ContainerRegistryError, ContainerRegistryUnreachable
from tests.conftest import free_port
from tests.integration.image.conftest import CountingBuilder, write_tree


@pytest.fixture
def context(tmp_path: Path) -> BuildContext:
    return BuildContext.load(write_tree(tmp_path, {"Dockerfile": "FROM scratch\nCOPY a /a\n", "a": "x"}))


def test_unreachable_oci_registry_fails_before_any_build(context: BuildContext) -> None:
    builder = CountingBuilder(BuildahBuilder())
    registry = OciRegistry(f"127.0.0.1:{free_port()}/trainium/x", insecure=True, timeout=2)
    with pytest.raises(ContainerRegistryUnreachable, match=r"registry 127\.0\.0\.1:\d+ is unreachable"):
        ensure_image(context, registry, builder)
    assert builder.calls == 0


def test_unreachable_ecr_endpoint_fails_before_any_build(
    context: BuildContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = {
        "endpoint_url": f"http://127.0.0.1:{free_port()}",
        "region_name": "us-east-1",
        "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2},
    }
    conn = {"conn_type": "aws", "login": "testing", "password": "testing", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DOWN", json.dumps(conn))
    builder = CountingBuilder(BuildahBuilder())
    with pytest.raises(ContainerRegistryUnreachable, match="ECR endpoint unreachable during DescribeRepositories"):
        ensure_image(context, EcrRegistry("trainium/train", aws_conn_id="aws_down"), builder)
    assert builder.calls == 0


@pytest.mark.parametrize(
    ("repository", "message"),
    [("trainium", "must be HOST"), ("registry.local/Upper", "not a valid OCI repository name")],
)
def test_malformed_oci_repository(repository: str, message: str) -> None:
    with pytest.raises(ContainerRegistryError, match=message):
        OciRegistry(repository)
