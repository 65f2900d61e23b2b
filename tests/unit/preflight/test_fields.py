"""A preflight rule that needs no AWS: the connection fields the backend reads."""

from __future__ import annotations

from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.preflight.fields import missing_fields
from airflow_provider_trainium.preflight.layout import Layout

TWO_NODES = Layout(instance_type="trn1.32xlarge", nodes=2, compute="batch", image=None)


def test_missing_fields_name_what_the_backend_reads():
    config = TrainiumConfig(configured=True, artifact_root="file:///tmp/x", region_name="us-east-1")
    missing = missing_fields(config, TWO_NODES)
    assert "artifact_root on s3:// (it is file:///tmp/x)" in missing
    assert "batch_job_queues[trn1.32xlarge]" in missing and "ecs_cluster" not in missing
    assert "region_name" not in missing
