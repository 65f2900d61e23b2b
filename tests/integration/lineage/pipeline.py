"""A compile task and the training task that uses its cache, run with ``dag.test()`` on local compute.

Run as ``python -m tests.integration.lineage.pipeline <data_uri> <cache_uri>`` in a fresh process whose environment
configures OpenLineage (the listener and its transport are read once, when Airflow starts), as a worker would be.
"""

from __future__ import annotations

import sys
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_trainium.operators.compile import TrainiumCompileOperator
from airflow_provider_trainium.operators.training import TrainiumTrainingOperator
from tests.integration.registry.conftest import run_dag

DAG_ID = "lineage_mnist"


def main(data_uri: str, cache_uri: str) -> int:
    job = {
        "entry_point": "trainium_trainer.mnist_mlp.train",
        "compute": "local",
        "job_args": ["--data-uri", data_uri, "--epochs", "1", "--log-every", "10"],
        "env": {"TRAINIUM_RUNTIME": "eager"},
        "processes_per_node": 1,
        "compile_cache_uri": cache_uri,
    }
    with DAG(DAG_ID, schedule=None, start_date=datetime(2026, 11, 1)) as dag:
        compile_trial = TrainiumCompileOperator(task_id="compile", trial_steps=2, **job)
        train = TrainiumTrainingOperator(task_id="train", **job)
        compile_trial >> train
    run = run_dag(dag)
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    print(f"task states: {states}")
    return 0 if set(states.values()) == {"success"} else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
