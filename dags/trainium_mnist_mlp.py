"""MNIST MLP on Trainium: prepare data -> compile -> train -> evaluate -> register.

Runs on a laptop (local compute, torch-xla CPU, file:// registry) or on Trn1 (ECS for one node, AWS Batch
for more) by configuration alone: set ``compute`` or define the ``trainium_default`` connection.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param

from airflow_provider_trainium import dag_kit as kit
from airflow_provider_trainium.dag_kit import output_of, param_args
from airflow_provider_trainium.dag_kit import params as p
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from airflow_provider_trainium.operators.registry import TrainiumRegisterModelOperator

#: Promotion gate: fixed here by the DAG's author, never by a run's conf.
MIN_ACCURACY = 0.9
#: This DAG runs only when triggered; its author lets such runs move ``latest`` once they pass the gate.
PROMOTE_MANUAL_RUNS = True
#: Budget ceiling per job (USD): the most this DAG's own limits can bill, 64 nodes (the catalog's most) x
#: $35.76/h (trn2.48xlarge, the dearest priced type) x the 2 h training timeout = $4,577.28, rounded up.
#: Every layout the form accepts fits it; a run may lower the budget, never raise or clear it.
MAX_COST_USD_CEILING = 4578

#: Each task's output as this run's layout puts it (never an XCom alone: an edited one fails the task).
DATA_URI = output_of("prepare_data")
MODEL_URI = output_of("train")
TRAIN_ARGS = ["--data-uri", DATA_URI, *param_args("epochs", "batch_size", "learning_rate"), "--momentum", "0.9"]

with kit.trainium_dag(
    "trainium_mnist_mlp",
    "Train the MNIST MLP on Trainium (or locally) and register it",
    tags=["example"],
    max_active_runs=1,
    params={
        **p.layout_params(max_cost_usd_ceiling=MAX_COST_USD_CEILING),
        "epochs": Param(5, type="integer", minimum=1, maximum=100),
        "batch_size": Param(32, type="integer", minimum=1, maximum=4096, description="per NeuronCore"),
        "learning_rate": Param(0.05, type="number", exclusiveMinimum=0, maximum=10),
        "image": p.image_param(),
    },
) as dag:
    prepare_data = TrainiumJobOperator(
        task_id="prepare_data",
        entry_point="trainium_trainer.mnist_mlp.prepare",
        job_args=["--seed", "0"],
        **kit.job_layout(single_node=True, instance_type=None),
    )
    compile_graphs, train = kit.compile_then_train(
        entry_point="trainium_trainer.mnist_mlp.train",
        job_args=TRAIN_ARGS,
        layout=kit.job_layout(),
        execution_timeout=timedelta(hours=2),
    )
    evaluate = TrainiumJobOperator(
        task_id="evaluate",
        entry_point="trainium_trainer.mnist_mlp.evaluate",
        job_args=["--model-uri", MODEL_URI, "--data-uri", DATA_URI, "--min-accuracy", str(MIN_ACCURACY)],
        **kit.job_layout(single_node=True),
    )
    register = TrainiumRegisterModelOperator(
        task_id="register",
        model_name="mnist-mlp",
        source_uri=MODEL_URI,  # registered only with the evaluate job's passing verdict for these very files
        dataset_uri=DATA_URI,
        image=kit.IMAGE_FROM_PARAMS,
        promote_alias="latest",
        promote_manual_runs=PROMOTE_MANUAL_RUNS,
    )
    (
        kit.check_params_task("trainium_trainer.mnist_mlp.train")
        >> prepare_data
        >> compile_graphs
        >> train
        >> evaluate
        >> register
    )
