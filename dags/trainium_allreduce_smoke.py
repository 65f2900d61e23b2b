"""Cluster smoke test before an expensive run: N nodes all-reduce a tensor and check the sum.

Every rank of every node adds its tensor; the job fails unless the sum equals the world size (and the sum
of rank + 1 equals W(W+1)/2). On Trainium (compute=batch) the reduction uses the ``xla`` backend on the
NeuronCores and EFA between nodes, so a bad device mapping, a missing EFA interface or a wrong rendezvous
shows up here in minutes; compute=ecs (one node) checks one instance's NeuronCores. With compute=local it
runs 2 nodes x 2 processes on this machine; torch-xla's CPU client has no cross-process collectives, so
there the reduction goes through ``gloo`` on the host.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param

from airflow_provider_trainium import dag_kit as kit
from airflow_provider_trainium.dag_kit import params as p
from airflow_provider_trainium.neuron.catalog import CATALOG
from airflow_provider_trainium.operators.job import TrainiumJobOperator

MULTI_NODE_TYPES = sorted(name for name, it in CATALOG.items() if it.multi_node)
#: Budget ceiling per job (USD): the most this DAG's own limits can bill, 64 nodes (the catalog's most) x
#: $35.76/h (trn2.48xlarge, the dearest priced type) x the 30 min timeout = $1,144.32, rounded up. Every layout
#: the form accepts fits it; a run may lower the budget, never raise or clear it.
MAX_COST_USD_CEILING = 1145

with kit.trainium_dag(
    "trainium_allreduce_smoke",
    "N nodes all-reduce a tensor and check the sum: validates a cluster before a long run",
    tags=["smoke"],
    retries=0,
    params={
        **p.layout_params(
            "trn1.32xlarge",
            2,
            instance_types=MULTI_NODE_TYPES,
            computes=["auto", "local", "ecs", "batch"],
            compute_description="auto: local without a trainium_default connection, else ECS for one node and "
            "AWS Batch for more",
            max_cost_usd_ceiling=MAX_COST_USD_CEILING,
        ),
        "bandwidth_mb": Param(16, type="number", minimum=0, maximum=4096, description="timed all-reduce size"),
        "image": p.image_param(),
    },
) as dag:
    check_layout = kit.check_params_task("trainium_trainer.allreduce", task_id="check_layout")
    check_layout >> TrainiumJobOperator(
        task_id="allreduce",
        entry_point="trainium_trainer.allreduce",
        job_args=["--bandwidth-mb", "{{ params.bandwidth_mb }}"],
        **kit.job_layout(),
        execution_timeout=timedelta(minutes=30),
    )
