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

from datetime import timedelta

from airflow.sdk import Param

from airflow_provider_trainium import dag_kit as kit
from airflow_provider_trainium.dag_kit import params as p
from airflow_provider_trainium.operators.training import TrainiumTrainingOperator

ENTRY_POINT = "trainium_trainer.titan.train"
#: Mirrors trainium_trainer.titan.spec.FLAVORS (DAG files never import the trainer).
FLAVORS = ["debugmodel", "llama-1b", "llama2-13b", "llama2-7b", "llama3-70b", "llama3-8b", "small", "tiny"]
MODEL_NAME = "llama-titan-pretrain"
STACK = "native"
IMAGE = kit.IMAGE_BUILT_OR_FROM_PARAMS
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
    *kit.planned_args("data_uri", "checkpoint_uri"),
    *kit.param_args("flavor", "max_steps", "batch_size", "learning_rate", "seed", "log_every"),
    *kit.param_args("checkpoint_every", "keep_checkpoints", "tensor_parallel_size"),
]


run_plan = kit.pretrain_plan("llama", "titan", tokenizer_file="tokenizer.json")

with kit.trainium_dag(
    "trainium_titan_pretrain",
    "Pretrain a Llama-architecture model with TorchTitan's trainer on Trainium (or locally)",
    tags=["llama", "torchtitan"],
    max_active_runs=1,
    params={
        **p.layout_params("trn2.48xlarge", stack=STACK, max_cost_usd_ceiling=MAX_COST_USD_CEILING),
        "tensor_parallel_size": p.tensor_parallel_param(),
        "flavor": Param("tiny", enum=FLAVORS, description="TorchTitan's debugmodel or one of our presets"),
        **p.training_params(max_steps=60, batch_size=8, learning_rate=3e-3, checkpoint_every=20),
        "seed": Param(0, type="integer", minimum=0, description="model init and data order"),
        **p.corpus_params(),
        "image": p.image_param(),
    },
) as dag:
    plan = kit.check_params_task(ENTRY_POINT, inputs=["input_uri"], plan=run_plan, only_stack=STACK)
    train = TrainiumTrainingOperator(
        task_id="train",
        entry_point=ENTRY_POINT,
        job_args=TRAIN_ARGS,
        **kit.job_layout(IMAGE, workload="llm"),
        **kit.planned_training_uris(),
        execution_timeout=timedelta(hours=48),
    )
    evaluate = kit.evaluate_llama("train", min_improvement=MIN_IMPROVEMENT_OVER_UNTRAINED, image=IMAGE)
    register = kit.register_llama_model(MODEL_NAME, "train", image=IMAGE)
    promote = kit.promote_latest(
        MODEL_NAME, reason="held-out loss cleared the pretraining gate", promote_manual_runs=PROMOTE_MANUAL_RUNS
    )
    kit.image_then_data(plan) >> train >> evaluate >> register
    register >> kit.evaluation_gate_task(plan, describe=kit.beats_untrained(MIN_IMPROVEMENT_OVER_UNTRAINED)) >> promote
