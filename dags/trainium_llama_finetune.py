"""Daily Llama fine-tuning on Trainium: data prep for the run's data interval -> compile -> fine-tune ->
evaluate against the current ``latest`` (or the base when there is none) on a fixed held-out set -> register;
``latest`` moves only forward, only for scheduled runs (a backfill counts as manual: whoever may trigger may
backfill with their own conf), and only when the evaluation job's verdict clears ``MIN_IMPROVEMENT``.

Backfill-safe (``airflow backfill create --dag-id trainium_llama_finetune --from-date ... --to-date ...``):
every artifact of an interval lives under ``<artifact_root>/llama/finetune/<interval date>/<spec key>/``
(the key hashes the run's params, the base model's fingerprint and whether the run was manual, so a run
resumes only its own checkpoints and a future-dated manual run cannot feed the scheduled one), each step is
idempotent for that interval (data prep keeps an identical data set, the compile step skips a recorded
cache key, the trainer skips a job whose output is complete, the registry returns the existing version
for identical files), so rerunning an interval never registers a second version of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import Param

from airflow_provider_trainium import dag_kit as kit
from airflow_provider_trainium.dag_kit import RUNTIME_ENV, planned
from airflow_provider_trainium.dag_kit import params as p
from airflow_provider_trainium.operators.job import TrainiumJobOperator

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig

MODEL_NAME = "llama-finetune"
PLAN = "trainium_plan('check_params')"
#: Promotion gate, fixed here and not in run params: the fine-tune's loss on the fixed held-out set must be
#: this much below the current ``latest``'s (the base's only when there is no ``latest``).
MIN_IMPROVEMENT = 0.01
#: The fixed held-out set: the synthetic corpus of this date, tokenized with the base's tokenizer. No run
#: param reaches it, so a run's conf cannot choose what it is judged on.
HOLDOUT_DATE = "2025-12-31"
HOLDOUT_RECORDS = 200
#: Manual and backfill runs register their model but do not move ``latest``: only scheduled runs do.
PROMOTE_MANUAL_RUNS = False
PROMOTE_BACKFILL_RUNS = False
#: Budget ceiling per job (USD): the most this DAG's own limits can bill, 64 nodes (the catalog's most) x
#: $35.76/h (trn2.48xlarge, the dearest priced type) x the 12 h training timeout = $27,463.68, rounded up.
#: Every layout the form accepts fits it; a run may lower the budget, never raise or clear it.
MAX_COST_USD_CEILING = 27_464


LAYOUT = kit.job_layout(workload="llm", env=RUNTIME_ENV)
TRAIN_ARGS = [
    *kit.planned_args("data_uri", "base_model_uri"),
    *kit.param_args("max_steps", "batch_size", "learning_rate"),
    "--warmup-steps",
    "2",
    *kit.param_args("log_every", "checkpoint_every", "keep_checkpoints", "tensor_parallel_size"),
]


def run_plan(params: Mapping[str, Any], config: TrainiumConfig, context: Mapping[str, Any]) -> dict[str, Any]:
    """Resolve the base model and the reference the fine-tune must beat; key every URI by the interval and
    the run's spec, so a run only ever resumes (or reuses) its own checkpoints and model.

    A scheduled or backfill run before any pretrain has registered its base is skipped, not failed: on a fresh
    install the unpaused DAG must not fail every day; a person's manual run fails, naming what to do."""
    from airflow.providers.common.compat.sdk import AirflowFailException, AirflowSkipException

    from airflow_provider_trainium.dag_kit.params import check_input_param
    from airflow_provider_trainium.neuron.spec_key import finetune_spec_key
    from airflow_provider_trainium.registry import IntegrityError, NotFoundError

    start = context.get("data_interval_start") or context["dag_run"].run_after
    interval = start.strftime("%Y-%m-%d")
    base_ref = params["base_model"].strip()
    base_fingerprint = None
    if "://" in base_ref or base_ref.startswith("/"):
        check_input_param("base_model", base_ref, config)
        base_uri = base_ref
    else:
        try:
            base = kit.resolve_model(base_ref)
        except NotFoundError as err:
            if not kit.is_manual_run(context):
                raise AirflowSkipException(f"SKIP interval {interval}: no base model yet ({err}); it runs once "
                                           "trainium_llama_pretrain has registered one") from err  # fmt: skip
            raise AirflowFailException(
                f"base_model {base_ref!r}: {err} (run trainium_llama_pretrain first, or pass a URI)"
            ) from err
        except (IntegrityError, ValueError) as err:
            raise AirflowFailException(
                f"base_model {base_ref!r}: {err} (run trainium_llama_pretrain first, or pass a URI)"
            ) from err
        base_uri, base_fingerprint = base.uri, base.manifest.get("fingerprint")
    base_uri = base_uri.rstrip("/")
    key = finetune_spec_key(dict(params), base_uri, base_fingerprint, manual=kit.is_manual_run(context))
    holdout_key = finetune_spec_key({"holdout": HOLDOUT_DATE, "records": HOLDOUT_RECORDS}, base_uri,
                                    base_fingerprint, manual=False)  # fmt: skip
    return {
        **kit.stage_uris(kit.run_prefix(config, "llama", "finetune", interval, key)),
        "interval": interval,
        "spec_key": key,
        "base_model_uri": base_uri,
        "reference_uri": current_latest_uri() or base_uri,
        "input_uri": params["input_uri"].replace("{ds}", interval) if params.get("input_uri") else None,
        "holdout_uri": kit.run_prefix(config, "llama", "finetune", "holdout", holdout_key),
    }


def current_latest_uri() -> str | None:
    """The files of ``llama-finetune@latest`` after its sha256 check (None when there is none): the reference a
    fine-tune must beat, whatever base the run chose (a run's conf must not pick an easier reference)."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_provider_trainium.registry import IntegrityError

    try:
        latest = kit.resolve_model(f"{MODEL_NAME}@latest", missing_ok=True)
    except IntegrityError as err:
        raise AirflowFailException(f"cannot judge against {MODEL_NAME}@latest: {err}") from err
    return latest.uri.rstrip("/") if latest is not None else None


def gate_verdict(result: dict[str, Any], plan: dict[str, Any], registered: dict[str, Any]) -> str:
    """Promote only a model that beats the current ``latest`` (or its base) on the fixed held-out set.
    ``promote_latest`` moves forward only, so rerunning an old interval never moves ``latest`` back."""
    verdict = "improves on" if result["improved"] else "does not improve on"
    return (
        f"version {registered['version']}: held-out loss {result['eval_loss']} {verdict} the reference's "
        f"{result['base_eval_loss']} (by at least {MIN_IMPROVEMENT}; reference {plan['reference_uri']})"
    )


with kit.trainium_dag(
    "trainium_llama_finetune",
    "Fine-tune the Llama model on each day's instructions; promote it when it beats its base",
    schedule="@daily",
    max_active_runs=2,
    tags=["llama"],
    params={
        **p.layout_params(max_cost_usd_ceiling=MAX_COST_USD_CEILING),
        "tensor_parallel_size": p.tensor_parallel_param(),
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
        **p.training_params(max_steps=30, batch_size=8, learning_rate=1e-3, checkpoint_every=10),
        "runtime": p.runtime_param(),
        "image": p.image_param(),
    },
) as dag:
    prepare_data = TrainiumJobOperator(
        task_id="prepare_data",
        entry_point="trainium_trainer.llama.data",
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
        **kit.job_layout(single_node=True, instance_type=None),
    )

    prepare_holdout = TrainiumJobOperator(
        task_id="prepare_holdout",
        entry_point="trainium_trainer.llama.data",
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
            "--holdout-manifest",  # its files' sha256, sealed: a set swapped before the evaluation registers nothing
        ],
        output_uri=planned("holdout_uri"),
        **kit.job_layout(single_node=True, instance_type=None),
    )

    compile_graphs, finetune = kit.compile_then_train(
        entry_point="trainium_trainer.llama.train",
        job_args=TRAIN_ARGS,
        layout=LAYOUT,
        train_task_id="finetune",
        cache_key_extra={"base_model": planned("base_model_uri")},
        **kit.planned_training_uris(),
        execution_timeout=timedelta(hours=12),
    )
    evaluate = kit.evaluate_llama(
        "finetune",
        min_improvement=MIN_IMPROVEMENT,
        reference_key="reference_uri",
        data_key="holdout_uri",
        env=RUNTIME_ENV,
    )
    register = kit.register_llama_model(
        MODEL_NAME, "finetune", base_model="{{ params.base_model }}", holdout_task_id="prepare_holdout"
    )

    promote = kit.promote_latest(
        MODEL_NAME,
        reason="evaluation improved on the held-out set for interval " + planned("interval"),
        promote_manual_runs=PROMOTE_MANUAL_RUNS,
        promote_backfill_runs=PROMOTE_BACKFILL_RUNS,
    )
    promote.holdout_task_id = "prepare_holdout"  # the verdict it checks again must name this run's sealed set
    plan = kit.check_params_task("trainium_trainer.llama.train", inputs=["input_uri"], plan=run_plan)
    data_ok = kit.has_data_task(plan, skip_message="SKIP interval {interval}: nothing to fine-tune on: {reason}")
    plan >> prepare_data >> data_ok >> compile_graphs
    finetune >> evaluate >> register
    data_ok >> prepare_holdout >> evaluate
    gate = kit.evaluation_gate_task(plan, describe=gate_verdict, registered=register.output, task_id="improved")
    gate >> promote
