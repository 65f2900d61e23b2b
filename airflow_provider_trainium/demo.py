"""``python -m airflow_provider_trainium.demo [DAG_ID]``: run a DAG once with ``dag.test()`` and report.

This is what ``make demo`` runs: the MNIST pipeline on the embedded default (local compute, torch-xla on
the CPU, a ``file://`` registry under ``$AIRFLOW_HOME/trainium``), then where the model was registered
and its accuracy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def task_xcom(dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(run_id=run_id, dag_ids=dag_id, task_ids=task_id, key=key)
        values = [XComModel.deserialize_value(row) for row in session.scalars(query).all()]
    return values[0] if values else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dag_id", nargs="?", default="trainium_mnist_mlp")
    parser.add_argument("--conf", default="{}", help="run conf (JSON), validated against the DAG's params")
    args = parser.parse_args(argv)

    from airflow.dag_processing.dagbag import DagBag

    from airflow_provider_trainium.deployment_files import dags_folder as shipped_dags

    dags_folder = os.environ.get("AIRFLOW__CORE__DAGS_FOLDER") or str(shipped_dags())
    bag = DagBag(dag_folder=dags_folder)
    if bag.import_errors:
        print(json.dumps(bag.import_errors, indent=2), file=sys.stderr)
        return 1
    dag = bag.get_dag(args.dag_id)
    started = time.perf_counter()
    run = dag.test(run_conf=json.loads(args.conf))
    elapsed = time.perf_counter() - started
    print()
    print(f"{args.dag_id}: run {run.run_id} {run.state} in {elapsed:.0f} s")
    if str(run.state) != "success":
        return 1
    registered = task_xcom(args.dag_id, run.run_id, "register")
    metrics = task_xcom(args.dag_id, run.run_id, "train", key="metrics") or {}
    if registered:
        print(f"registered model: {registered.get('name')} version {registered.get('version')}")
        print(f"location:         {registered.get('uri')}")
    if metrics:
        print(f"accuracy:         {metrics.get('accuracy')}")
        print(f"samples/s:        {metrics.get('samples_per_second')} ({metrics.get('runtime')}, "
              f"{metrics.get('world_size')} ranks; XLA graphs compiled {metrics.get('xla_compilations')}, "
              f"missing from the compile cache {metrics.get('xla_cache_missing')})")  # fmt: skip
    print_view_address(args.dag_id, run.run_id)
    return 0


def print_view_address(dag_id: str, run_id: str) -> None:
    """Where the Trainium view shows this run: an API server over this Airflow home serves it."""
    from urllib.parse import urlencode

    home = os.environ.get("AIRFLOW_HOME", "~/airflow")
    airflow = Path(sys.executable).parent / "airflow"
    query = urlencode({"dag_id": dag_id, "run_id": run_id})
    print(f"Trainium view:    AIRFLOW_HOME={home} {airflow} api-server --port 8080, then open")
    print("                  http://127.0.0.1:8080/plugin/trainium (all runs)")
    print(f"                  http://127.0.0.1:8080/trainium/?{query} (this run)")


if __name__ == "__main__":
    sys.exit(main())
