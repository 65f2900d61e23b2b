"""Daily Llama fine-tuning on Trainium: data prep for the run's data interval -> compile -> fine-tune ->
evaluate against the current ``latest`` (or the base) on a fixed held-out set -> register; ``latest`` moves
only forward, only for scheduled and backfill runs, and only when the evaluation clears ``MIN_IMPROVEMENT``.

Backfill-safe (``airflow backfill create --dag-id trainium_llama_finetune --from-date ... --to-date ...``):
every artifact of an interval lives under ``<artifact_root>/llama/finetune/<interval date>/<spec key>/``
(the key hashes the run's params, the base model's fingerprint and whether the run was manual, so a run
resumes only its own checkpoints and a future-dated manual run cannot feed the scheduled one), each step is
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
from airflow_provider_trainium.params import image_param, layout_params

MODEL_NAME = "llama-finetune"
PLAN = "ti.xcom_pull(task_ids='check_params')"
#: Promotion gate, fixed here and not in run params: the fine-tune's loss on the fixed held-out set must be
#: this much below the current ``latest``'s (or the base's, when there is no comparable ``latest``).
MIN_IMPROVEMENT = 0.01
#: The fixed held-out set: the synthetic corpus of this date, tokenized with the base's tokenizer. No run
#: param reaches it, so a run's conf cannot choose what it is judged on.
HOLDOUT_DATE = "2025-12-31"
HOLDOUT_RECORDS = 200
#: Manual runs register their model but do not move ``latest``: only scheduled and backfill runs do.
PROMOTE_MANUAL_RUNS = False


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
        "runtime": Param("auto", enum=["auto", "xla", "eager"], description="force the trainer's runtime"),
        "image": image_param(),
    },
) as dag:

    @task
    def check_params(params: dict | None = None, **context: Any) -> dict[str, Any]:
        """Reject a bad layout, an untrusted image or an input outside the allowed prefixes before anything
        starts; resolve the base model and the reference the fine-tune must beat; key every URI by the
        interval and the run's spec, so a run only ever resumes (or reuses) its own checkpoints and model."""
        from airflow.providers.common.compat.sdk import AirflowFailException

        from airflow_provider_trainium.hooks.trainium import TrainiumHook
        from airflow_provider_trainium.neuron.spec import JobSpecError, check_layout
        from airflow_provider_trainium.neuron.spec_key import finetune_spec_key
        from airflow_provider_trainium.params import check_image_param, check_input_param

        config = TrainiumHook().get_config()
        check_image_param(params.get("image"), config)
        check_input_param("input_uri", params.get("input_uri"), config)
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
        base_fingerprint = None
        if "://" in base_ref or base_ref.startswith("/"):
            check_input_param("base_model", base_ref, config)
            base_uri = base_ref
        else:
            from airflow_provider_trainium.registry import IntegrityError, NotFoundError
            from airflow_provider_trainium.registry.config import open_registry

            try:
                base = open_registry().resolve(base_ref)
            except (NotFoundError, IntegrityError, ValueError) as err:
                raise AirflowFailException(
                    f"base_model {base_ref!r}: {err} (run trainium_llama_pretrain first, or pass a URI)"
                ) from err
            base_uri, base_fingerprint = base.uri, base.manifest.get("fingerprint")
        base_uri = base_uri.rstrip("/")
        reference_uri = current_latest_uri(base_uri)
        root = config.artifact_root.rstrip("/")
        run_type = str(getattr(context["dag_run"], "run_type", "")).rsplit(".", 1)[-1].lower()
        key = finetune_spec_key(dict(params), base_uri, base_fingerprint, manual=run_type == "manual")
        prefix = f"{root}/llama/finetune/{interval}/{key}"
        holdout_key = finetune_spec_key({"holdout": HOLDOUT_DATE, "records": HOLDOUT_RECORDS}, base_uri,
                                        base_fingerprint, manual=False)  # fmt: skip
        return {
            "interval": interval,
            "spec_key": key,
            "base_model_uri": base_uri,
            "reference_uri": reference_uri or base_uri,
            "input_uri": params["input_uri"].replace("{ds}", interval) if params.get("input_uri") else None,
            "data_uri": f"{prefix}/data",
            "holdout_uri": f"{root}/llama/finetune/holdout/{holdout_key}",
            "checkpoint_uri": f"{prefix}/checkpoints",
            "model_uri": f"{prefix}/model",
            "eval_uri": f"{prefix}/evaluation",
            "peak_tflops": CATALOG[params["instance_type"]].peak_bf16_tflops * nodes,
        }

    def current_latest_uri(base_uri: str) -> str | None:
        """The files of ``llama-finetune@latest`` when it was fine-tuned from the same base (so the two
        are comparable on the same held-out set), after its sha256 check; else None."""
        from airflow.providers.common.compat.sdk import AirflowFailException

        from airflow_provider_trainium.registry import IntegrityError, NotFoundError
        from airflow_provider_trainium.registry.config import open_registry

        try:
            latest = open_registry().resolve(f"{MODEL_NAME}@latest")
        except NotFoundError:
            return None
        except IntegrityError as err:
            raise AirflowFailException(f"cannot judge against {MODEL_NAME}@latest: {err}") from err
        recorded = latest.manifest.get("base_model") or {}
        same_base = (recorded.get("uri") or recorded.get("ref") or "").rstrip("/") == base_uri
        return latest.uri.rstrip("/") if same_base else None

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

    prepare_holdout = NeuronJobOperator(
        task_id="prepare_holdout",
        entry_point="trainer.llama.data",
        job_args=[
            "--output-uri",
            planned("holdout_uri"),
            "--synthetic-date",
            HOLDOUT_DATE,
            "--synthetic-records",
            str(HOLDOUT_RECORDS),
            "--tokenizer-uri",
            planned("base_model_uri") + "/tokenizer.json",
            "--block-size",
            "64",
        ],
        output_uri=planned("holdout_uri"),
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
            planned("reference_uri"),
            "--data-uri",
            planned("holdout_uri"),
            "--batch-size",
            "{{ params.batch_size }}",
            "--min-improvement",
            str(MIN_IMPROVEMENT),
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
        """Promote only a model that beats the current ``latest`` (or its base) on the fixed held-out set.
        ``promote_latest`` moves forward only, so rerunning an old interval never moves ``latest`` back."""
        import json

        from airflow.sdk import ObjectStoragePath

        result = json.loads((ObjectStoragePath(plan["eval_uri"]) / "evaluation.json").read_text())
        verdict = "improves on" if result["improved"] else "does not improve on"
        print(
            f"version {registered['version']}: held-out loss {result['eval_loss']} {verdict} the reference's "
            f"{result['base_eval_loss']} (by at least {MIN_IMPROVEMENT}; reference {plan['reference_uri']})"
        )
        return bool(result["improved"])

    promote = PromoteModelAliasOperator(
        task_id="promote_latest",
        model_name=MODEL_NAME,
        alias="latest",
        version="{{ ti.xcom_pull(task_ids='register')['version'] }}",
        reason="evaluation improved on the held-out set for interval "
        "{{ ti.xcom_pull(task_ids='check_params')['interval'] }}",
        forward_only=True,
        promote_manual_runs=PROMOTE_MANUAL_RUNS,
    )
    plan = check_params()
    data_ok = has_data(plan)
    plan >> prepare_data >> data_ok >> compile_graphs >> finetune >> evaluate >> register
    data_ok >> prepare_holdout >> evaluate
    improved(plan, register.output) >> promote
