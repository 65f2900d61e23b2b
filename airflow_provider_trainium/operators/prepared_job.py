"""``PreparedJob``: what one try of a job task decided (backend, validated spec, job name and tags), carried
through a deferral so the try never rebuilds it.

Its own module, apart from ``operators.job_spec`` which builds it, because only a running task makes one: a DAG
file loads ``job_spec`` (the operator's mixin) while it is parsed and need not build this frozen dataclass.
``operators.job_spec`` still exports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_trainium.neuron.spec import JobSpec


@dataclass(frozen=True)
class PreparedJob:
    """What one try runs, decided once: the resolved backend name, the validated spec, the job's name and tags.

    It travels through a deferral in the ``execute_complete`` kwargs, so the try never rebuilds it.
    """

    compute: str
    spec: JobSpec
    job_name: str
    tags: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"compute": self.compute, "spec": self.spec.to_dict(), "job_name": self.job_name, "tags": self.tags}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PreparedJob:
        from airflow_provider_trainium.neuron.spec import JobSpec

        return cls(data["compute"], JobSpec.from_dict(data["spec"]), data["job_name"], dict(data["tags"]))

    @classmethod
    def for_task(cls, compute: str, spec: JobSpec, ti: Any) -> PreparedJob:
        """The job of task instance ``ti``: named and tagged from it (``compute.naming``), so a retry finds it."""
        from airflow_provider_trainium.compute import naming

        map_index = ti.map_index if ti.map_index is not None else -1
        return cls(
            compute,
            spec,
            naming.job_name(ti.dag_id, ti.task_id, ti.run_id, map_index),
            naming.job_tags(ti.dag_id, ti.task_id, ti.run_id, map_index),
        )

    def spec_with_evidence_key(self) -> JobSpec:
        """The spec with this job's own evidence key in its environment (``registry.seal``), masked in every log.

        Added only where the job is found or submitted, so the key is in no XCom, no deferral and no prepared spec;
        it is derived again from the job's name, so every try of a task hands the same job the same key."""
        from airflow_provider_trainium.compute.local.job_secrets import mask
        from airflow_provider_trainium.registry.seal import job_key
        from trainium_trainer import boundary

        key = job_key(self.job_name)
        mask(key)
        return self.spec.with_changes(env={**self.spec.env, boundary.ENV_EVIDENCE_KEY: key})
