"""The fault proxy answers as AWS does when it throttles, fails or drops a connection, and counts every call.

Clients reach it through an Airflow AWS connection whose ``endpoint_url`` is the proxy, in front of the moto
server; retries are off so each test sees the one answer the proxy gave.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.fault_proxy import FaultPlan, FaultProxy, operation
from tests.conftest import MOTO_REGION

CONN_ID = "aws_faults"


@pytest.fixture
def proxy(moto_reset: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """A quiet proxy in front of moto and ``aws_faults``, the connection through it."""
    with FaultProxy(moto_reset, FaultPlan(seed=7)) as fault_proxy:
        conn = {"conn_type": "aws", "login": "testing", "password": "testing",
                "extra": {"endpoint_url": fault_proxy.url, "region_name": MOTO_REGION}}  # fmt: skip
        monkeypatch.setenv("AIRFLOW_CONN_AWS_FAULTS", json.dumps(conn))
        yield fault_proxy


def client(service: str, attempts: int = 1, mode: str = "standard") -> Any:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook
    from botocore.config import Config

    config = Config(retries={"total_max_attempts": attempts, "mode": mode}, connect_timeout=5, read_timeout=30)
    return AwsBaseHook(aws_conn_id=CONN_ID, client_type=service, region_name=MOTO_REGION, config=config).conn


CALLS = {  # one call per protocol: JSON (ECS, Logs), REST-JSON (Batch), query (IAM, EC2), S3
    "ListClusters": lambda: client("ecs").list_clusters(),
    "DescribeLogGroups": lambda: client("logs").describe_log_groups(),
    "DescribeJobs": lambda: client("batch").describe_jobs(jobs=["j-1"]),
    "ListRoles": lambda: client("iam").list_roles(),
    "DescribeVpcs": lambda: client("ec2").describe_vpcs(),
    "s3:GET": lambda: client("s3").list_buckets(),
}
THROTTLED = {"ListClusters": "ThrottlingException", "DescribeLogGroups": "ThrottlingException",
             "DescribeJobs": "TooManyRequestsException", "ListRoles": "Throttling",
             "DescribeVpcs": "RequestLimitExceeded", "s3:GET": "SlowDown"}  # fmt: skip


def test_a_quiet_proxy_forwards_every_call_and_counts_it_by_api(proxy):
    for call in CALLS.values():
        call()
    client("batch").describe_jobs(jobs=["j-2"])
    assert proxy.stats.forwarded == {**dict.fromkeys(CALLS, 1), "DescribeJobs": 2}
    assert proxy.stats.faulted() == 0


@pytest.mark.parametrize("api", sorted(CALLS))
def test_throttling_has_each_protocols_shape(proxy, api):
    from botocore.exceptions import ClientError
    from botocore.retries.standard import RetryContext, ThrottledRetryableChecker

    proxy.set_plan(FaultPlan(per_api={api: 1.0}, kinds=("throttle",)))
    with pytest.raises(ClientError) as raised:
        CALLS[api]()
    assert raised.value.response["Error"]["Code"] == THROTTLED[api]
    response = raised.value.response
    status = type("Answer", (), {"status_code": response["ResponseMetadata"]["HTTPStatusCode"]})
    context = RetryContext(attempt_number=1, parsed_response=response, http_response=status)
    assert ThrottledRetryableChecker().is_retryable(context), "botocore must take it for throttling and back off"
    assert proxy.stats.faults == {(api, "throttle"): 1} and proxy.stats.forwarded[api] == 0


LEGACY_CALLS = {  # the same calls on a client in botocore's legacy retry mode, the hooks' default
    "ListClusters": lambda: client("ecs", 2, "legacy").list_clusters(),
    "DescribeLogGroups": lambda: client("logs", 2, "legacy").describe_log_groups(),
    "DescribeJobs": lambda: client("batch", 2, "legacy").describe_jobs(jobs=["j-1"]),
    "ListRoles": lambda: client("iam", 2, "legacy").list_roles(),
    "DescribeVpcs": lambda: client("ec2", 2, "legacy").describe_vpcs(),
    "s3:GET": lambda: client("s3", 2, "legacy").list_buckets(),
}


@pytest.mark.parametrize("api", sorted(LEGACY_CALLS))
def test_throttling_is_retried_by_botocores_legacy_mode_as_aws_throttling_is(proxy, api):
    """Legacy mode (what an Airflow AWS connection gets unless it sets ``retry_mode``) matches code and HTTP
    status (botocore's ``_retry.json``: EC2's ``RequestLimitExceeded`` is a 503): a throttle answered with
    another status would fail the call at once where AWS's own is retried."""
    from botocore.exceptions import ClientError

    proxy.set_plan(FaultPlan(per_api={api: 1.0}, kinds=("throttle",)))
    with pytest.raises(ClientError):
        LEGACY_CALLS[api]()
    assert proxy.stats.faults == {(api, "throttle"): 2}, "the first throttle was not retried"


def test_server_errors_and_resets_reach_the_client_and_a_retry_gets_through(proxy):
    from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError

    proxy.set_plan(FaultPlan(per_api={"ListClusters": 1.0}, kinds=("5xx",)))
    with pytest.raises(ClientError) as raised:
        client("ecs").list_clusters()
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    proxy.set_plan(FaultPlan(per_api={"ListClusters": 1.0}, kinds=("reset",)))
    with pytest.raises((ConnectionClosedError, EndpointConnectionError)):
        client("ecs").list_clusters()
    assert proxy.stats.faults == {("ListClusters", "5xx"): 1, ("ListClusters", "reset"): 1}

    # Seed 1 draws resets and 5xx answers but no throttle: botocore's backoff after throttles (up to seconds
    # each, random) made this test last 17-41 s; the proxy's draws are seeded, the client's jitter is not.
    proxy.set_plan(FaultPlan(per_api={"ListClusters": 0.5}, kinds=("5xx", "reset", "throttle"), seed=1))
    for _ in range(3):  # botocore's own retries carry each call through
        client("ecs", attempts=10).list_clusters()
    assert proxy.stats.forwarded["ListClusters"] == 3 and proxy.stats.faulted("ListClusters") > 4


def test_a_slow_answer_is_the_real_one_late(proxy):
    proxy.set_plan(FaultPlan(per_api={"CreateCluster": 1.0}, kinds=("slow",), slow_seconds=0.5))
    started = time.monotonic()
    arn = client("ecs").create_cluster(clusterName="late")["cluster"]["clusterArn"]
    assert time.monotonic() - started >= 0.5
    assert arn.endswith("/late") and proxy.stats.forwarded["CreateCluster"] == 1


def test_only_the_planned_api_is_faulted_and_calls_are_counted_per_interval(proxy):
    proxy.set_plan(FaultPlan(rate=0.0, per_api={"DescribeJobs": 1.0}, kinds=("throttle",)))
    start = time.time()
    for _ in range(3):
        client("ecs").list_clusters()
    assert proxy.stats.faulted() == 0
    assert proxy.stats.per_interval("ListClusters", 3600, start - 1, time.time() + 3600) == [3]


class Headers(dict):
    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key, default)


SIGNED = "AWS4-HMAC-SHA256 Credential=testing/20261202/us-east-1/{}/aws4_request, SignedHeaders=host"


ECS_RUN_TASK = "AmazonEC2ContainerServiceV20141113.RunTask"
FORM = "application/x-www-form-urlencoded"


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "named"),
    [
        ("POST", "/v1/submitjob", {"Authorization": SIGNED.format("batch")}, b"{}",
         ("batch", "SubmitJob", "rest-json")),
        ("POST", "/", {"Authorization": SIGNED.format("ecs"), "X-Amz-Target": ECS_RUN_TASK}, b"{}",
         ("ecs", "RunTask", "json")),
        ("POST", "/", {"Authorization": SIGNED.format("sts"), "Content-Type": FORM},
         b"Action=GetCallerIdentity&Version=2011-06-15", ("sts", "GetCallerIdentity", "query")),
        ("PUT", "/bucket/key", {"Authorization": SIGNED.format("s3")}, b"x", ("s3", "s3:PUT", "s3")),
    ],
)  # fmt: skip
def test_requests_are_named_by_their_operation(method, path, headers, body, named):
    assert operation(method, path, Headers(headers), body) == named


def test_a_plan_refuses_rates_and_kinds_it_cannot_honour():
    with pytest.raises(ValueError, match="rate"):
        FaultPlan(rate=1.5)
    with pytest.raises(ValueError, match="kinds"):
        FaultPlan(kinds=("flood",))
