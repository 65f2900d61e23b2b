"""OpenLineage for the job operators: what a job read, what it wrote, and what ran it.

The operators describe a finished try as a plain ``JobLineage`` (no OpenLineage import), and ``operator_lineage``
turns it into the provider's ``OperatorLineage`` only when the ``[openlineage]`` extra is installed. The
OpenLineage client is imported here at run time only, and this module only from inside the operators' lineage
methods, so parsing a DAG never loads it. Lineage is information: whatever goes wrong while building it is a
warning in the task log, never the task's failure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_trainium.registry.assets import openlineage_id

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
    TrainiumJobRunFacet = None  # type: ignore[assignment,misc]


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
