"""A preflight rule that needs no AWS: the security group's EFA self rules."""

from __future__ import annotations

from airflow_provider_trainium.preflight.network import group_problems


def test_a_group_needs_all_traffic_with_itself_both_ways():
    itself = [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": "sg-1"}]}]
    tcp_only = [{"IpProtocol": "tcp", "FromPort": 0, "ToPort": 65535, "UserIdGroupPairs": [{"GroupId": "sg-1"}]}]
    assert group_problems({"GroupId": "sg-1", "IpPermissions": itself, "IpPermissionsEgress": itself}) == []
    problems = group_problems({"GroupId": "sg-1", "IpPermissions": tcp_only, "IpPermissionsEgress": itself})
    assert problems == [
        "security group sg-1 allows no inbound from itself (all traffic, IpProtocol -1), which EFA needs"
    ]
