"""Each job is checked against the Neuron driver of its own instance type's hosts.

The XLA image (Neuron 2.28.0, runtime 2.30) and the native image (Neuron 2.33.0, runtime 2.35) need drivers that
do not overlap, so the Trn1 and Trn2/Trn3 hosts pin different ones and the connection records one per instance
type (``neuron_driver_versions``). A connection written before that holds one ``neuron_driver_version`` for every
job, and still means what it meant.
"""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_provider_trainium.neuron.releases import RUNTIME_LABEL, SDK_LABEL, NeuronDriverMismatchError, table
from airflow_provider_trainium.neuron.spec import JobSpec
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from tests.conftest import set_trainium_connection
from tests.unit.operators.test_job_native_image import BuildXComs, RegistryHeld

XLA = table().image_for("xla")
NATIVE = table().image_for("native")
XLA_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium@sha256:" + "a" * 64
NATIVE_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium@sha256:" + "b" * 64
#: What ``airflow trainium configure`` writes for a Batch stack with a Trn1 and a Trn2 queue, template defaults.
PER_TYPE = {"trn1.32xlarge": XLA.driver, "trn2.48xlarge": NATIVE.driver}


def check(stack: str, instance_type: str, image: str) -> None:
    """The operator's driver check for one job, reading the ``trainium_default`` connection as a task does; the
    native image is the one this DAG run built (its build task's labels name its release)."""
    labels = {RUNTIME_LABEL: NATIVE.runtime, SDK_LABEL: NATIVE.version}
    with DAG("d", schedule=None, start_date=datetime(2026, 1, 1)):
        RegistryHeld(task_id="build_image", stack="native", instance_type="trn2.48xlarge", held=NATIVE_IMAGE,
                     held_labels=labels)  # fmt: skip
        job = TrainiumJobOperator(task_id="train", entry_point="trainium_trainer.llama.train",
                                  instance_type=instance_type, stack=stack, image=image)  # fmt: skip
    ti = BuildXComs({("build_image", "return_value"): NATIVE_IMAGE})
    spec = JobSpec(
        name="t", entry_point="trainium_trainer.llama.train", instance_type=instance_type, image=image, stack=stack
    )
    context: dict[str, Any] = {"ti": ti}
    job.check_neuron_driver(context, SimpleNamespace(spec=spec), SimpleNamespace(runs_image=True))  # type: ignore[arg-type]


def test_both_stacks_pass_on_the_hosts_of_their_own_instance_type(monkeypatch: pytest.MonkeyPatch) -> None:
    """The connection-wide driver is the Trn1 one; the Trn2 job is held to its own entry, not to it."""
    set_trainium_connection(monkeypatch, neuron_driver_version=XLA.driver, neuron_driver_versions=PER_TYPE)
    check("native", "trn2.48xlarge", NATIVE_IMAGE)
    check("xla", "trn1.32xlarge", XLA_IMAGE)


@pytest.mark.parametrize(
    ("stack", "instance_type", "image", "release", "driver"),
    [
        ("native", "trn2.48xlarge", NATIVE_IMAGE, NATIVE, XLA.driver),
        ("xla", "trn1.32xlarge", XLA_IMAGE, XLA, NATIVE.driver),
    ],
    ids=["native-trn2", "xla-trn1"],
)
def test_a_job_whose_hosts_driver_does_not_fit_is_refused(monkeypatch, stack, instance_type, image, release, driver):
    """Only the job's own entry is wrong here; the other type's entry would have fitted, and is not used."""
    other = {t: d for t, d in PER_TYPE.items() if t != instance_type}
    set_trainium_connection(monkeypatch, neuron_driver_versions={**other, instance_type: driver})
    with pytest.raises(NeuronDriverMismatchError) as refused:
        check(stack, instance_type, image)
    message = str(refused.value)
    assert f"the hosts' Neuron driver {driver} rejects the image's Neuron runtime {release.runtime}" in message
    assert f"Fix: pin aws-neuronx-dkms {release.driver} on the hosts" in message


def test_a_family_entry_covers_its_instance_types(monkeypatch: pytest.MonkeyPatch) -> None:
    set_trainium_connection(monkeypatch, neuron_driver_versions={"trn2": NATIVE.driver, "trn1": XLA.driver})
    check("native", "trn2.48xlarge", NATIVE_IMAGE)
    set_trainium_connection(monkeypatch, neuron_driver_versions={"trn2": XLA.driver, "trn2.48xlarge": NATIVE.driver})
    check("native", "trn2.48xlarge", NATIVE_IMAGE)  # the instance type's own entry wins over its family's


def test_an_old_connection_holds_every_job_to_its_one_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only ``neuron_driver_version``, as connections were written before: the XLA job passes on it, and the
    native job is refused against it, as it always was."""
    set_trainium_connection(monkeypatch, neuron_driver_version=XLA.driver)
    check("xla", "trn1.32xlarge", XLA_IMAGE)
    with pytest.raises(NeuronDriverMismatchError, match=f"Neuron driver {XLA.driver} rejects"):
        check("native", "trn2.48xlarge", NATIVE_IMAGE)


def test_a_type_with_no_driver_anywhere_is_a_warning(monkeypatch, capfd) -> None:
    """The Trn1 entry says nothing of the Trn2 hosts: the job runs unchecked, and the log says so."""
    set_trainium_connection(monkeypatch, neuron_driver_versions={"trn1.32xlarge": XLA.driver})
    check("native", "trn2.48xlarge", NATIVE_IMAGE)
    logged = capfd.readouterr()
    assert "does not say which Neuron driver" in logged.out + logged.err
    assert NATIVE.runtime in logged.out + logged.err
