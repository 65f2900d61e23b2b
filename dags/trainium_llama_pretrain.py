"""Llama pretraining on Trainium: image -> data prep -> compile -> pretrain -> evaluate -> register -> promote.

Manual trigger. Runs on a laptop (local compute, torch-xla CPU, ``tiny`` preset) or on Trn1 (ECS for one
node, AWS Batch multi-node for more) by configuration alone. Checkpoints go to the artifact root every
``checkpoint_every`` steps while training runs, so a retry resumes where the failed try stopped.

Image step: on ECS/Batch without an ``image`` param, ``TrainiumImageBuildOperator`` builds (or finds) the
training image of the run's stack (native or XLA) for the repository this DAG file lives in and every job runs
that exact digest; on local compute, or with an ``image`` given, the build is skipped.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param

from airflow_provider_trainium import dag_kit as kit
from airflow_provider_trainium.dag_kit import RUNTIME_ENV
from airflow_provider_trainium.dag_kit import params as p

#: Mirrors trainium_trainer.llama.presets.PRESETS (DAG files never import the trainer).
PRESETS = ["tiny", "small", "llama-1b", "llama2-7b", "llama2-13b", "llama3.2-1b", "llama3-8b", "llama3-70b"]
MODEL_NAME = "llama-pretrain"
IMAGE = kit.IMAGE_BUILT_OR_FROM_PARAMS
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
    *kit.planned_args("data_uri"),
    *kit.param_args("preset", "max_steps", "batch_size", "learning_rate", "log_every", "checkpoint_every"),
    *kit.param_args("keep_checkpoints", "tensor_parallel_size"),
]


run_plan = kit.pretrain_plan("llama", "pretrain", tokenizer_file="tokenizer.json")

with kit.trainium_dag(
    "trainium_llama_pretrain",
    "Pretrain a Llama-architecture model on Trainium (or locally) and register it",
    tags=["llama"],
    max_active_runs=1,
    params={
        **p.layout_params(max_cost_usd_ceiling=MAX_COST_USD_CEILING),
        "tensor_parallel_size": p.tensor_parallel_param(),
        "preset": Param("tiny", enum=PRESETS),
        **p.training_params(max_steps=60, batch_size=8, learning_rate=3e-3, checkpoint_every=20),
        **p.corpus_params(),
        "runtime": p.runtime_param(),
        "image": p.image_param(),
    },
) as dag:
    plan = kit.check_params_task("trainium_trainer.llama.train", inputs=["input_uri"], plan=run_plan)
    data_ok = kit.image_then_data(plan)
    compile_graphs, pretrain = kit.compile_then_train(
        entry_point="trainium_trainer.llama.train",
        job_args=TRAIN_ARGS,
        layout=LAYOUT,
        train_task_id="pretrain",
        cache_key_extra={"vocab_size": "{{ params.vocab_size }}", "block_size": "{{ params.block_size }}"},
        **kit.planned_training_uris(),
        execution_timeout=timedelta(hours=48),
    )
    evaluate = kit.evaluate_llama(
        "pretrain", min_improvement=MIN_IMPROVEMENT_OVER_UNTRAINED, image=IMAGE, env=RUNTIME_ENV
    )
    register = kit.register_llama_model(MODEL_NAME, "pretrain", image=IMAGE)
    promote = kit.promote_latest(
        MODEL_NAME, reason="held-out loss cleared the pretraining gate", promote_manual_runs=PROMOTE_MANUAL_RUNS
    )
    data_ok >> compile_graphs
    pretrain >> evaluate >> register
    register >> kit.evaluation_gate_task(plan, describe=kit.beats_untrained(MIN_IMPROVEMENT_OVER_UNTRAINED)) >> promote
