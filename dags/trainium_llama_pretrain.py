"""Llama pretraining on Trainium: data prep -> compile -> pretrain -> register.

Manual trigger. Runs on a laptop (local compute, torch-xla CPU, ``tiny`` preset) or on Trn1 (ECS for one
node, AWS Batch multi-node for more) by configuration alone. Checkpoints go to the artifact root every
``checkpoint_every`` steps while training runs, so a retry resumes where the failed try stopped.

Image step: the image build operator (``NeuronImageBuildOperator``) has not landed yet; until it does,
pass a prebuilt training image in the ``image`` param (ECS/Batch) and this DAG starts at data prep.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_provider_trainium.neuron.catalog import CATALOG
from airflow_provider_trainium.operators.compile import NeuronCompileOperator
from airflow_provider_trainium.operators.job import NeuronJobOperator
from airflow_provider_trainium.operators.registry import RegisterModelOperator
from airflow_provider_trainium.operators.training import NeuronTrainingOperator

#: Mirrors trainer.llama.presets.PRESETS (DAG files never import the trainer).
PRESETS = ["tiny", "small", "llama-1b", "llama2-7b", "llama2-13b"]
MODEL_NAME = "llama-pretrain"
PLAN = "ti.xcom_pull(task_ids='check_params')"
LAYOUT = {
    "compute": "{{ params.compute }}",
    "instance_type": "{{ params.instance_type }}",
    "nodes": "{{ params.nodes }}",
    "image": "{{ params.image or '' }}",
    "workload": "llm",
    "env": {"TRAINIUM_RUNTIME": "{{ '' if params.runtime == 'auto' else params.runtime }}"},
}
TRAIN_ARGS = [
    "--data-uri", "{{ %s['data_uri'] }}" % PLAN,
    "--preset", "{{ params.preset }}",
    "--max-steps", "{{ params.max_steps }}",
    "--batch-size", "{{ params.batch_size }}",
    "--lr", "{{ params.learning_rate }}",
    "--log-every", "{{ params.log_every }}",
    "--checkpoint-every", "{{ params.checkpoint_every }}",
    "--keep-checkpoints", "{{ params.keep_checkpoints }}",
    "--tensor-parallel-size", "{{ params.tensor_parallel_size }}",
    "--peak-tflops", "{{ %s['peak_tflops'] }}" % PLAN,
]  # fmt: skip

with DAG(
    dag_id="trainium_llama_pretrain",
    description="Pretrain a Llama-architecture model on Trainium (or locally) and register it",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["trainium", "llama"],
    default_args={"retries": 1, "retry_delay": timedelta(seconds=10)},
    params={
        "compute": Param(
            "auto",
            enum=["auto", "local", "ecs", "batch"],
            description="auto: local without a trainium_default connection, ECS for 1 node, Batch for more",
        ),
        "instance_type": Param("trn1.2xlarge", enum=sorted(CATALOG)),
        "nodes": Param(1, type="integer", minimum=1, maximum=64),
        "tensor_parallel_size": Param(1, type="integer", enum=[1, 2, 4, 8, 16, 32]),
        "preset": Param("tiny", enum=PRESETS),
        "max_steps": Param(60, type="integer", minimum=1, maximum=1_000_000),
        "batch_size": Param(8, type="integer", minimum=1, maximum=1024, description="sequences per data-parallel rank"),
        "block_size": Param(64, type="integer", minimum=8, maximum=32768, description="tokens per sequence"),
        "vocab_size": Param(512, type="integer", minimum=64, maximum=256_000),
        "learning_rate": Param(3e-3, type="number", exclusiveMinimum=0, maximum=1),
        "log_every": Param(10, type="integer", minimum=1),
        "checkpoint_every": Param(20, type="integer", minimum=0, description="0: only at the end"),
        "keep_checkpoints": Param(2, type="integer", minimum=1, maximum=100),
        "input_uri": Param(None, type=["null", "string"], description="text/JSONL corpus; none: synthetic"),
        "synthetic_records": Param(400, type="integer", minimum=1, maximum=10_000_000),
        "runtime": Param("auto", enum=["auto", "xla", "eager"], description="force the trainer's runtime"),
        "image": Param(None, type=["null", "string"], description="training image (ECS/Batch)"),
    },
) as dag:

    @task
    def check_params(params: dict | None = None, run_id: str | None = None) -> dict[str, Any]:
        """Reject a bad layout before anything starts; lay out this run's URIs; the peak for MFU."""
        from airflow.sdk.exceptions import AirflowFailException

        from airflow_provider_trainium.compute.naming import run_key
        from airflow_provider_trainium.hooks.trainium import TrainiumHook
        from airflow_provider_trainium.neuron.spec import JobSpecError, check_layout

        nodes = int(params["nodes"])
        try:
            check_layout(params["instance_type"], nodes, tensor_parallel_size=int(params["tensor_parallel_size"]),
                         entry_point="trainer.llama.train")  # fmt: skip
        except JobSpecError as err:
            raise AirflowFailException(str(err)) from err
        root = TrainiumHook().get_config().artifact_root.rstrip("/")
        prefix = f"{root}/llama/pretrain/{run_key(run_id)}"
        return {
            "data_uri": f"{prefix}/data",
            "tokenizer_uri": f"{prefix}/data/tokenizer.json",
            "checkpoint_uri": f"{prefix}/checkpoints",
            "model_uri": f"{prefix}/model",
            "peak_tflops": CATALOG[params["instance_type"]].peak_bf16_tflops * nodes,
        }

    prepare_data = NeuronJobOperator(
        task_id="prepare_data",
        entry_point="trainer.llama.data",
        job_args=[
            "--output-uri", "{{ %s['data_uri'] }}" % PLAN,
            "{{ '--input-uri' if params.input_uri else '--synthetic-date' }}",
            "{{ params.input_uri or (dag_run.run_after | ds) }}",
            "--synthetic-records", "{{ params.synthetic_records }}",
            "--tokenizer-uri", "{{ %s['tokenizer_uri'] }}" % PLAN,
            "--train-tokenizer",
            "--vocab-size", "{{ params.vocab_size }}",
            "--block-size", "{{ params.block_size }}",
        ],  # fmt: skip
        output_uri="{{ %s['data_uri'] }}" % PLAN,
        distributed=False,
        compute="{{ params.compute }}",
        image="{{ params.image or '' }}",
    )

    @task.short_circuit
    def has_data(plan: dict[str, Any]) -> bool:
        """Skip the rest, clearly, when data prep found nothing to train on."""
        import json

        from airflow.sdk import ObjectStoragePath

        index = json.loads((ObjectStoragePath(plan["data_uri"]) / "index.json").read_text())
        if index.get("skipped"):
            print(f"SKIP: nothing to train on: {index.get('reason')}")
            return False
        print(f"{index['records']} records, {index['malformed_count']} malformed (skipped): {index['malformed'][:20]}")
        return True

    compile_graphs = NeuronCompileOperator(
        task_id="compile",
        entry_point="trainer.llama.train",
        job_args=TRAIN_ARGS,
        trial_steps=10,
        cache_key_extra={"vocab_size": "{{ params.vocab_size }}", "block_size": "{{ params.block_size }}"},
        **LAYOUT,
    )
    pretrain = NeuronTrainingOperator(
        task_id="pretrain",
        entry_point="trainer.llama.train",
        job_args=TRAIN_ARGS,
        output_uri="{{ %s['model_uri'] }}" % PLAN,
        checkpoint_uri="{{ %s['checkpoint_uri'] }}" % PLAN,
        compile_cache_uri="{{ ti.xcom_pull(task_ids='compile')['compile_cache_uri'] }}",
        execution_timeout=timedelta(hours=48),
        **LAYOUT,
    )
    register = RegisterModelOperator(
        task_id="register",
        model_name=MODEL_NAME,
        source_uri="{{ ti.xcom_pull(task_ids='pretrain') }}",
        dataset_uri="{{ %s['data_uri'] }}" % PLAN,
        checkpoint_uri="{{ %s['checkpoint_uri'] }}" % PLAN,
        image="{{ params.image or '' }}",
        promote_alias="latest",
    )
    plan = check_params()
    plan >> prepare_data >> has_data(plan) >> compile_graphs >> pretrain >> register
