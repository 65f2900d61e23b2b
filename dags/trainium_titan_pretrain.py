"""TorchTitan pretraining on Trainium: image -> data prep -> TorchTitan's trainer -> evaluate -> register -> promote.

Manual trigger. ``trainium_trainer.titan.train`` runs TorchTitan's own ``Trainer`` from a job config generated from the
run's params, inside our launcher, rendezvous, stream, cost and registry; its last checkpoint comes out as a
Hugging Face directory, which the evaluation job and the registry take like the native trainer's.

* Native stack only (TorchTitan runs on TorchNeuron): ``stack`` has the one choice ``native``, and a Trn1
  instance type fails the first task. Locally it trains on this machine's CPU with gloo, standing in for a
  Trn2/Trn3 type.
* No compile task: TorchTitan runs eager here (no ``torch.compile`` in its job config), so there is no graph
  cache to warm.
* Checkpoints go to the run's checkpoint URI: a folder on local compute, ``s3://`` on ECS/Batch, where each node
  mirrors it (TorchTitan's checkpointer writes local files) and pushes each checkpoint as it is saved, so a
  retry resumes from the last one on any instance.
* Several nodes on Batch (a multi-node parallel job, up to what the catalog allows for the instance type; ECS runs
  one instance and refuses ``nodes`` > 1; local compute runs each node as a launcher on this machine). Every
  node pushes its own ranks' shards after each save, and rank 0 pulls the other nodes' before it exports the
  last checkpoint. Each node mirrors into its own folder, keyed by its node index, also when local compute
  runs them on one machine.

Image step: on ECS/Batch without an ``image`` param, ``TrainiumImageBuildOperator`` builds (or finds) the native
training image for the repository this DAG file lives in; on local compute, or with an ``image``, it is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import DAG, Param

from airflow_provider_trainium import dag_kit as kit
from airflow_provider_trainium.dag_kit import planned
from airflow_provider_trainium.operators.image import TrainiumImageBuildOperator
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from airflow_provider_trainium.operators.registry import TrainiumRegisterModelOperator
from airflow_provider_trainium.operators.training import TrainiumTrainingOperator
from airflow_provider_trainium.params import (
    corpus_params,
    image_param,
    layout_params,
    tensor_parallel_param,
    training_params,
)

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig

ENTRY_POINT = "trainium_trainer.titan.train"
#: Mirrors trainium_trainer.titan.spec.FLAVORS (DAG files never import the trainer).
FLAVORS = ["debugmodel", "llama-1b", "llama2-13b", "llama2-7b", "llama3-70b", "llama3-8b", "small", "tiny"]
MODEL_NAME = "llama-titan-pretrain"
STACK = "native"
IMAGE = "{{ params.image or ti.xcom_pull(task_ids='build_image') or '' }}"
#: Promotion gate, fixed here and not in run params: the held-out loss must beat the same architecture's
#: untrained (seeded random) initialisation by this many nats before the version becomes ``latest``.
MIN_IMPROVEMENT_OVER_UNTRAINED = 0.5
#: This DAG runs only when triggered; its author lets such runs move ``latest`` once they pass the gate.
PROMOTE_MANUAL_RUNS = True
#: Budget ceiling per job (USD): the most this DAG's own limits can bill, 64 nodes (the catalog's most) x
#: $35.76/h (trn2.48xlarge, the dearest priced type) x the 48 h training timeout = $109,854.72, rounded up.
#: Every layout the form accepts fits it; a run may lower the budget, never raise or clear it.
MAX_COST_USD_CEILING = 109_855

TRAIN_ARGS = [
    "--data-uri",
    planned("data_uri"),
    "--checkpoint-uri",
    planned("checkpoint_uri"),
    *kit.param_args("flavor", "max_steps", "batch_size", "learning_rate", "seed", "log_every"),
    *kit.param_args("checkpoint_every", "keep_checkpoints", "tensor_parallel_size"),
]


def run_plan(params: Mapping[str, Any], config: TrainiumConfig, context: Mapping[str, Any]) -> dict[str, Any]:
    """This run's URIs under ``<artifact root>/llama/titan/<run key>``."""
    prefix = kit.run_prefix(config, "llama", "titan", run_id=context["run_id"])
    return {**kit.stage_uris(prefix), "tokenizer_uri": f"{prefix}/data/tokenizer.json"}


def gate_verdict(result: dict[str, Any], plan: dict[str, Any], registered: Any) -> str:
    """Promote only a model whose held-out loss clears the DAG's fixed gate."""
    verdict = "passes" if result["improved"] else "fails"
    return (
        f"eval loss {result['eval_loss']} vs untrained {result['base_eval_loss']}: {verdict} the gate "
        f"(at least {MIN_IMPROVEMENT_OVER_UNTRAINED} lower)"
    )


with DAG(
    dag_id="trainium_titan_pretrain",
    description="Pretrain a Llama-architecture model with TorchTitan's trainer on Trainium (or locally)",
    schedule=None,
    max_active_runs=1,
    tags=["trainium", "llama", "torchtitan"],
    **kit.dag_args(),
    params={
        **layout_params("trn2.48xlarge", stack=STACK, max_cost_usd_ceiling=MAX_COST_USD_CEILING),
        "tensor_parallel_size": tensor_parallel_param(),
        "flavor": Param("tiny", enum=FLAVORS, description="TorchTitan's debugmodel or one of our presets"),
        **training_params(max_steps=60, batch_size=8, learning_rate=3e-3, checkpoint_every=20),
        "seed": Param(0, type="integer", minimum=0, description="model init and data order"),
        **corpus_params(),
        "image": image_param(),
    },
) as dag:
    build_image = TrainiumImageBuildOperator(
        task_id="build_image",
        stack="{{ params.stack }}",
        instance_type="{{ params.instance_type }}",
    )
    prepare_data = kit.prepare_llama_data(IMAGE, trigger_rule="none_failed_min_one_success")
    train = TrainiumTrainingOperator(
        task_id="train",
        entry_point=ENTRY_POINT,
        job_args=TRAIN_ARGS,
        **kit.job_layout(IMAGE, workload="llm"),
        **kit.planned_training_uris(),
        execution_timeout=timedelta(hours=48),
    )
    evaluate = TrainiumJobOperator(
        task_id="evaluate",
        entry_point="trainium_trainer.llama.evaluate",
        job_args=[
            "--model-uri",
            kit.output_of("train"),
            "--data-uri",
            planned("data_uri"),
            "--batch-size",
            "{{ params.batch_size }}",
            "--min-improvement",
            str(MIN_IMPROVEMENT_OVER_UNTRAINED),
        ],
        output_uri=planned("eval_uri"),
        **kit.job_layout(IMAGE, single_node=True),
    )
    register = TrainiumRegisterModelOperator(
        task_id="register",
        model_name=MODEL_NAME,
        source_uri=kit.output_of("train"),
        register_failed_models=True,  # every run's model is kept; the gate below decides what becomes latest
        dataset_uri=planned("data_uri"),
        checkpoint_uri=planned("checkpoint_uri"),
        image=IMAGE,
    )
    promote = kit.promote_latest(
        MODEL_NAME, reason="held-out loss cleared the pretraining gate", promote_manual_runs=PROMOTE_MANUAL_RUNS
    )

    plan = kit.check_params_task(ENTRY_POINT, inputs=["input_uri"], plan=run_plan, only_stack=STACK)
    plan >> kit.image_branch_task(build_task_id="build_image", skip_to="prepare_data") >> [build_image, prepare_data]
    build_image >> prepare_data >> kit.has_data_task(plan) >> train >> evaluate >> register
    register >> kit.evaluation_gate_task(plan, describe=gate_verdict) >> promote
