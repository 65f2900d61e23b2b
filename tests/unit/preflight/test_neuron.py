"""The ``instance family`` check warns of a release AWS does not fully support for training (a beta or an ended
one) on an instance family it does train on: the job runs, but nothing newer of AWS's fixes what breaks."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.neuron.catalog import CATALOG
from airflow_provider_trainium.neuron.releases import NeuronRelease, family, table
from airflow_provider_trainium.preflight.layout import Layout
from airflow_provider_trainium.preflight.neuron import check_instance_family


def on_its_family(release: NeuronRelease) -> Layout:
    """A two-node run of an image tagged with ``release`` on an instance type of its first training family."""
    instance_type = next(t for t in CATALOG if family(t) == release.training_families[0])
    return Layout(instance_type=instance_type, nodes=2, compute="batch", image=f"r.example/t:x-sdk{release.version}")


@pytest.mark.parametrize("release", table().releases.values(), ids=lambda r: f"{r.version}-{r.training_support}")
def test_a_beta_or_unsupported_release_is_warned_about_and_a_supported_one_is_not(release):
    result = check_instance_family(on_its_family(release))
    if release.supported_for_training:
        assert result.status == "ok", result
    else:
        assert result.status == "warning", result
        assert result.reason.startswith(f"Neuron {release.version} is {release.training_support} for training by AWS")


def test_the_table_holds_a_beta_and_an_unsupported_release():
    """The test above then covers both kinds of warning."""
    assert {"supported", "beta", "unsupported"} <= {r.training_support for r in table().releases.values()}


def test_an_instance_type_ec2_cannot_launch_is_an_error_before_anything_is_paid_for():
    from airflow_provider_trainium.compute.remote import ec2_instance_types

    unlaunchable = sorted(t for t in CATALOG if t not in ec2_instance_types())
    if not unlaunchable:
        pytest.skip("every catalog type is in this botocore's EC2 model")
    layout = Layout(instance_type=unlaunchable[0], nodes=1, compute="batch", image=None)
    result = check_instance_family(layout)
    assert result.status == "error" and "EC2 cannot launch it yet" in result.reason, result
