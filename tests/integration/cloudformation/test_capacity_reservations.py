"""Both compute stacks launch into a targeted On-Demand Capacity Reservation or a Capacity Block for ML: the
launch templates target the reservation, a Capacity Block adds the ``capacity-block`` market type EC2 requires
(EC2 user guide, "Capacity Blocks for ML": a launch must name the block and that market type), and a Capacity
Block without its id is refused by the stack's own rule."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.cloudformation.test_batch_stack import conditions, failed_rules, resolve_ifs


def launch_templates(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        resource["Properties"]["LaunchTemplateData"]
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::EC2::LaunchTemplate"
    ]


@pytest.mark.parametrize("stack", ["batch", "ecs"])
def test_every_launch_template_targets_the_reservation_and_a_block_adds_its_market_type(templates, stack):
    data = launch_templates(templates[stack])
    assert data
    for launch in data:
        assert launch["CapacityReservationSpecification"] == {
            "Fn::If": ["UseCapacityReservation",
                       {"CapacityReservationTarget": {"CapacityReservationId": {"Ref": "CapacityReservationId"}}},
                       {"Ref": "AWS::NoValue"}]
        }  # fmt: skip
        assert launch["InstanceMarketOptions"] == {
            "Fn::If": ["UseCapacityBlock", {"MarketType": "capacity-block"}, {"Ref": "AWS::NoValue"}]
        }
    conditions = templates[stack]["Conditions"]
    assert conditions["UseCapacityBlock"] == {
        "Fn::And": [{"Condition": "UseCapacityReservation"},
                    {"Fn::Equals": [{"Ref": "CapacityReservationType"}, "capacity-block"]}]
    }  # fmt: skip
    assert templates[stack]["Parameters"]["CapacityReservationType"]["AllowedValues"] == ["on-demand", "capacity-block"]


@pytest.mark.parametrize("stack", ["batch", "ecs"])
def test_a_capacity_block_needs_its_reservation_id(templates, stack):
    template = templates[stack]
    assert failed_rules(template, BaseStackName="b", CapacityReservationType="capacity-block") == [
        "CapacityBlockNeedsItsId"
    ]
    block = {"BaseStackName": "b", "CapacityReservationType": "capacity-block",
             "CapacityReservationId": "cr-0123456789abcdef0"}  # fmt: skip
    assert failed_rules(template, **block) == []
    assert failed_rules(template, BaseStackName="b") == []


def test_a_reservation_is_refused_on_spot(templates):
    spot = {"BaseStackName": "b", "PurchaseOption": "spot", "MaxNodes": "1", "CapacityReservationId": "cr-01234567"}
    assert failed_rules(templates["batch"], **spot) == ["SpotOrReservation"]


BLOCK = {"CapacityReservationType": "capacity-block", "CapacityReservationId": "cr-0123456789abcdef0"}
#: (deployment, the allocation strategy of every compute environment, whether it is in its placement group)
PLACEMENT = [
    (BLOCK, "BEST_FIT", False),
    ({"CapacityReservationId": "cr-0123456789abcdef0"}, "BEST_FIT_PROGRESSIVE", True),
    ({}, "BEST_FIT_PROGRESSIVE", True),
    ({"PurchaseOption": "spot", "MaxNodes": "1"}, "SPOT_CAPACITY_OPTIMIZED", True),
]


@pytest.mark.parametrize(("given", "strategy", "placed"), PLACEMENT, ids=["block", "reservation", "on-demand", "spot"])
def test_a_batch_compute_environment_on_a_capacity_block_is_best_fit_without_a_placement_group(
    templates, given, strategy, placed
):
    """On a Capacity Block every compute environment allocates BEST_FIT and has no placement group, as the only
    public AWS Batch + Capacity Block sample (aws-samples/awsome-distributed-training,
    1.architectures/3.aws-batch/0.aws-batch-distributed-training-p5.yaml at c719bf0f06bf) does; otherwise
    BEST_FIT_PROGRESSIVE (SPOT_CAPACITY_OPTIMIZED on Spot) in the type's cluster placement group."""
    batch = templates["batch"]
    truth = conditions(batch, BaseStackName="b", **given)
    assert not failed_rules(batch, BaseStackName="b", **given)
    environments = {n: r for n, r in batch["Resources"].items() if r["Type"] == "AWS::Batch::ComputeEnvironment"}
    assert environments
    for name, resource in environments.items():
        compute = resolve_ifs(resource["Properties"]["ComputeResources"], truth)
        assert compute["AllocationStrategy"] == strategy, name
        group = {"Ref": name.replace("ComputeEnvironment", "PlacementGroup")}
        assert compute.get("PlacementGroup") == (group if placed else None), name
