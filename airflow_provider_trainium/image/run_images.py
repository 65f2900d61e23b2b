"""The images this DAG run built: what ``NeuronImageBuildOperator`` tasks of the run returned.

One place for the question other tasks ask (is this image one the run built? which base did it start from?),
so the job checks and the registry's lineage read the same XComs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunImage:
    """One build task's result: its ``repository@sha256:...``, the base digest it pushed (None: unknown) and the
    image's labels as the registry held them (None: unknown), which say which Neuron release and stack it carries."""

    task_id: str
    reference: str
    base_digest: str | None
    labels: dict[str, str] | None = None


def image_task_ids(dag: Any) -> list[str]:
    """Task ids of the DAG's ``NeuronImageBuildOperator`` tasks, in the DAG's task order."""
    from airflow_provider_trainium.operators.image import NeuronImageBuildOperator

    tasks = getattr(dag, "tasks", None) or []
    return [t.task_id for t in tasks if isinstance(t, NeuronImageBuildOperator)]


def run_images(context: Any, dag: Any) -> list[RunImage]:
    """Every image a build task of ``dag`` returned in this run; tasks that returned nothing are left out."""
    ti = context["ti"]
    found: list[RunImage] = []
    for task_id in image_task_ids(dag):
        reference = ti.xcom_pull(task_ids=task_id)
        if not isinstance(reference, str) or not reference:
            continue
        base = ti.xcom_pull(task_ids=task_id, key="base_digest")
        labels = ti.xcom_pull(task_ids=task_id, key="labels")
        found.append(
            RunImage(
                task_id,
                reference,
                base if isinstance(base, str) and base else None,
                {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else None,
            )
        )
    return found


def built_image_labels(context: Any, dag: Any, image: str | None) -> dict[str, str] | None:
    """The labels of ``image`` when a build task of this run built it, else None: a bare reference says nothing
    of its stack, the build that made it does (the native image would otherwise pass for the XLA one)."""
    if not image:
        return None
    for built in run_images(context, dag):
        if built.reference == image:
            return built.labels
    return None


def built_references(context: Any, dag: Any) -> list[str]:
    """The ``repository@sha256:...`` of every image this run built: trusted as built (``neuron.images``)."""
    return [image.reference for image in run_images(context, dag)]


def image_lineage(context: Any, dag: Any, image: str | None = None) -> dict[str, Any]:
    """``{"image", "base_digest"}`` of the image that trained the model; empty when the run built none.

    The build whose reference is ``image`` (the register task's own setting) wins; otherwise a run must have
    built exactly one image, since with several nothing says which one the model came from.
    """
    built = run_images(context, dag)
    chosen = [b for b in built if image and b.reference == image] or (built if len(built) == 1 else [])
    if not chosen:
        return {}
    return {"image": chosen[0].reference, "base_digest": chosen[0].base_digest}
