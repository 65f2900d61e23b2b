"""What remote compute may ask for: an instance type the EC2 API lists (compute/remote.py)."""

from airflow_provider_trainium.compute.remote import ec2_instance_types, launch_problem
from airflow_provider_trainium.neuron.catalog import CATALOG


def test_only_types_the_ec2_api_lists_are_launchable_and_trn3_waits_for_botocore():
    """Read from the EC2 API model of this venv's botocore: every released type launches; an announced one is
    refused naming why, until a botocore release lists it (then this test says so by passing the other way)."""
    listed = ec2_instance_types()
    for name in CATALOG:
        assert (launch_problem(name) is None) == (name in listed), name
    assert {"trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge"} <= listed
    if not any(t.startswith("trn3") for t in listed):
        problem = launch_problem("trn3.48xlarge")
        assert problem and "EC2 cannot launch it yet" in problem and "botocore" in problem
        assert "trn2.48xlarge" in problem and "compute=local" in problem
