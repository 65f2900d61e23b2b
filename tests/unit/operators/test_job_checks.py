"""The checks a prepared job passes before anything is found or submitted (``operators.job_checks``).

Each job is checked against the Neuron driver of its own instance type's hosts. The XLA image (Neuron 2.28.0,
runtime 2.30) and the native image (Neuron 2.33.1, runtime 2.35) need drivers that do not overlap, so the Trn1 and
Trn2/Trn3 hosts pin different ones and the connection records one per instance type (``neuron_driver_versions``).
A connection written before that holds one ``neuron_driver_version`` for every job, and still means what it meant.
A native image this DAG run built is judged by its build task's labels, and the budget check holds a job to the
DAG author's ceiling.
"""

from __future__ import annotations

from contextlib import nullcontext
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.neuron.budget import OverBudgetError
from airflow_provider_trainium.neuron.releases import RUNTIME_LABEL, SDK_LABEL, NeuronDriverMismatchError, table
from airflow_provider_trainium.neuron.spec import JobSpec
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from airflow_provider_trainium.operators.job_checks import (
    check_budget,
    check_neuron_driver,
    check_on_backend,
    check_trusted_image,
    check_write_uris,
)
from airflow_provider_trainium.params import budget_params
from tests.conftest import set_trainium_connection
from tests.unit.operators.test_job_native_image import REFERENCE, BuildXComs, RegistryHeld, native_labels, run

XLA = table().image_for("xla")
NATIVE = table().image_for("native")
XLA_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium@sha256:" + "a" * 64
NATIVE_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium@sha256:" + "b" * 64
#: What ``airflow trainium configure`` writes for a Batch stack with a Trn1 and a Trn2 queue, template defaults.
PER_TYPE = {"trn1.32xlarge": XLA.driver, "trn2.48xlarge": NATIVE.driver}


def test_every_try_runs_the_write_budget_trust_driver_and_backend_checks_in_that_order() -> None:
    """What ``prepare`` runs before anything is found or submitted (a subclass appends its own after these)."""
    job = TrainiumJobOperator(task_id="train", entry_point="m")
    bound = [(check.func, check.args) for check in job.pre_submit_checks()]  # type: ignore[attr-defined]
    expected = (check_write_uris, check_budget, check_trusted_image, check_neuron_driver, check_on_backend)
    assert bound == [(check, (job,)) for check in expected]


def check(stack: str, instance_type: str, image: str) -> None:
    """The driver check of one job, reading the ``trainium_default`` connection as a task does; the native image is
    the one this DAG run built (its build task's labels name its release)."""
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
    check_neuron_driver(job, context, SimpleNamespace(spec=spec), SimpleNamespace(runs_image=True))  # type: ignore[arg-type]


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


@pytest.mark.parametrize("labelled", [True, False])
def test_the_native_jobs_image_and_driver_checks_read_the_built_images_labels(labelled: bool) -> None:
    job, context = run(native_labels() if labelled else None)
    job._config = TrainiumConfig(neuron_driver_versions={"trn2.48xlarge": NATIVE.driver})
    spec = JobSpec(name="t", entry_point="trainium_trainer.llama.train", instance_type="trn2.48xlarge", image=REFERENCE,
                   stack="native")  # fmt: skip
    prepared = SimpleNamespace(spec=spec)
    backend = SimpleNamespace(runs_image=True)
    if labelled:
        check_neuron_driver(job, context, prepared, backend)  # type: ignore[arg-type]
    else:  # without them the image passes for the XLA one and the native job is refused
        with pytest.raises(ValueError, match="stack 'native' needs an image of that stack"):
            check_neuron_driver(job, context, prepared, backend)  # type: ignore[arg-type]


@pytest.mark.parametrize(("ceiling", "refused"), [(50, False), (25, True)])
def test_the_dags_ceiling_becomes_the_budget_the_watch_reads_and_refuses_a_worst_case_above_it(ceiling, refused):
    """Two trn1.32xlarge nodes for the job's hour cost at most $43: within a $50 ceiling, above a $25 one. A task
    that set no budget runs under the ceiling, which the operator keeps for the watch's mid-run stop."""
    with DAG(f"ceiling_{ceiling}", schedule=None, params=budget_params(ceiling_usd=ceiling)) as dag:
        job = TrainiumJobOperator(task_id="train", entry_point="m", execution_timeout=timedelta(hours=1))
    job._config = TrainiumConfig()
    spec = JobSpec(name="t", entry_point="m", instance_type="trn1.32xlarge", nodes=2, timeout_seconds=3600)
    expected = pytest.raises(OverBudgetError, match=r"worst case \$43\.00 exceeds max_cost_usd \$25\.00")
    with expected if refused else nullcontext():
        check_budget(job, {"dag": dag}, SimpleNamespace(spec=spec), None)  # type: ignore[arg-type]
    assert job.max_cost_usd == float(ceiling)


def test_the_code_bundle_is_held_to_the_write_prefixes_too(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``code_uri`` is the provider's own upload under the root today; a subclass's ``code_uri`` hook that put it
    elsewhere would be refused like an output."""
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    job = TrainiumJobOperator(task_id="train", entry_point="m")
    inside = JobSpec(name="t", entry_point="m", code_uri=f"{tmp_path.as_uri()}/code/abc")
    check_write_uris(job, {}, SimpleNamespace(spec=inside), SimpleNamespace())  # type: ignore[arg-type]
    outside = JobSpec(name="t", entry_point="m", code_uri="s3://elsewhere/code/abc")
    with pytest.raises(ValueError, match="code_uri 's3://elsewhere/code/abc' refused: bounded writes"):
        check_write_uris(job, {}, SimpleNamespace(spec=outside), SimpleNamespace())  # type: ignore[arg-type]
