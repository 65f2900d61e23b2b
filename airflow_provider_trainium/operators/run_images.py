"""The images this DAG run built: what ``TrainiumImageBuildOperator`` tasks of the run returned, each re-derived.

One place for the question other tasks ask (is this image one the run built? which base did it start from?),
so the job checks and the registry's lineage agree. An XCom is never trusted alone (whoever may edit XComs could
name ``docker.io/attacker/x:latest``): a build task's result counts only when it equals the registry's reference
under the content-hash tag re-derived from the sources for this run (``TrainiumImageBuildOperator.derived_image``);
its base digest and labels come from the registry too. An XCom that names another image is an error naming both.
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
    """Task ids of the DAG's ``TrainiumImageBuildOperator`` tasks, in the DAG's task order."""
    from airflow_provider_trainium.operators.image import TrainiumImageBuildOperator

    tasks = getattr(dag, "tasks", None) or []
    return [t.task_id for t in tasks if isinstance(t, TrainiumImageBuildOperator)]


class BuiltImageMismatchError(ValueError):
    """A build task's XCom names another image than the one this run's sources give: refused before any job."""


#: (dag_id, run_id, task_id, XCom reference) -> the re-derived image: one registry lookup per task and worker.
_VERIFIED: dict[tuple[str, str, str, str, int], RunImage] = {}


def verified_image(context: Any, task: Any, reference: str) -> RunImage:
    """The build ``task``'s image for this run, re-derived from the sources and the registry; raises
    BuiltImageMismatchError when ``reference`` (its XCom) is another one."""
    import copy

    ti = context["ti"]
    key = (ti.dag_id, ti.run_id, task.task_id, reference, id(task))
    if key not in _VERIFIED:
        rendered = copy.copy(task)
        rendered.render_template_fields(dict(context))
        try:
            derived, base, labels = rendered.derived_image()
        except LookupError as err:
            raise BuiltImageMismatchError(
                f"the XCom of task {task.task_id!r} names image {reference!r}, but {err}"
            ) from err
        if derived != reference:
            raise BuiltImageMismatchError(
                f"the XCom of task {task.task_id!r} names image {reference!r}, but this run's sources give "
                f"{derived!r} (the registry's digest under their content-hash tag): refusing the XCom"
            )
        found_labels = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else None
        _VERIFIED[key] = RunImage(task.task_id, derived, base if isinstance(base, str) and base else None, found_labels)
    return _VERIFIED[key]


def run_images(context: Any, dag: Any) -> list[RunImage]:
    """Every image a build task of ``dag`` returned in this run, each re-derived (``verified_image``); tasks that
    returned nothing are left out."""
    ti = context["ti"]
    found: list[RunImage] = []
    for task_id in image_task_ids(dag):
        reference = ti.xcom_pull(task_ids=task_id)
        if not isinstance(reference, str) or not reference:
            continue
        found.append(verified_image(context, dag.get_task(task_id), reference))
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
