"""The trust rule under a connection: its repository pinned by digest, or an image the DAG run built."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from airflow_provider_trainium.neuron.images import UntrustedImageError, check_trusted

REPOSITORY = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium"
PINNED = f"{REPOSITORY}@sha256:{'ab' * 32}"


@dataclass(frozen=True)
class Connection:
    ecr_repository: str | None = "trainium"
    region_name: str | None = "us-east-1"
    job_role_arn: str | None = "arn:aws:iam::123456789012:role/job"
    ecs_execution_role_arn: str | None = None


def test_the_connections_repository_pinned_by_digest_is_trusted():
    check_trusted(PINNED, Connection())


def test_a_tag_is_refused_unless_the_run_built_it():
    with pytest.raises(UntrustedImageError, match="not pinned by digest"):
        check_trusted(f"{REPOSITORY}:latest", Connection())
    check_trusted("registry.example/own:latest", Connection(ecr_repository=None), built=["registry.example/own:latest"])
