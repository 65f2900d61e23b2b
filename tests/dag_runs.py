"""The repository's DAGs as ``dag.test()`` tests load them, and what a finished run left in the database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DAGS = Path(__file__).resolve().parents[1] / "dags"


def get_dag(dag_id: str) -> Any:
    """``dag_id`` from the DAG folder, which must parse without an import error."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    return bag.get_dag(dag_id)


def states(run: Any) -> dict[str, str]:
    """Task id -> state of a finished ``dag.test()`` run."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=run.dag_id, run_id=run.run_id).all()
        return {ti.task_id: str(ti.state) for ti in tis}
