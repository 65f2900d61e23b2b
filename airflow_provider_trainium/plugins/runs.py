"""Trainium jobs as the view lists them, read from Airflow's metadata database (task instances and their XComs).

One rule says which task instances the view shows (``job_task``): those of the provider's job operators,
``TrainiumJobOperator`` and its subclasses (``TrainiumTrainingOperator``, the ``@task.trainium`` decorator's
operator, a DAG's own subclass), under their names now or before the rename. A DAG's own subclass carries its
own class name, so it is known by the ``job`` XCom every job operator pushes once its job is submitted (or the
``metrics`` XCom a training subclass pushes). Compile jobs are left out: they write under ``<output>/compile``
and their trials are not runs to watch. Every such task is listed, with or without a stream: whether its
output has one is a storage request, and the list is one database query; its page plots the stream when there
is one and says how to get one when there is none.

A *training* row (``training``: a ``TrainiumTrainingOperator`` task, or a job that pushed ``metrics``) is the
one a DAG run's page opens when it names no task, and the only kind compared across model versions. A row's
XComs give the output URI (``return_value``), the metrics summary (``metrics``), the job handle (``job``) and
the cost record (``trainium_cost``); the version the ``TrainiumRegisterModelOperator`` of the same DAG run
registered comes from that task's ``return_value`` and is shown on its training rows. Only DAGs in ``dag_ids``
(what the user may read) are queried, and XComs only of DAGs in ``xcom_dag_ids`` (what the user may read
XComs of): a row of any other DAG carries no XCom value (``xcom_hidden``). The row's ``rendered_output_uri``
is the task's own rendered ``output_uri`` (where the job writes when the DAG names a place); ``output_uri`` is
what the task pushed, for display only.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from airflow_provider_trainium.deprecated_names import with_former_names

#: The ``operator`` of a task instance, as Airflow recorded it: the class's name when the task ran, so a former
#: name too. The decorator's class is private; its tasks also carry the public ``custom_operator_name``.
JOB_OPERATORS = with_former_names("TrainiumJobOperator", "TrainiumTrainingOperator", "_TrainiumDecoratedOperator")
JOB_OPERATOR_NAMES = ("@task.trainium",)
TRAINING_OPERATORS = with_former_names("TrainiumTrainingOperator")
NOT_JOBS = with_former_names("TrainiumCompileOperator")
#: XComs only a job task pushes: ``job`` once its job is submitted, ``metrics`` when a training one ends.
JOB_XCOMS = ("job", "metrics")
REGISTER_OPERATORS = with_former_names("TrainiumRegisterModelOperator")
RUN_KEYS = ("return_value", "metrics", "job", "trainium_cost")
LAYOUT_FIELDS = ("instance_type", "nodes", "processes_per_node", "compute")
DEFAULT_LIMIT = 200


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _xcom_value(row: Any) -> Any:
    from airflow.models.xcom import XComModel

    return XComModel.deserialize_value(row)


def _pushed(keys: Iterable[str]) -> Any:
    """SQL: the task instance pushed an XCom under one of ``keys`` (whether it exists, not its value)."""
    from airflow.models.taskinstance import TaskInstance as TI
    from airflow.models.xcom import XComModel
    from sqlalchemy import and_, exists

    return exists().where(
        and_(
            XComModel.dag_id == TI.dag_id,
            XComModel.run_id == TI.run_id,
            XComModel.task_id == TI.task_id,
            XComModel.map_index == TI.map_index,
            XComModel.key.in_(list(keys)),
        )
    )


def job_task() -> Any:
    """SQL: the task instance is one the view shows, a Trainium job (the module's one rule, for the list and for
    one DAG run alike, so a task never appears on one and not the other)."""
    from airflow.models.taskinstance import TaskInstance as TI
    from sqlalchemy import and_, or_

    named = or_(TI.operator.in_(JOB_OPERATORS), TI.custom_operator_name.in_(JOB_OPERATOR_NAMES))
    return and_(or_(named, _pushed(JOB_XCOMS)), TI.operator.not_in(NOT_JOBS))


def training_task() -> Any:
    """SQL: among job tasks, a training one (what a DAG run's page opens first and what versions compare)."""
    from airflow.models.taskinstance import TaskInstance as TI
    from sqlalchemy import or_

    return or_(TI.operator.in_(TRAINING_OPERATORS), _pushed(["metrics"]))


def list_job_runs(
    session: Any, dag_ids: Iterable[str], xcom_dag_ids: Iterable[str], limit: int = DEFAULT_LIMIT
) -> list[dict[str, Any]]:
    """The newest job task instances of the given DAGs, each with its XComs, layout and registered version."""
    from airflow.models.taskinstance import TaskInstance as TI
    from sqlalchemy import select

    dag_ids = sorted(set(dag_ids))
    if not dag_ids:
        return []
    stmt = (
        select(TI, training_task().label("training"))
        .where(TI.dag_id.in_(dag_ids), job_task())
        .order_by(TI.start_date.desc().nulls_first(), TI.dag_id, TI.run_id, TI.task_id)
        .limit(limit)
    )
    return _describe(session, list(session.execute(stmt)), set(xcom_dag_ids))


def get_job_run(
    session: Any, dag_id: str, run_id: str, xcoms: bool, task_id: str | None = None, map_index: int = -1
) -> dict[str, Any] | None:
    """One DAG run's job task: the named one, else (no name, or a non-job task's page) its first training task,
    else its first job; None when the DAG run has no job task.

    ``xcoms``: whether the user may read this DAG's XComs.
    """
    runs = list_runs_of(session, dag_id, run_id, xcoms)
    named = [r for r in runs if r["task_id"] == task_id and r["map_index"] == map_index]
    training = [r for r in runs if r["training"]]
    found = named or training or runs
    return found[0] if found else None


def list_runs_of(session: Any, dag_id: str, run_id: str, xcoms: bool) -> list[dict[str, Any]]:
    """The job task instances of one DAG run, by task id."""
    from airflow.models.taskinstance import TaskInstance as TI
    from sqlalchemy import select

    stmt = (
        select(TI, training_task().label("training"))
        .where(TI.dag_id == dag_id, TI.run_id == run_id, job_task())
        .order_by(TI.task_id, TI.map_index)
    )
    return _describe(session, list(session.execute(stmt)), {dag_id} if xcoms else set())


def dag_run_exists(session: Any, dag_id: str, run_id: str) -> bool:
    """Whether the DAG run exists (a run without a job task gets a help page; a missing one is not found)."""
    from airflow.models.dagrun import DagRun
    from sqlalchemy import select

    return session.scalar(select(DagRun.id).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id)) is not None


def _describe(session: Any, found: list[Any], xcom_dag_ids: set[str]) -> list[dict[str, Any]]:
    """Rows for ``found`` (pairs of a task instance and whether it is a training task)."""
    if not found:
        return []
    tis = [ti for ti, _ in found]
    shown = [ti for ti in tis if ti.dag_id in xcom_dag_ids]
    xcoms = _xcoms(session, shown) if shown else {}
    layouts = _layouts(session, tis)
    versions = _registered_versions(session, {(ti.dag_id, ti.run_id) for ti in shown}) if shown else {}
    rows = []
    for ti, training in found:
        key = (ti.dag_id, ti.run_id, ti.task_id, ti.map_index)
        values = xcoms.get(key, {})
        metrics = values.get("metrics")
        cost = values.get("trainium_cost")
        rendered = layouts.get(key, {})
        layout = {k: v for k, v in rendered.items() if k in LAYOUT_FIELDS}
        rendered_uri = rendered.get("output_uri")
        if isinstance(cost, dict):  # the cost record names the layout the job really ran with
            layout.setdefault("instance_type", cost.get("instance_type"))
            layout.setdefault("nodes", cost.get("nodes"))
        output_uri = values.get("return_value")
        rows.append(
            {
                "dag_id": ti.dag_id,
                "run_id": ti.run_id,
                "task_id": ti.task_id,
                "map_index": ti.map_index,
                "operator": ti.operator,
                "operator_name": ti.custom_operator_name or ti.operator,
                "training": bool(training),
                "state": ti.state.value if hasattr(ti.state, "value") else ti.state,
                "try_number": ti.try_number,
                "start_date": _iso(ti.start_date),
                "end_date": _iso(ti.end_date),
                "duration_s": ti.duration,
                "layout": layout,
                "rendered_output_uri": rendered_uri if isinstance(rendered_uri, str) else None,
                "xcom_hidden": ti.dag_id not in xcom_dag_ids,
                "output_uri": output_uri if isinstance(output_uri, str) else None,
                "metrics": metrics if isinstance(metrics, dict) else None,
                "final": final_metrics(metrics if isinstance(metrics, dict) else {}),
                "cost": cost if isinstance(cost, dict) else None,
                "job": values.get("job") if isinstance(values.get("job"), dict) else None,
                # The registered model came from the run's training, not from its data preparation.
                "model": versions.get((ti.dag_id, ti.run_id)) if training else None,
            }
        )
    return rows


def final_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """The final loss and accuracy a summary reports (the trainers name them differently), None when absent."""
    loss = next((metrics[k] for k in ("final_loss", "eval_loss", "loss") if metrics.get(k) is not None), None)
    accuracy = next((metrics[k] for k in ("accuracy", "eval_accuracy") if metrics.get(k) is not None), None)
    return {"loss": loss, "accuracy": accuracy}


def _xcoms(session: Any, tis: list[Any]) -> dict[tuple[str, str, str, int], dict[str, Any]]:
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    stmt = select(XComModel).where(
        XComModel.dag_id.in_({ti.dag_id for ti in tis}),
        XComModel.run_id.in_({ti.run_id for ti in tis}),
        XComModel.task_id.in_({ti.task_id for ti in tis}),
        XComModel.key.in_(RUN_KEYS),
    )
    wanted = {(ti.dag_id, ti.run_id, ti.task_id, ti.map_index) for ti in tis}
    out: dict[tuple[str, str, str, int], dict[str, Any]] = {}
    for row in session.scalars(stmt):
        key = (row.dag_id, row.run_id, row.task_id, row.map_index)
        if key in wanted:
            out.setdefault(key, {})[row.key] = _xcom_value(row)
    return out


def _layouts(session: Any, tis: list[Any]) -> dict[tuple[str, str, str, int], dict[str, Any]]:
    """Instance type, nodes, processes per node, compute and output URI as the task rendered them."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as RTIF
    from sqlalchemy import select

    stmt = select(RTIF).where(
        RTIF.dag_id.in_({ti.dag_id for ti in tis}),
        RTIF.run_id.in_({ti.run_id for ti in tis}),
        RTIF.task_id.in_({ti.task_id for ti in tis}),
    )
    out = {}
    for row in session.scalars(stmt):
        fields = row.rendered_fields if isinstance(row.rendered_fields, dict) else {}
        out[(row.dag_id, row.run_id, row.task_id, row.map_index)] = {
            k: fields[k] for k in (*LAYOUT_FIELDS, "output_uri") if fields.get(k) not in (None, "", "None")
        }
    return out


def _registered_versions(session: Any, runs: set[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The model version each DAG run's ``TrainiumRegisterModelOperator`` registered (its ``return_value``)."""
    from airflow.models.taskinstance import TaskInstance as TI
    from airflow.models.xcom import XComModel
    from sqlalchemy import and_, select

    stmt = (
        select(XComModel)
        .join(
            TI,
            and_(
                TI.dag_id == XComModel.dag_id,
                TI.run_id == XComModel.run_id,
                TI.task_id == XComModel.task_id,
                TI.map_index == XComModel.map_index,
            ),
        )
        .where(
            TI.operator.in_(REGISTER_OPERATORS),
            XComModel.key == "return_value",
            XComModel.dag_id.in_({d for d, _ in runs}),
            XComModel.run_id.in_({r for _, r in runs}),
        )
    )
    out = {}
    for row in session.scalars(stmt):
        value = _xcom_value(row)
        if (row.dag_id, row.run_id) in runs and isinstance(value, dict) and "version" in value:
            out[(row.dag_id, row.run_id)] = {k: value.get(k) for k in ("name", "version", "uri")}
    return out


def previous_versions(run: dict[str, Any], candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs that registered earlier versions of the same model, newest first (for comparison on the run page)."""
    model = run.get("model") or {}
    if not model.get("name"):
        return []
    older = [
        c
        for c in candidates
        if (c.get("model") or {}).get("name") == model["name"]
        and isinstance((c.get("model") or {}).get("version"), int)
        and c["model"]["version"] < model["version"]
    ]
    by_version: dict[int, dict[str, Any]] = {}
    for c in older:  # the same version registered again (a retry) keeps the newest run listed first
        by_version.setdefault(c["model"]["version"], c)
    return [by_version[v] for v in sorted(by_version, reverse=True)]
