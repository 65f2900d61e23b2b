"""Llama pretraining on Trainium: image -> data prep -> compile -> pretrain -> evaluate -> register -> promote.

Manual trigger. Runs on a laptop (local compute, torch-xla CPU, ``tiny`` preset) or on Trn1 (ECS for one
node, AWS Batch multi-node for more) by configuration alone. Checkpoints go to the artifact root every
``checkpoint_every`` steps while training runs, so a retry resumes where the failed try stopped.

Image step: on ECS/Batch without an ``image`` param, ``TrainiumImageBuildOperator`` builds (or finds) the
training image of the run's stack (native or XLA) for the repository this DAG file lives in and every job runs
that exact digest; on local compute, or with an ``image`` given, the build is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import DAG, Param

from airflow_provider_trainium import dag_kit as kit
from airflow_provider_trainium.dag_kit import RUNTIME_ENV, planned
from airflow_provider_trainium.operators.image import TrainiumImageBuildOperator
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from airflow_provider_trainium.operators.registry import TrainiumRegisterModelOperator
from airflow_provider_trainium.params import (
    corpus_params,
    image_param,
    layout_params,
    runtime_param,
    tensor_parallel_param,
    training_params,
)

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig

#: Mirrors trainium_trainer.llama.presets.PRESETS (DAG files never import the trainer).
PRESETS = ["tiny", "small", "llama-1b", "llama2-7b", "llama2-13b", "llama3.2-1b", "llama3-8b", "llama3-70b"]
MODEL_NAME = "llama-pretrain"
IMAGE = "{{ params.image or ti.xcom_pull(task_ids='build_image') or '' }}"
#: Promotion gate, fixed here and not in run params: the model's held-out loss must beat the same
#: architecture's untrained (seeded random) initialisation by this many nats before it becomes ``latest``.
MIN_IMPROVEMENT_OVER_UNTRAINED = 0.5
#: This DAG runs only when triggered; its author lets such runs move ``latest`` once they pass the gate.
PROMOTE_MANUAL_RUNS = True
#: Budget ceiling per job (USD): the most this DAG's own limits can bill, 64 nodes (the catalog's most) x
#: $35.76/h (trn2.48xlarge, the dearest priced type) x the 48 h training timeout = $109,854.72, rounded up.
#: Every layout the form accepts fits it; a run may lower the budget, never raise or clear it.
MAX_COST_USD_CEILING = 109_855


LAYOUT = kit.job_layout(IMAGE, workload="llm", env=RUNTIME_ENV)
TRAIN_ARGS = [
    "--data-uri",
    planned("data_uri"),
    *kit.param_args("preset", "max_steps", "batch_size", "learning_rate", "log_every", "checkpoint_every"),
    *kit.param_args("keep_checkpoints", "tensor_parallel_size"),
]


def run_plan(params: Mapping[str, Any], config: TrainiumConfig, context: Mapping[str, Any]) -> dict[str, Any]:
    """This run's URIs under ``<artifact root>/llama/pretrain/<run key>``."""
    prefix = kit.run_prefix(config, "llama", "pretrain", run_id=context["run_id"])
    return {
        **kit.stage_uris(prefix),
        "tokenizer_uri": f"{prefix}/data/tokenizer.json",
    }


def gate_verdict(result: dict[str, Any], plan: dict[str, Any], registered: Any) -> str:
    """Promote only a model whose held-out loss clears the DAG's fixed gate."""
    verdict = "passes" if result["improved"] else "fails"
    return (
        f"eval loss {result['eval_loss']} vs untrained {result['base_eval_loss']}: {verdict} the gate "
        f"(at least {MIN_IMPROVEMENT_OVER_UNTRAINED} lower)"
    )


with DAG(
    dag_id="trainium_llama_pretrain",
    description="Pretrain a Llama-architecture model on Trainium (or locally) and register it",
    schedule=None,
    max_active_runs=1,
    tags=["trainium", "llama"],
    **kit.dag_args(),
    params={
        **layout_params(max_cost_usd_ceiling=MAX_COST_USD_CEILING),
        "tensor_parallel_size": tensor_parallel_param(),
        "preset": Param("tiny", enum=PRESETS),
        **training_params(max_steps=60, batch_size=8, learning_rate=3e-3, checkpoint_every=20),
        **corpus_params(),
        "runtime": runtime_param(),
        "image": image_param(),
    },
) as dag:
    # the image of the run's stack: docker/native/Dockerfile for a native run, docker/Dockerfile for an XLA one
    build_image = TrainiumImageBuildOperator(
        task_id="build_image",
        stack="{{ params.stack }}",
        instance_type="{{ params.instance_type }}",
    )

    prepare_data = kit.prepare_llama_data(IMAGE, trigger_rule="none_failed_min_one_success")

    compile_graphs, pretrain = kit.compile_then_train(
        entry_point="trainium_trainer.llama.train",
        job_args=TRAIN_ARGS,
        layout=LAYOUT,
        train_task_id="pretrain",
        cache_key_extra={"vocab_size": "{{ params.vocab_size }}", "block_size": "{{ params.block_size }}"},
        **kit.planned_training_uris(),
        execution_timeout=timedelta(hours=48),
    )
    register = TrainiumRegisterModelOperator(
        task_id="register",
        model_name=MODEL_NAME,
        source_uri=kit.output_of("pretrain"),
        register_failed_models=True,  # every run's model is kept; the gate below decides what becomes latest
        dataset_uri=planned("data_uri"),
        checkpoint_uri=planned("checkpoint_uri"),
        image=IMAGE,
    )
    evaluate = TrainiumJobOperator(
        task_id="evaluate",
        entry_point="trainium_trainer.llama.evaluate",
        job_args=[
            "--model-uri",
            kit.output_of("pretrain"),
            "--data-uri",
            planned("data_uri"),
            "--batch-size",
            "{{ params.batch_size }}",
            "--min-improvement",
            str(MIN_IMPROVEMENT_OVER_UNTRAINED),
        ],
        output_uri=planned("eval_uri"),
        **kit.job_layout(IMAGE, single_node=True, env=RUNTIME_ENV),
    )

    promote = kit.promote_latest(
        MODEL_NAME, reason="held-out loss cleared the pretraining gate", promote_manual_runs=PROMOTE_MANUAL_RUNS
    )
    plan = kit.check_params_task("trainium_trainer.llama.train", inputs=["input_uri"], plan=run_plan)
    plan >> kit.image_branch_task(build_task_id="build_image", skip_to="prepare_data") >> [build_image, prepare_data]
    build_image >> prepare_data >> kit.has_data_task(plan) >> compile_graphs
    pretrain >> evaluate >> register
    register >> kit.evaluation_gate_task(plan, describe=gate_verdict) >> promote
