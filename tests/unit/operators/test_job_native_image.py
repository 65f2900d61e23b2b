"""A job that runs the native image its DAG run built is judged as native: its stack here, its runtime and driver
in test_job_checks.

A bare ``repository@sha256:...`` says nothing of the stack, and the release table takes it for the XLA image; the
build task's labels (pushed as XCom ``labels``) say what it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from airflow.sdk import DAG

from airflow_provider_trainium.neuron.releases import RUNTIME_LABEL, SDK_LABEL, resolve_stack, table
from airflow_provider_trainium.operators.image import TrainiumImageBuildOperator
from airflow_provider_trainium.operators.job import TrainiumJobOperator

REFERENCE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium@sha256:" + "b" * 64
NATIVE = table().image_for("native")


@dataclass
class BuildXComs:
    """The XComs a run's build task pushed, as ``ti.xcom_pull`` hands them out."""

    xcoms: dict[tuple[str, str], Any] = field(default_factory=dict)
    dag_id: str = "d"
    task_id: str = "train"
    run_id: str = "manual__2026-12-02T00:00:00+00:00"
    map_index: int = -1

    def xcom_pull(self, task_ids: str, key: str = "return_value", **_: Any) -> Any:
        return self.xcoms.get((task_ids, key))


class RegistryHeld(TrainiumImageBuildOperator):
    """A build task whose image the registry holds under this run's content-hash tag with ``held_labels`` (the
    lookup itself is covered by tests/integration/image): what ``derived_image`` re-derives, never the XCom."""

    def __init__(self, *, held: str, held_labels: dict[str, str] | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.held, self.held_labels = held, held_labels

    def derived_image(self) -> tuple[str, str | None, dict[str, str] | None]:
        return self.held, None, self.held_labels


def run(labels: dict[str, str] | None) -> tuple[TrainiumJobOperator, dict[str, Any]]:
    with DAG("d", schedule=None, start_date=datetime(2026, 1, 1)):
        RegistryHeld(task_id="build_image", stack="native", instance_type="trn2.48xlarge", held=REFERENCE,
                     held_labels=labels)  # fmt: skip
        job = TrainiumJobOperator(task_id="train", entry_point="trainium_trainer.llama.train",
                                  instance_type="trn2.48xlarge", stack="native", image=REFERENCE)  # fmt: skip
    ti = BuildXComs({("build_image", "return_value"): REFERENCE, ("build_image", "labels"): {"edited": "xcom"}})
    return job, {"ti": ti}


def native_labels() -> dict[str, str]:
    return {RUNTIME_LABEL: NATIVE.runtime, SDK_LABEL: NATIVE.version}


def test_the_run_built_images_labels_reach_the_job() -> None:
    job, context = run(native_labels())
    assert job.image_labels(context, REFERENCE) == native_labels()
    assert job.image_labels(context, "other.example/trainium@sha256:" + "c" * 64) is None
    assert resolve_stack("auto", "trn2.48xlarge", REFERENCE, job.image_labels(context, REFERENCE)) == "native"
