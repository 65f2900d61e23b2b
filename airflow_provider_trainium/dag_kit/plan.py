"""The run plan: the URIs a DAG's first task chooses for the run, written as a record under the run's prefix.

Later tasks read the plan from that record, not from the first task's XCom: XComs can be edited, and the record
carries a seal only Airflow can make (``registry.seal``), so a job that rewrites it, or an XCom that disagrees
with it, fails the task naming both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig

#: The first task's id; its return value is the run plan that ``planned`` reads.
PLAN_TASK_ID = "check_params"
#: The plan record the first task writes under its own place in the run's prefix.
PLAN_RECORD = "plan.json"

PlanFunction = Callable[[Mapping[str, Any], "TrainiumConfig", Mapping[str, Any]], dict[str, Any]]


def plan_record_uri(artifact_root: str, dag_id: str, run_id: str, task_id: str = PLAN_TASK_ID) -> str:
    """Where the plan task of a run writes its plan: its own place under the run's prefix."""
    from airflow_provider_trainium.operators.run_outputs import instance_prefix

    return f"{instance_prefix(artifact_root, 'runs', dag_id, run_id, task_id)}/{PLAN_RECORD}"


def plan_record(context: Mapping[str, Any], task_id: str = PLAN_TASK_ID) -> dict[str, Any]:
    """This run's plan as the plan task wrote it under the run's prefix; an XCom that says otherwise fails the
    task, naming both (XComs can be edited), and so does a record whose seal does not hold."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_provider_trainium import artifacts
    from airflow_provider_trainium.dag_kit.helpers import trainium_config
    from airflow_provider_trainium.registry.seal import plan_key, seal_holds
    from trainium_trainer import boundary

    ti = context["ti"]
    uri = plan_record_uri(trainium_config().artifact_root, ti.dag_id, ti.run_id, task_id)
    record = artifacts.read_json(uri, missing_ok=True)
    if not isinstance(record, dict):
        raise AirflowFailException(f"no plan record at {uri}: the {task_id!r} task of this run has not planned it")
    if not seal_holds(record, plan_key(ti.dag_id, ti.run_id, task_id)):
        raise AirflowFailException(f"the plan record at {uri} is not sealed by this run's {task_id!r} task: edited, "
                                   "or written by a job")  # fmt: skip
    record = {k: v for k, v in record.items() if k != boundary.SEAL_FIELD}
    xcom = ti.xcom_pull(task_ids=task_id)
    if xcom is not None and xcom != record:
        pushed = xcom if isinstance(xcom, dict) else {}
        changed = sorted(k for k in {*record, *pushed} if pushed.get(k) != record.get(k))
        says = {k: pushed.get(k) for k in changed} if isinstance(xcom, dict) else xcom
        raise AirflowFailException(
            f"the XCom of task {task_id!r} disagrees with the plan record at {uri}: XCom {says!r}, record "
            f"{ {k: record.get(k) for k in changed}!r}; refusing the XCom (XComs can be edited)"
        )
    return record


def write_plan_record(
    context: Mapping[str, Any], config: TrainiumConfig, plan: Mapping[str, Any], task_id: str = PLAN_TASK_ID
) -> str:
    """Write the run's plan to ``plan_record_uri``, sealed with a key no job gets (``registry.seal``); later tasks
    read it there (``plan_record``), not from XCom, and refuse it edited."""
    from airflow_provider_trainium import artifacts
    from airflow_provider_trainium.registry import store
    from airflow_provider_trainium.registry.seal import plan_key, sealed

    ti = context["ti"]
    uri = plan_record_uri(config.artifact_root, ti.dag_id, ti.run_id, task_id)
    record = sealed(store.jsonable(dict(plan)), plan_key(ti.dag_id, ti.run_id, task_id))
    store.write(artifacts.open_path(uri), store.dump_json(record))
    return uri
