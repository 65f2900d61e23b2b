"""The preflight rules that need no AWS: image references, EFA self rules, compute environment capacity."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.preflight.batch import environment_problems
from airflow_provider_trainium.preflight.fields import missing_fields
from airflow_provider_trainium.preflight.image import ImageRef, parse_image
from airflow_provider_trainium.preflight.layout import Layout
from airflow_provider_trainium.preflight.network import group_problems
from airflow_provider_trainium.preflight.result import CheckResult, verdict

DIGEST = "sha256:" + "a" * 64
TWO_NODES = Layout(instance_type="trn1.32xlarge", nodes=2, compute="batch", image=None)


@pytest.mark.parametrize(
    ("image", "ref"),
    [
        (f"host:5000/team/train@{DIGEST}", ImageRef("host:5000/team/train", digest=DIGEST)),
        ("host:5000/team/train:v1", ImageRef("host:5000/team/train", tag="v1")),
        ("host:5000/team/train", ImageRef("host:5000/team/train", tag="latest")),
    ],
)
def test_parse_image(image, ref):
    assert parse_image(image) == ref


def test_a_status_outside_the_three_is_refused():
    with pytest.raises(ValueError, match="'fine' is not one of ok, warning, error"):
        CheckResult("image", "fine", "")  # type: ignore[arg-type]


def test_verdict_is_the_worst_finding():
    assert verdict("x", "fine", ["a", "b"], ["c"]) == CheckResult("x", "error", "a; b")
    assert verdict("x", "fine", [], ["c"]) == CheckResult("x", "warning", "c")
    assert verdict("x", "fine") == CheckResult("x", "ok", "fine")


def test_a_group_needs_all_traffic_with_itself_both_ways():
    itself = [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": "sg-1"}]}]
    tcp_only = [{"IpProtocol": "tcp", "FromPort": 0, "ToPort": 65535, "UserIdGroupPairs": [{"GroupId": "sg-1"}]}]
    assert group_problems({"GroupId": "sg-1", "IpPermissions": itself, "IpPermissionsEgress": itself}) == []
    problems = group_problems({"GroupId": "sg-1", "IpPermissions": tcp_only, "IpPermissionsEgress": itself})
    assert problems == [
        "security group sg-1 allows no inbound from itself (all traffic, IpProtocol -1), which EFA needs"
    ]


def environment(**resources):
    base = {"type": "EC2", "maxvCpus": 256, "instanceTypes": ["trn1"]}
    return {
        "computeEnvironmentName": "env",
        "state": "ENABLED",
        "status": "VALID",
        "type": "MANAGED",
        "computeResources": {**base, **resources},
    }


def test_an_instance_family_in_instance_types_offers_its_sizes():
    assert environment_problems(environment(), TWO_NODES) == ([], [])
    bad, _ = environment_problems(environment(instanceTypes=["trn1n"]), TWO_NODES)
    assert bad == ["compute environment env does not offer trn1.32xlarge (instanceTypes: ['trn1n'])"]


def test_spot_is_refused_only_for_several_nodes():
    one_node = Layout(instance_type="trn1.32xlarge", nodes=1, compute="batch", image=None)
    assert environment_problems(environment(type="SPOT"), one_node) == ([], [])
    bad, _ = environment_problems(environment(type="FARGATE_SPOT"), TWO_NODES)
    assert len(bad) == 1 and "FARGATE_SPOT" in bad[0]


def test_an_unmanaged_environment_is_not_checked_but_says_so():
    unmanaged = {"computeEnvironmentName": "own", "state": "ENABLED", "status": "VALID", "type": "UNMANAGED"}
    assert environment_problems(unmanaged, TWO_NODES) == (
        [],
        ["compute environment own is UNMANAGED: its instances are not checked"],
    )


def test_missing_fields_name_what_the_backend_reads():
    config = TrainiumConfig(configured=True, artifact_root="file:///tmp/x", region_name="us-east-1")
    missing = missing_fields(config, TWO_NODES)
    assert "artifact_root on s3:// (it is file:///tmp/x)" in missing
    assert "batch_job_queues[trn1.32xlarge]" in missing and "ecs_cluster" not in missing
    assert "region_name" not in missing
