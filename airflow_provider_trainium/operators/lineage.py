"""OpenLineage for the job operators: what a job read, what it wrote, and what ran it.

The operators describe a finished try as a plain ``JobLineage`` (``describe_job``; no OpenLineage import), and
``operator_lineage`` turns it into the provider's ``OperatorLineage`` only when the ``[openlineage]`` extra is
installed. The OpenLineage client is imported here at run time only, and this module only from inside the
operators' lineage methods, so parsing a DAG never loads it. Lineage is information: whatever goes wrong while
building it is a warning in the task log, never the task's failure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_trainium.registry.assets import openlineage_id
from trainium_trainer import boundary

if TYPE_CHECKING:
    from airflow_provider_trainium.compute.base import JobHandle
    from airflow_provider_trainium.neuron.spec import JobSpec
    from airflow_provider_trainium.operators.job import TrainiumJobOperator
    from airflow_provider_trainium.operators.job_spec import PreparedJob

#: The run facet's key in an event's ``run.facets``.
RUN_FACET = "trainiumJob"
#: The flags whose values a job reads: its data, the model it starts from, the tokenizer, the model it evaluates.
INPUT_FLAGS: tuple[str, ...] = ("--data-uri", "--input-uri", "--base-model-uri", "--tokenizer-uri", "--model-uri")
#: The cost record's fields the facet carries (``compute.cost.cost_record``).
COST_FIELDS: tuple[str, ...] = (
    "usd",
    "estimate_usd",
    "is_estimate",
    "price_per_node_hour_usd",
    "price_date",
    "wall_s",
    "started_at",
    "stopped_at",
)


def flag_values(args: Sequence[str], flags: Iterable[str] = INPUT_FLAGS) -> list[str]:
    """The values of ``flags`` in ``args``, as ``--flag value`` or ``--flag=value``, in order."""
    wanted = set(flags)
    found: list[str] = []
    for i, word in enumerate(args):
        name, eq, value = str(word).partition("=")
        if name in wanted and eq:
            found.append(value)
        elif word in wanted and i + 1 < len(args):
            found.append(str(args[i + 1]))
    return found


def is_location(uri: str | None) -> bool:
    """A storage URI or an absolute path; a registry reference (``name@alias``) or an empty value is not."""
    return bool(uri) and ("://" in str(uri) or str(uri).startswith("/"))


def unique_locations(uris: Iterable[str | None]) -> list[str]:
    """The locations among ``uris``, each once (a trailing slash does not make another), in order."""
    seen: set[str] = set()
    found: list[str] = []
    for uri in uris:
        if not is_location(uri):
            continue
        key = str(uri).rstrip("/")
        if key not in seen:
            seen.add(key)
            found.append(key)
    return found


def image_details(reference: str | None, in_container: bool) -> dict[str, Any] | None:
    """``{"uri", "digest", "inContainer"}`` of the job's image; the digest only when the reference pins one."""
    if not reference:
        return None
    _, at, digest = reference.partition("@")
    return {"uri": reference, "digest": digest if at and digest else None, "inContainer": in_container}


def cost_details(record: Mapping[str, Any] | None, budget_usd: Any = None) -> dict[str, Any] | None:
    """What the job cost (``trainium_cost``) and the budget it ran under; None when neither is known."""
    cost = {name: record[name] for name in COST_FIELDS if record and name in record}
    if budget_usd not in (None, ""):
        cost["budget_usd"] = float(budget_usd)
    return cost or None


@dataclass(frozen=True)
class JobLineage:
    """One job's lineage in plain values: the locations it read and wrote and its run facet's fields."""

    inputs: list[str]
    outputs: list[str]
    compute: str
    job_name: str
    job_id: str | None = None
    image: dict[str, Any] | None = None
    layout: dict[str, Any] = field(default_factory=dict)
    cost: dict[str, Any] | None = None
    compile_cache: dict[str, Any] | None = None


def job_locations(spec: JobSpec) -> tuple[list[str], list[str]]:
    """What a job read (the data and models its arguments name, the compile cache it starts from) and what it wrote
    (its output folder and checkpoints, which the registry's lineage names as its inputs)."""
    cache = spec.env.get(boundary.ENV_COMPILE_CACHE_URI)
    return [*flag_values(spec.args), *([cache] if cache else [])], [str(spec.output_uri), spec.checkpoint_uri or ""]


def compile_cache_details(spec: JobSpec) -> dict[str, Any] | None:
    """The compile cache's part of the run facet: the cache the job started from, if any."""
    cache = spec.env.get(boundary.ENV_COMPILE_CACHE_URI)
    return {"uri": cache} if cache else None


def describe_job(
    operator: TrainiumJobOperator,
    prepared: PreparedJob | None,
    handle: JobHandle | None,
    cost: Mapping[str, Any] | None,
) -> JobLineage | None:
    """``operator``'s try as a ``JobLineage``, from what its ``prepare`` and wait kept: the job it prepared, the
    handle of the job it ran and its cost record (None: nothing was prepared, e.g. bad input failed the task first).
    The operator's ``lineage_locations`` and ``lineage_compile_cache`` say what the job read and wrote."""
    if prepared is None:
        return None
    spec = prepared.spec
    backend = operator.backend_for(prepared.compute)
    inputs, outputs = operator.lineage_locations(spec)
    layout = {
        "instanceType": spec.instance_type,
        "nodes": spec.nodes,
        "processesPerNode": spec.nproc_per_node,
        "neuronCoresPerNode": spec.instance.neuron_cores,
        "worldSize": spec.world_size,
        "tensorParallelSize": spec.tensor_parallel_size,
        "stack": spec.stack,
        "workload": spec.workload,
        "distributed": spec.distributed,
    }
    return JobLineage(
        inputs=unique_locations(inputs),
        outputs=unique_locations(outputs),
        compute=prepared.compute,
        job_name=prepared.job_name,
        job_id=handle.job_id if handle is not None else None,
        image=image_details(spec.image, backend.runs_image),
        layout=layout,
        cost=cost_details(cost, operator.max_cost_usd),
        compile_cache=operator.lineage_compile_cache(spec),
    )


try:
    from attrs import define
    from openlineage.client.facet_v2 import RunFacet

    @define
    class TrainiumJobRunFacet(RunFacet):
        """The job behind a task try: where it ran, in which image, on what layout, and what it cost."""

        compute: str
        jobName: str  # noqa: N815 - OpenLineage facets name their fields in camelCase
        jobId: str | None = None  # noqa: N815
        image: dict[str, Any] | None = None
        layout: dict[str, Any] | None = None
        cost: dict[str, Any] | None = None
        compileCache: dict[str, Any] | None = None  # noqa: N815

        _additional_skip_redact = ["compute", "jobName", "jobId", "image", "layout", "cost", "compileCache"]

        @staticmethod
        def _get_schema() -> str:
            return "https://pypi.org/project/airflow-provider-trainium/#TrainiumJobRunFacet"

except ImportError:  # the [openlineage] extra is not installed: operator_lineage returns None first
    TrainiumJobRunFacet = None  # type: ignore[assignment,misc]  # a class when the extra is installed


def run_facet(lineage: JobLineage) -> Any:
    """The ``trainiumJob`` run facet of ``lineage``."""
    if TrainiumJobRunFacet is None:
        raise ImportError("the OpenLineage client is not installed")
    return TrainiumJobRunFacet(
        compute=lineage.compute,
        jobName=lineage.job_name,
        jobId=lineage.job_id,
        image=lineage.image,
        layout=lineage.layout or None,
        cost=lineage.cost,
        compileCache=lineage.compile_cache,
    )


def operator_lineage(describe: Callable[[], JobLineage | None], log: logging.Logger | logging.LoggerAdapter) -> Any:
    """``OperatorLineage`` for what ``describe`` returns (empty when it returns None: nothing was prepared);
    None without the OpenLineage provider, or with a warning when building it fails."""
    try:
        from airflow.providers.common.compat.openlineage.facet import Dataset
        from airflow.providers.openlineage.extractors import OperatorLineage
    except ImportError:  # the [openlineage] extra is not installed
        return None
    try:
        lineage = describe()
        if lineage is None:
            return OperatorLineage()
        return OperatorLineage(
            inputs=[Dataset(*openlineage_id(uri)) for uri in lineage.inputs],
            outputs=[Dataset(*openlineage_id(uri)) for uri in lineage.outputs],
            run_facets={RUN_FACET: run_facet(lineage)},
        )
    except Exception as err:  # noqa: BLE001 - lineage is information; the task's result stands
        log.warning("OpenLineage facets could not be built: %s", err)
        return None
