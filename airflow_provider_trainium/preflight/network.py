"""The EFA security group rule: nodes of a multi-node job exchange all traffic with each other, both ways.

EFA (and torchrun's rendezvous) needs every protocol between the nodes; a group that lacks its own
inbound or outbound rule lets the instances start and then hangs the first collective.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_trainium.preflight.layout import Layout
from airflow_provider_trainium.preflight.result import CheckResult, ok, verdict

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig

NAME = "efa security group"


def allows_all_with_itself(permissions: list[dict[str, Any]], group_id: str) -> bool:
    """Whether a rule list has "all traffic" (IpProtocol -1) with the group itself as its peer."""
    return any(
        rule.get("IpProtocol") == "-1" and any(p.get("GroupId") == group_id for p in rule.get("UserIdGroupPairs", []))
        for rule in permissions
    )


def group_problems(group: dict[str, Any]) -> list[str]:
    group_id = group["GroupId"]
    missing = [
        direction
        for direction, key in (("inbound from itself", "IpPermissions"), ("outbound to itself", "IpPermissionsEgress"))
        if not allows_all_with_itself(group.get(key, []), group_id)
    ]
    return [f"security group {group_id} allows no {m} (all traffic, IpProtocol -1), which EFA needs" for m in missing]


def check_efa_security_groups(config: TrainiumConfig, layout: Layout) -> CheckResult:
    if not layout.multi_node:
        return ok(NAME, "not needed (1 node)")
    if not config.security_groups:
        return verdict(NAME, "", ["the trainium connection names no security_groups"])
    from airflow.providers.amazon.aws.hooks.ec2 import EC2Hook

    hook = EC2Hook(api_type="client_type", aws_conn_id=config.aws_conn_id, region_name=config.region_name)
    groups = hook.conn.describe_security_groups(GroupIds=list(config.security_groups))["SecurityGroups"]
    problems = [p for group in groups for p in group_problems(group)]
    return verdict(NAME, f"{', '.join(config.security_groups)}: all traffic to and from itself", problems)
