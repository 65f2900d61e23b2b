"""The ``capacity`` check on answers AWS could give and the moto deployment does not: an account with only AWS's
default quota, usage points out of order, and a queue of several compute environments.

Service Quotas and CloudWatch are real botocore clients under a ``Stubber`` (in process, shapes checked against
the service model); the Batch queue's environments are handed in as ``DescribeComputeEnvironments`` lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.session
import pytest
from botocore.stub import Stubber

from airflow_provider_trainium.compute import capacity as rules
from airflow_provider_trainium.compute.capacity import Quota, quota_usage
from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.preflight import batch
from airflow_provider_trainium.preflight import capacity as check
from airflow_provider_trainium.preflight.capacity import check_capacity
from airflow_provider_trainium.preflight.layout import Layout
from tests.integration.moto_quotas import trn_quota

CONFIG = TrainiumConfig(configured=True, region_name="us-east-1", batch_job_queues={"trn1.32xlarge": "q"})
TWO_NODES = Layout(instance_type="trn1.32xlarge", nodes=2, compute="batch", image=None)  # 256 vCPUs
USAGE = trn_quota(0)["UsageMetric"]


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], Stubber]]:
    """The stubbed client ``compute.capacity`` gets for each service, made on first use."""
    stubs: dict[str, Stubber] = {}

    def stub(service: str) -> Stubber:
        if service not in stubs:
            client = botocore.session.get_session().create_client(
                service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
            )
            stubs[service] = Stubber(client)
            stubs[service].activate()
        return stubs[service]

    monkeypatch.setattr(rules, "_client", lambda _config, service: stub(service).client)
    yield stub
    for stubber in stubs.values():
        stubber.assert_no_pending_responses()


def on_queue(monkeypatch: pytest.MonkeyPatch, *environments: dict[str, Any]) -> None:
    """Queue ``q`` of ``environments``, under a quota of 512 vCPUs none of which is in use."""
    monkeypatch.setattr(batch, "queue_environments", lambda _config, _name: list(environments))
    monkeypatch.setattr(check, "trn_quota", lambda _config: Quota("Running On-Demand Trn instances", "L-2C3B7624", 512))


def environment(name: str, max_vcpus: int, desired: int = 0) -> dict[str, Any]:
    return {"computeEnvironmentName": name, "computeResources": {"maxvCpus": max_vcpus, "desiredvCpus": desired}}


def test_an_account_with_no_applied_quota_is_checked_against_the_aws_default(aws):
    quotas = aws("service-quotas")
    quotas.add_client_error("get_service_quota", "NoSuchResourceException", http_status_code=400)
    default = {k: v for k, v in trn_quota(128).items() if k != "UsageMetric"}
    quotas.add_response("list_aws_default_service_quotas", {"Quotas": [default]}, {"ServiceCode": "ec2"})
    result = check_capacity(CONFIG, Layout(instance_type="trn1.32xlarge", nodes=2, compute="ecs", image=None))
    assert result.status == "error", result
    assert "2 x trn1.32xlarge need 256 vCPUs, more than the account's quota" in result.reason
    assert "(L-2C3B7624) of 128 vCPUs" in result.reason


def test_an_applied_quota_wins_over_the_aws_default(aws):
    aws("service-quotas").add_response("get_service_quota", {"Quota": {**trn_quota(512), "UsageMetric": {}}})
    assert rules.trn_quota(CONFIG) == Quota("Running On-Demand Trn instances", "L-2C3B7624", 512.0)


def test_usage_is_the_newest_datapoint_whatever_order_cloudwatch_lists_them_in(aws):
    now = datetime.now(UTC)
    points = [
        {"Timestamp": now - timedelta(minutes=5), "Maximum": 128.0},
        {"Timestamp": now - timedelta(minutes=1), "Maximum": 384.0},
        {"Timestamp": now - timedelta(minutes=10), "Maximum": 256.0},
    ]
    aws("cloudwatch").add_response("get_metric_statistics", {"Datapoints": points})
    assert quota_usage(CONFIG, USAGE) == 384.0


def test_an_environment_whose_max_vcpus_equals_the_need_holds_the_layout(monkeypatch):
    on_queue(monkeypatch, environment("exact", 256))
    result = check_capacity(CONFIG, TWO_NODES)
    assert result.status == "ok", result
    assert result.reason.startswith("256 vCPUs for 2 x trn1.32xlarge, within quota 512 (0 in use)")


def test_one_environment_that_holds_the_layout_is_enough(monkeypatch):
    on_queue(monkeypatch, environment("small", 128), environment("large", 512))
    assert check_capacity(CONFIG, TWO_NODES).status == "ok"


def test_the_layout_waits_only_when_every_environment_that_holds_it_is_busy(monkeypatch):
    on_queue(monkeypatch, environment("busy", 512, desired=384), environment("idle", 512))
    assert check_capacity(CONFIG, TWO_NODES).status == "ok"
    on_queue(monkeypatch, environment("busy", 512, desired=384), environment("also busy", 256, desired=128))
    result = check_capacity(CONFIG, TWO_NODES)
    assert result.status == "warning" and "busy 384 of 512, also busy 128 of 256" in result.reason
