"""Where a task of this run put its output: derived from the run's identity and the DAG's layout, never taken
from an XCom alone.

Whoever may edit XComs (the simple auth manager's USER role may) could otherwise point ``register`` at any
directory. So a task that acts on another task's output re-derives it the way the producing task did: its own
``output_uri`` setting rendered for this run, or its default ``<artifact root>/runs/<dag_id>/<run key>/<task_id>``.
An XCom that names another place is an error naming both (``XComMismatchError``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_trainium.compute import naming


class XComMismatchError(ValueError):
    """An XCom names another URI than the one this run's identity and the DAG's layout give."""


def instance_prefix(
    artifact_root: str, kind: str, dag_id: str, run_id: str, task_id: str, map_index: int | None = None
) -> str:
    """``<artifact_root>/<kind>/<dag_id>/<run key>/<task_id>[/<map_index>]``: one task instance's place."""
    parts = [artifact_root.rstrip("/"), kind, dag_id, naming.run_key(run_id), task_id]
    if map_index is not None and map_index >= 0:
        parts.append(str(map_index))
    return "/".join(parts)


def same_uri(a: str, b: str) -> bool:
    from airflow_provider_trainium.artifacts import normalize

    return normalize(str(a)).rstrip("/") == normalize(str(b)).rstrip("/")


def checked_against_xcom(derived: str, xcom: Any, task_id: str, what: str = "output") -> str:
    """``derived``, when the ``task_id`` task's XCom (if it pushed one) names the same place; else the error."""
    if xcom is None or same_uri(str(xcom), derived):
        return derived
    raise XComMismatchError(
        f"the XCom of task {task_id!r} names {xcom!r} as its {what}, but this run's identity and the DAG's layout "
        f"put it at {derived!r}: refusing the XCom (XComs can be edited; the layout cannot)"
    )


def producer_task(context: Mapping[str, Any], task_id: str) -> Any:
    """The DAG's ``task_id`` task (a ``TrainiumJobOperator``); ValueError when there is no such job task."""
    from airflow_provider_trainium.operators.job import TrainiumJobOperator

    dag = context.get("dag") or context["ti"].task.dag
    if not dag.has_task(task_id):
        raise ValueError(f"DAG {dag.dag_id!r} has no task {task_id!r} whose output could be derived")
    task = dag.get_task(task_id)
    if not isinstance(task, TrainiumJobOperator):
        raise ValueError(f"task {task_id!r} is a {type(task).__name__}, not a job task: its output cannot be derived")
    return task


def derived_output_uri(context: Mapping[str, Any], task_id: str) -> str:
    """Where the ``task_id`` job task of this run writes its output: its ``output_uri`` rendered for this run, or
    its default place under the run's prefix (``TrainiumJobOperator.run_prefix``)."""
    task = producer_task(context, task_id)
    if task.output_uri:
        return str(task.render_template(task.output_uri, dict(context))).strip()
    ti = context["ti"]
    return instance_prefix(task.config().artifact_root, "runs", ti.dag_id, ti.run_id, task.task_id)


def task_output_uri(context: Mapping[str, Any], task_id: str) -> str:
    """The ``task_id`` task's derived output, checked against what its XCom says (an edited XCom fails)."""
    derived = derived_output_uri(context, task_id)
    return checked_against_xcom(derived, context["ti"].xcom_pull(task_ids=task_id), task_id)


def task_cache_uri(context: Mapping[str, Any], task_id: str) -> str:
    """The compile cache the ``task_id`` compile task filled in this run, derived the way it chose it, checked
    against its XCom's ``compile_cache_uri``."""
    task = producer_task(context, task_id)
    setting = task.render_template(task.compile_cache_uri, dict(context)) if task.compile_cache_uri else None
    from airflow_provider_trainium.operators.compile import default_compile_cache_uri

    derived = str(setting).strip() if setting else default_compile_cache_uri(task.config(), context["ti"].dag_id)
    xcom = context["ti"].xcom_pull(task_ids=task_id)
    pushed = xcom.get("compile_cache_uri") if isinstance(xcom, dict) else xcom
    return checked_against_xcom(derived, pushed, task_id, "compile cache")
