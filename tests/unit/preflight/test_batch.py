"""A preflight rule that needs no AWS: the Batch compute environment's capacity."""

from __future__ import annotations

from airflow_provider_trainium.preflight.batch import environment_problems
from airflow_provider_trainium.preflight.layout import Layout

TWO_NODES = Layout(instance_type="trn1.32xlarge", nodes=2, compute="batch", image=None)


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
