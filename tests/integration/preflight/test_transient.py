"""A check AWS does not answer (throttled past botocore's retries, a 5xx) is asked again, and if it still is not
answered the preflight task is left to Airflow's retries instead of failing the run for good: a throttle says
nothing about the layout. A check AWS answers "no" still fails for good."""

from __future__ import annotations

import json

import pytest

from airflow_provider_trainium import dag_kit
from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.preflight import guard
from benchmarks.fault_proxy import FaultPlan, FaultProxy
from tests.conftest import MOTO_REGION
from tests.integration.preflight.conftest import AWS_CONN_ID, INSTANCE_TYPE

PARAMS = {"instance_type": INSTANCE_TYPE, "nodes": 2, "compute": "batch"}


@pytest.fixture
def proxy(moto_server: str, monkeypatch: pytest.MonkeyPatch, deployment):
    """The preflight's AWS connection through a fault proxy in front of the deployment's moto server; no
    waiting between the check's own tries."""
    monkeypatch.setattr(guard, "TRANSIENT_BACKOFF", 0.0)
    with FaultProxy(moto_server, FaultPlan()) as fault_proxy:
        conn = {"conn_type": "aws", "login": "testing", "password": "testing",
                "extra": {"endpoint_url": fault_proxy.url, "region_name": MOTO_REGION,
                          "config_kwargs": {"retries": {"total_max_attempts": 1}}}}  # fmt: skip
        monkeypatch.setenv(f"AIRFLOW_CONN_{AWS_CONN_ID.upper()}", json.dumps(conn))
        yield fault_proxy


def config(deployment) -> TrainiumConfig:
    return TrainiumConfig.from_extra({k: v for k, v in deployment.extra().items() if v is not None})


def test_a_check_throttled_once_is_asked_again_and_passes(proxy, deployment):
    from airflow_provider_trainium.preflight import run_preflight

    proxy.set_plan(FaultPlan(per_api={"DescribeSecurityGroups": 0.5}, kinds=("throttle",), seed=1))
    results = {r.name: r for r in run_preflight(config(deployment), image=None, stack="auto", **PARAMS)}
    assert proxy.stats.faulted("DescribeSecurityGroups") >= 1
    assert results["efa security group"].status == "ok", results["efa security group"]


def test_a_check_aws_keeps_throttling_leaves_the_task_to_its_retries(proxy, deployment):
    from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

    proxy.set_plan(FaultPlan(per_api={"DescribeSecurityGroups": 1.0}, kinds=("throttle", "5xx")))
    with pytest.raises(AirflowException) as raised:
        dag_kit.preflight(config(deployment), PARAMS)
    assert not isinstance(raised.value, AirflowFailException)
    assert "efa security group: AWS did not answer after 4 tries" in str(raised.value)
    assert proxy.stats.faulted("DescribeSecurityGroups") == guard.TRANSIENT_TRIES


def test_a_check_aws_answers_no_fails_for_good_without_asking_again(proxy, deployment):
    from airflow.providers.common.compat.sdk import AirflowFailException

    broken = TrainiumConfig.from_extra({**{k: v for k, v in deployment.extra().items() if v is not None},
                                        "security_groups": ["sg-00000000000000000"]})  # fmt: skip
    with pytest.raises(AirflowFailException, match="efa security group"):
        dag_kit.preflight(broken, PARAMS)
    assert proxy.stats.forwarded["DescribeSecurityGroups"] == 1
