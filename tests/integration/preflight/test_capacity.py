"""A layout that can never be placed is refused before anything waits, one that must wait is warned about, each
with its numbers: the account's On-Demand Trn vCPU quota (Service Quotas, its usage metric in CloudWatch) and the
``maxvCpus`` of the queue's compute environments."""

from __future__ import annotations

from tests.integration.moto_quotas import TRN_USAGE_DIMENSIONS, put_trn_usage, set_ec2_quotas, trn_quota
from tests.integration.preflight.conftest import AWS_CONN_ID, MOTO_REGION
from tests.integration.preflight.helpers import BATCH, ECS, preflight


def cloudwatch():
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    return AwsBaseHook(aws_conn_id=AWS_CONN_ID, client_type="cloudwatch", region_name=MOTO_REGION).conn


def test_a_layout_within_the_quota_and_the_environments_is_ok(capsys, monkeypatch, deployment):
    code, results = preflight(capsys, monkeypatch, deployment.extra())
    assert code == 0
    capacity = results["capacity"]
    assert capacity["status"] == "ok", capacity
    assert capacity["reason"].startswith("256 vCPUs for 2 x trn1.32xlarge, within quota 512")
    assert "queue trn-queue" in capacity["reason"]


def test_a_layout_above_the_vcpu_quota_is_refused_naming_the_quota_and_the_numbers(capsys, monkeypatch, deployment):
    set_ec2_quotas(monkeypatch, trn_quota(128))
    code, results = preflight(capsys, monkeypatch, deployment.extra())
    assert code == 1
    capacity = results["capacity"]
    assert capacity["status"] == "error"
    assert "2 x trn1.32xlarge need 256 vCPUs" in capacity["reason"]
    assert "'Running On-Demand Trn instances' (L-2C3B7624) of 128 vCPUs" in capacity["reason"]
    code, results = preflight(capsys, monkeypatch, deployment.extra(), *ECS)  # one node (128 vCPUs) fits
    assert results["capacity"]["status"] == "ok", results["capacity"]


def test_a_layout_above_every_environment_of_its_queue_is_refused(capsys, monkeypatch, deployment):
    extra = deployment.extra(batch_job_queues={"trn1.32xlarge": "trn-small"})
    code, results = preflight(capsys, monkeypatch, extra)
    assert code == 1
    reason = results["capacity"]["reason"]
    assert results["capacity"]["status"] == "error"
    assert "need 256 vCPUs, more than any compute environment of queue 'trn-small'" in reason
    assert "trn-small (maxvCpus 128)" in reason


def test_a_layout_the_quota_holds_but_running_instances_use_must_wait(capsys, monkeypatch, deployment):
    busy = {**TRN_USAGE_DIMENSIONS, "Class": "Trn/OnDemand-busy"}  # this test's own metric
    set_ec2_quotas(monkeypatch, trn_quota(512, busy))
    put_trn_usage(cloudwatch(), 384, busy)
    code, results = preflight(capsys, monkeypatch, deployment.extra())
    assert code == 0  # a warning does not stop the run
    capacity = results["capacity"]
    assert capacity["status"] == "warning"
    assert "384 of the account's quota 'Running On-Demand Trn instances'" in capacity["reason"]
    assert "waits until 256 are free" in capacity["reason"]


def test_a_quota_service_quotas_does_not_know_is_not_checked(capsys, monkeypatch, deployment):
    set_ec2_quotas(monkeypatch)  # none: moto's own answer for ec2
    code, results = preflight(capsys, monkeypatch, deployment.extra(), *BATCH)
    assert code == 0
    reason = results["capacity"]["reason"]
    assert results["capacity"]["status"] == "warning"
    assert "L-2C3B7624 (On-Demand Trn vCPUs) is not known to Service Quotas: not checked" in reason
