"""Daily Llama fine-tuning on Trainium: data prep for the run's data interval -> compile -> fine-tune ->
evaluate against the base -> register; the ``latest`` alias moves only when the evaluation improves.

Backfill-safe (``airflow backfill create --dag-id trainium_llama_finetune --from-date ... --to-date ...``):
every artifact of an interval lives under ``<artifact_root>/llama/finetune/<interval date>/``, each step is
idempotent for that interval (data prep keeps an identical data set, the compile step skips a recorded
cache key, the trainer skips a job whose output is complete, the registry returns the existing version
for identical files), so rerunning an interval never registers a second version of it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_provider_trainium.neuron.catalog import CATALOG
from airflow_provider_trainium.operators.compile import NeuronCompileOperator
from airflow_provider_trainium.operators.job import NeuronJobOperator
from airflow_provider_trainium.operators.registry import PromoteModelAliasOperator, RegisterModelOperator
from airflow_provider_trainium.operators.training import NeuronTrainingOperator
from airflow_provider_trainium.params import layout_params

MODEL_NAME = "llama-finetune"
PLAN = "ti.xcom_pull(task_ids='check_params')"


def planned(key: str) -> str:
    """A template for one URI (or value) of the run plan that ``check_params`` returns."""
    return "{{ " + PLAN + "['" + key + "'] }}"


LAYOUT = {
    "compute": "{{ params.compute }}",
    "instance_type": "{{ params.instance_type }}",
    "nodes": "{{ params.nodes }}",
    "image": "{{ params.image or '' }}",
    "workload": "llm",
    "env": {"TRAINIUM_RUNTIME": "{{ '' if params.runtime == 'auto' else params.runtime }}"},
}
TRAIN_ARGS = [
    "--data-uri",
    planned("data_uri"),
    "--base-model-uri",
    planned("base_model_uri"),
    "--max-steps",
    "{{ params.max_steps }}",
    "--batch-size",
    "{{ params.batch_size }}",
    "--lr",
    "{{ params.learning_rate }}",
    "--warmup-steps",
    "2",
    "--log-every",
    "{{ params.log_every }}",
    "--checkpoint-every",
    "{{ params.checkpoint_every }}",
    "--keep-checkpoints",
    "{{ params.keep_checkpoints }}",
    "--tensor-parallel-size",
    "{{ params.tensor_parallel_size }}",
    "--peak-tflops",
    planned("peak_tflops"),
]

with DAG(
    dag_id="trainium_llama_finetune",
    description="Fine-tune the Llama model on each day's instructions; promote it when it beats its base",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=2,
    tags=["trainium", "llama"],
    default_args={"retries": 1, "retry_delay": timedelta(seconds=10)},
    params={
        **layout_params(),
        "tensor_parallel_size": Param(1, type="integer", enum=[1, 2, 4, 8, 16, 32]),
        "base_model": Param(
            "llama-pretrain@latest",
            type="string",
            minLength=1,
            description="registry reference (name@alias, name:version) or the URI (file://, s3://) of a Hugging "
            "Face model directory: config.json, model.safetensors or shards + model.safetensors.index.json, "
            "tokenizer.json",
        ),
        "input_uri": Param(
            None,
            type=["null", "string"],
            description="the interval's instruction JSONL; '{ds}' becomes the interval date. None: synthetic",
        ),
        "synthetic_records": Param(200, type="integer", minimum=1, maximum=10_000_000),
        "max_steps": Param(30, type="integer", minimum=1, maximum=1_000_000),
        "batch_size": Param(8, type="integer", minimum=1, maximum=1024, description="sequences per data-parallel rank"),
        "learning_rate": Param(1e-3, type="number", exclusiveMinimum=0, maximum=1),
        "log_every": Param(10, type="integer", minimum=1),
        "checkpoint_every": Param(10, type="integer", minimum=0, description="0: only at the end"),
        "keep_checkpoints": Param(2, type="integer", minimum=1, maximum=100),
        "min_improvement": Param(0.0, type="number", minimum=0, description="eval-loss drop needed to promote"),
        "runtime": Param("auto", enum=["auto", "xla", "eager"], description="force the trainer's runtime"),
        "image": Param(None, type=["null", "string"], description="training image (ECS/Batch)"),
    },
) as dag:

    @task
    def check_params(params: dict | None = None, **context: Any) -> dict[str, Any]:
        """Reject a bad layout before anything starts; resolve the base model; key every URI by the interval."""
        from airflow.providers.common.compat.sdk import AirflowFailException

        from airflow_provider_trainium.hooks.trainium import TrainiumHook
        from airflow_provider_trainium.neuron.spec import JobSpecError, check_layout

        nodes = int(params["nodes"])
        try:
            check_layout(
                params["instance_type"],
                nodes,
                tensor_parallel_size=int(params["tensor_parallel_size"]),
                entry_point="trainer.llama.train",
            )
        except JobSpecError as err:
            raise AirflowFailException(str(err)) from err
        start = context.get("data_interval_start") or context["dag_run"].run_after
        interval = start.strftime("%Y-%m-%d")
        base_ref = params["base_model"].strip()
        if "://" in base_ref or base_ref.startswith("/"):
            base_uri = base_ref
        else:
            from airflow_provider_trainium.registry import NotFoundError
            from airflow_provider_trainium.registry.config import open_registry

            try:
                base_uri = open_registry().resolve(base_ref).uri
            except (NotFoundError, ValueError) as err:
                raise AirflowFailException(
                    f"base_model {base_ref!r}: {err} (run trainium_llama_pretrain first, or pass a URI)"
                ) from err
        root = TrainiumHook().get_config().artifact_root.rstrip("/")
        prefix = f"{root}/llama/finetune/{interval}"
        return {
            "interval": interval,
            "base_model_uri": base_uri.rstrip("/"),
            "input_uri": params["input_uri"].replace("{ds}", interval) if params.get("input_uri") else None,
            "data_uri": f"{prefix}/data",
            "checkpoint_uri": f"{prefix}/checkpoints",
            "model_uri": f"{prefix}/model",
            "eval_uri": f"{prefix}/evaluation",
            "peak_tflops": CATALOG[params["instance_type"]].peak_bf16_tflops * nodes,
        }

    prepare_data = NeuronJobOperator(
        task_id="prepare_data",
        entry_point="trainer.llama.data",
        job_args=[
            "--output-uri",
            planned("data_uri"),
            "{{ '--input-uri' if " + PLAN + "['input_uri'] else '--synthetic-date' }}",
            "{{ " + PLAN + "['input_uri'] or " + PLAN + "['interval'] }}",
            "--synthetic-records",
            "{{ params.synthetic_records }}",
            "--tokenizer-uri",
            planned("base_model_uri") + "/tokenizer.json",
            "--block-size",
            "64",
            "--interval-start",
            "{{ data_interval_start | ds if data_interval_start else '' }}",
            "--interval-end",
            "{{ data_interval_end | ds if data_interval_end else '' }}",
        ],
        output_uri=planned("data_uri"),
        distributed=False,
        compute="{{ params.compute }}",
        image="{{ params.image or '' }}",
    )

    @task.short_circuit
    def has_data(plan: dict[str, Any]) -> bool:
        """An empty interval ends the run here with a clear skip; malformed records are listed."""
        import json

        from airflow.sdk import ObjectStoragePath

        index = json.loads((ObjectStoragePath(plan["data_uri"]) / "index.json").read_text())
        if index.get("skipped"):
            print(f"SKIP interval {plan['interval']}: nothing to fine-tune on: {index.get('reason')}")
            return False
        print(f"{index['records']} records, {index['malformed_count']} malformed (skipped): {index['malformed'][:20]}")
        return True

    compile_graphs = NeuronCompileOperator(
        task_id="compile",
        entry_point="trainer.llama.train",
        job_args=TRAIN_ARGS,
        trial_steps=10,
        cache_key_extra={"base_model": planned("base_model_uri")},
        **LAYOUT,
    )
    finetune = NeuronTrainingOperator(
        task_id="finetune",
        entry_point="trainer.llama.train",
        job_args=TRAIN_ARGS,
        output_uri=planned("model_uri"),
        checkpoint_uri=planned("checkpoint_uri"),
        compile_cache_uri="{{ ti.xcom_pull(task_ids='compile')['compile_cache_uri'] }}",
        execution_timeout=timedelta(hours=12),
        **LAYOUT,
    )
    evaluate = NeuronJobOperator(
        task_id="evaluate",
        entry_point="trainer.llama.evaluate",
        job_args=[
            "--model-uri",
            "{{ ti.xcom_pull(task_ids='finetune') }}",
            "--base-model-uri",
            planned("base_model_uri"),
            "--data-uri",
            planned("data_uri"),
            "--batch-size",
            "{{ params.batch_size }}",
            "--min-improvement",
            "{{ params.min_improvement }}",
        ],
        output_uri=planned("eval_uri"),
        distributed=False,
        compute="{{ params.compute }}",
        instance_type="{{ params.instance_type }}",
        image="{{ params.image or '' }}",
        env=LAYOUT["env"],
    )
    register = RegisterModelOperator(
        task_id="register",
        model_name=MODEL_NAME,
        source_uri="{{ ti.xcom_pull(task_ids='finetune') }}",
        dataset_uri=planned("data_uri"),
        checkpoint_uri=planned("checkpoint_uri"),
        base_model="{{ params.base_model }}",
        image="{{ params.image or '' }}",
    )

    @task.short_circuit
    def improved(plan: dict[str, Any], registered: dict[str, Any]) -> bool:
        """Promote only a model that beats its base on the interval's held-out data, and only when this run
        registered it: rerunning an old interval must not move ``latest`` back to that interval's version."""
        import json

        from airflow.sdk import ObjectStoragePath

        if not registered.get("created"):
            print(f"version {registered['version']} was registered by an earlier run; alias left as it is")
            return False
        result = json.loads((ObjectStoragePath(plan["eval_uri"]) / "evaluation.json").read_text())
        verdict = "improves on" if result["improved"] else "does not improve on"
        print(f"eval loss {result['eval_loss']} {verdict} the base's {result['base_eval_loss']}")
        return bool(result["improved"])

    promote = PromoteModelAliasOperator(
        task_id="promote_latest",
        model_name=MODEL_NAME,
        alias="latest",
        version="{{ ti.xcom_pull(task_ids='register')['version'] }}",
        reason="evaluation improved on the base for interval {{ ti.xcom_pull(task_ids='check_params')['interval'] }}",
    )
    plan = check_params()
    plan >> prepare_data >> has_data(plan) >> compile_graphs >> finetune >> evaluate >> register
    improved(plan, register.output) >> promote
