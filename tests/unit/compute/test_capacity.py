"""The placement rules: what can never be placed is an error, what must wait a warning, each with its numbers."""

from __future__ import annotations

from airflow_provider_trainium.compute.capacity import Quota, environment_findings, placement_findings, quota_findings

QUOTA = Quota("Running On-Demand Trn instances", "L-2C3B7624", 512.0)


def environment(name: str, max_vcpus: int, desired: int = 0, managed: bool = True) -> dict:
    resources = {"maxvCpus": max_vcpus, "desiredvCpus": desired} if managed else None
    return {"computeEnvironmentName": name, "computeResources": resources}


def test_the_quota_refuses_what_it_can_never_hold_and_warns_when_usage_leaves_too_little():
    assert quota_findings(QUOTA, "trn1.32xlarge", 4).errors == []  # 512 of 512
    refused = quota_findings(QUOTA, "trn1.32xlarge", 5)
    assert refused.errors == [
        "5 x trn1.32xlarge need 640 vCPUs, more than the account's quota 'Running On-Demand Trn instances' "
        "(L-2C3B7624) of 512 vCPUs: ask Service Quotas for an increase"
    ]
    busy = Quota(QUOTA.name, QUOTA.code, QUOTA.value, in_use=300)
    waits = quota_findings(busy, "trn1.32xlarge", 2)
    assert waits.errors == [] and "300 of the account's quota" in waits.warnings[0]
    assert "waits until 256 are free" in waits.warnings[0]
    assert quota_findings(Quota(QUOTA.name, QUOTA.code, QUOTA.value, in_use=256), "trn1.32xlarge", 2).warnings == []


def test_a_batch_job_needs_one_environment_that_holds_it_and_waits_when_each_such_one_is_busy():
    small, large = environment("small", 128), environment("large", 512, desired=384)
    assert environment_findings([small, large], "q", "trn1.32xlarge", 2).errors == []
    waits = environment_findings([small, large], "q", "trn1.32xlarge", 2).warnings
    assert waits and "large 384 of 512" in waits[0] and "small" not in waits[0]
    assert environment_findings([small, environment("large", 512, 256)], "q", "trn1.32xlarge", 2).warnings == []
    refused = environment_findings([small], "q", "trn1.32xlarge", 2).errors
    assert refused == [
        "2 x trn1.32xlarge need 256 vCPUs, more than any compute environment of queue 'q' can start: "
        "small (maxvCpus 128). Raise MaxvCpus in the Batch stack or use fewer nodes"
    ]


def test_unmanaged_environments_and_an_unknown_quota_are_not_held_against_a_layout():
    found = placement_findings(None, "trn1.32xlarge", 64, "q", [environment("byo", 0, managed=False)])
    assert found.errors == [] and found.warnings == []
