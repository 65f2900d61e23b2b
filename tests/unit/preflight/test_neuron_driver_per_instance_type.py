"""Preflight compares the image with the driver of the run's own instance type, as the operator does.

Preflight sees no build labels, so an image by reference is the XLA image (``docker/Dockerfile``'s release):
on a Trn2 queue pinned for the native image that is a real mismatch, the one NativeNeuronDriverVersion's
description warns of.
"""

from __future__ import annotations

import re

from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.neuron.releases import table
from airflow_provider_trainium.preflight.fields import check_stack_outputs
from airflow_provider_trainium.preflight.layout import Layout
from airflow_provider_trainium.preflight.neuron import check_neuron_driver

XLA, NATIVE = table().image_for("xla"), table().image_for("native")
PER_TYPE = TrainiumConfig(
    configured=True, neuron_driver_versions={"trn1.32xlarge": XLA.driver, "trn2.48xlarge": NATIVE.driver}
)


def layout(instance_type: str) -> Layout:
    return Layout(instance_type=instance_type, nodes=2, compute="batch", image=None)


def test_each_instance_type_is_checked_against_its_own_hosts_driver() -> None:
    trn1 = check_neuron_driver(PER_TYPE, layout("trn1.32xlarge"))
    assert trn1.status == "ok" and f"driver {XLA.driver} is within" in trn1.reason
    trn2 = check_neuron_driver(PER_TYPE, layout("trn2.48xlarge"))
    assert trn2.status == "error"
    assert f"the hosts' Neuron driver {NATIVE.driver} rejects the image's Neuron runtime {XLA.runtime}" in trn2.reason
    outputs = check_stack_outputs(PER_TYPE, layout("trn2.48xlarge"))
    assert outputs.status == "ok" and f"neuron_driver_versions[trn2.48xlarge] {NATIVE.driver}" in outputs.reason


def test_an_old_connection_reads_as_before() -> None:
    old = TrainiumConfig(configured=True, neuron_driver_version=XLA.driver)
    for instance_type in ("trn1.32xlarge", "trn2.48xlarge"):
        assert check_neuron_driver(old, layout(instance_type)).status == "ok"
        outputs = check_stack_outputs(old, layout(instance_type))
        assert outputs.reason == f"neuron_driver_version {XLA.driver} (NeuronDriverVersion)"


def test_a_type_the_connection_has_no_driver_for_is_not_checked() -> None:
    result = check_neuron_driver(PER_TYPE, layout("trn3.48xlarge"))
    assert result.status == "warning" and "no neuron_driver_versions entry for trn3.48xlarge" in result.reason
    assert check_stack_outputs(PER_TYPE, layout("trn3.48xlarge")).status == "warning"


def suggested_stacks(reason: str) -> list[str]:
    """The stacks of the releases a driver mismatch's fix suggests an image of."""
    return [table().releases[v].stack for v in re.findall(r"run an image of Neuron (\S+) \(runtime", reason)]


def test_a_mismatch_suggests_only_a_release_of_the_jobs_own_stack() -> None:
    """On the XLA hosts' driver, a 2.30 XLA image is told of the 2.28 XLA image, a native image of no XLA one."""
    on_xla_driver = TrainiumConfig(configured=True, neuron_driver_version=XLA.driver)
    xla = check_neuron_driver(on_xla_driver, Layout("trn1.32xlarge", 2, "batch", table().releases["2.30.0"].dlc))
    assert xla.status == "error" and suggested_stacks(xla.reason) == ["xla"]
    native_image = f"r.example/t:native-sdk{NATIVE.version}"
    native = check_neuron_driver(on_xla_driver, Layout("trn2.48xlarge", 2, "batch", native_image))
    assert native.status == "error" and set(suggested_stacks(native.reason)) <= {"native"}
