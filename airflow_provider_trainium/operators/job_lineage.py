"""The job operator's OpenLineage hooks: what a subclass overrides to say what its job read and wrote.

The facets themselves are built in ``operators.lineage``, which loads the OpenLineage client and the registry: a
DAG file that declares a job task must load neither, so the operator's class takes its hooks from here and each
hook imports ``operators.lineage`` only when an event is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_trainium.compute.base import JobHandle
    from airflow_provider_trainium.neuron.spec import JobSpec
    from airflow_provider_trainium.operators.job_spec import PreparedJob


class JobLineageMixin:
    """The part of ``TrainiumJobOperator`` that describes its try to OpenLineage, from what the try kept."""

    if TYPE_CHECKING:  # what TrainiumJobOperator (and BaseOperator) give it
        log: Any  # BaseOperator's logger (its type differs across the Airflow versions we support)
        _prepared: PreparedJob | None
        _handle: JobHandle | None
        _cost: dict[str, Any] | None

    def lineage_locations(self, spec: JobSpec) -> tuple[list[str], list[str]]:
        """What the job read and what it wrote (``lineage.job_locations``); a subclass adds its own."""
        from airflow_provider_trainium.operators.lineage import job_locations

        return job_locations(spec)

    def lineage_compile_cache(self, spec: JobSpec) -> dict[str, Any] | None:
        """The compile cache's part of the run facet (the compile operator adds the key it recorded)."""
        from airflow_provider_trainium.operators.lineage import compile_cache_details

        return compile_cache_details(spec)

    def describe_lineage(self) -> Any:
        """This try's job as a ``lineage.JobLineage``, from what ``prepare`` and the wait kept (None: nothing was
        prepared, e.g. bad input failed the task first)."""
        from airflow_provider_trainium.operators.lineage import describe_job

        return describe_job(self, self._prepared, self._handle, self._cost)  # type: ignore[arg-type]  # set by then

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Inputs: the data and models the job read; outputs: what it wrote; run facet ``trainiumJob``: its image,
        layout and cost. None without the OpenLineage provider; a failure to build them is only a warning."""
        from airflow_provider_trainium.operators.lineage import operator_lineage

        return operator_lineage(self.describe_lineage, self.log)
