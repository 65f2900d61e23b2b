"""The Llama recipe, shared by the Llama pretrain, Llama fine-tune and TorchTitan pretrain DAGs: the image the
run's stack needs, the data step (the corpus becomes a tokenizer and token blocks at the URIs the run plan chose:
``stage_uris`` plus ``tokenizer_uri``), the evaluation job on held-out blocks, and the registration of every
run's model (the promotion gate decides what becomes ``latest``).

Its params are ``params.corpus_params``, ``params.training_params`` (``batch_size``) and the layout params.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_trainium.dag_kit.tasks import has_data_task, image_branch_task
from airflow_provider_trainium.dag_kit.templates import (
    IMAGE_BUILT_OR_FROM_PARAMS,
    IMAGE_FROM_PARAMS,
    job_layout,
    output_of,
    param_args,
    planned,
)

if TYPE_CHECKING:
    from airflow.sdk.definitions.xcom_arg import XComArg

    from airflow_provider_trainium.dag_kit.plan import PlanFunction
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig
    from airflow_provider_trainium.operators.job import TrainiumJobOperator
    from airflow_provider_trainium.operators.registry import TrainiumRegisterModelOperator

EVALUATE_ENTRY_POINT = "trainium_trainer.llama.evaluate"


def pretrain_plan(*parts: str, tokenizer_file: str) -> PlanFunction:
    """The run plan of a pretraining DAG: this run's URIs under ``<artifact root>/<parts...>/<run key>``
    (``stage_uris``), and ``tokenizer_uri``, where the data step trains the tokenizer: ``<data_uri>/<tokenizer_file>``
    (the file name comes from the DAG: the provider names no file the trainer also names, but ``boundary``'s)."""

    def run_plan(params: Mapping[str, Any], config: TrainiumConfig, context: Mapping[str, Any]) -> dict[str, Any]:
        from airflow_provider_trainium.dag_kit.helpers import run_prefix, stage_uris

        uris = stage_uris(run_prefix(config, *parts, run_id=context["run_id"]))
        return {**uris, "tokenizer_uri": f"{uris['data_uri']}/{tokenizer_file}"}

    run_plan.__doc__ = f"This run's URIs under ``<artifact root>/{'/'.join(parts)}/<run key>``."
    return run_plan


def beats_untrained(min_improvement: float) -> Callable[[dict[str, Any], dict[str, Any], Any], str]:
    """The gate's log line (``evaluation_gate_task(describe=)``) of a pretraining DAG, whose model's held-out loss
    must beat the same architecture's untrained initialisation by ``min_improvement``."""

    def gate_verdict(result: dict[str, Any], plan: dict[str, Any], registered: Any) -> str:
        verdict = "passes" if result["improved"] else "fails"
        return (
            f"eval loss {result['eval_loss']} vs untrained {result['base_eval_loss']}: {verdict} the gate "
            f"(at least {min_improvement} lower)"
        )

    return gate_verdict


def prepare_llama_data(image: str, *, task_id: str = "prepare_data", **kwargs: Any) -> TrainiumJobOperator:
    """The Llama data job on one node: the ``input_uri`` corpus (or the run date's synthetic one) into blocks at
    the plan's ``data_uri``, with a tokenizer trained on it at the plan's ``tokenizer_uri``
    (params: ``params.corpus_params``). ``kwargs`` go to the operator (``trigger_rule``)."""
    from airflow_provider_trainium.operators.job import TrainiumJobOperator

    return TrainiumJobOperator(
        task_id=task_id,
        entry_point="trainium_trainer.llama.data",
        job_args=[
            "--output-uri",
            planned("data_uri"),
            "{{ '--input-uri' if params.input_uri else '--synthetic-date' }}",
            "{{ params.input_uri or (dag_run.run_after | ds) }}",
            "--synthetic-records",
            "{{ params.synthetic_records }}",
            "--tokenizer-uri",
            planned("tokenizer_uri"),
            "--train-tokenizer",
            "--vocab-size",
            "{{ params.vocab_size }}",
            "--block-size",
            "{{ params.block_size }}",
        ],
        output_uri=planned("data_uri"),
        **job_layout(image, single_node=True, instance_type=None),
        **kwargs,
    )


def image_then_data(plan: XComArg) -> XComArg:
    """After the plan task: ``image_needed`` branches to ``build_image`` (remote compute without an ``image``
    param: it builds, or finds, the training image of the run's stack for the repository the DAG file lives in)
    or straight to ``prepare_data`` (``prepare_llama_data``, which also waits for a build); then ``has_data``
    ends the run with a skip when data prep found nothing. Returns ``has_data``, which training follows; every
    job of such a DAG runs ``IMAGE_BUILT_OR_FROM_PARAMS``."""
    from airflow_provider_trainium.operators.image import TrainiumImageBuildOperator

    build_image = TrainiumImageBuildOperator(
        task_id="build_image", stack="{{ params.stack }}", instance_type="{{ params.instance_type }}"
    )
    prepare_data = prepare_llama_data(IMAGE_BUILT_OR_FROM_PARAMS, trigger_rule="none_failed_min_one_success")
    plan >> image_branch_task(build_task_id="build_image", skip_to="prepare_data") >> [build_image, prepare_data]
    build_image >> prepare_data
    data_ok = has_data_task(plan)
    prepare_data >> data_ok
    return data_ok


def evaluate_llama(
    model_task_id: str,
    *,
    min_improvement: float,
    reference_key: str | None = None,
    data_key: str = "data_uri",
    image: str = IMAGE_FROM_PARAMS,
    **layout: Any,
) -> TrainiumJobOperator:
    """The ``evaluate`` job on one node: the ``model_task_id`` task's model against the plan's ``reference_key``
    model (None: the same architecture, untrained) on the plan's ``data_key`` blocks; its verdict passes when
    the held-out loss is at least ``min_improvement`` lower. Writes to the plan's ``eval_uri``; ``layout`` adds
    to ``job_layout`` (``env=RUNTIME_ENV``)."""
    from airflow_provider_trainium.operators.job import TrainiumJobOperator

    reference = ["--base-model-uri", planned(reference_key)] if reference_key else []
    return TrainiumJobOperator(
        task_id="evaluate",
        entry_point=EVALUATE_ENTRY_POINT,
        job_args=[
            "--model-uri",
            output_of(model_task_id),
            *reference,
            "--data-uri",
            planned(data_key),
            *param_args("batch_size"),
            "--min-improvement",
            str(min_improvement),
        ],
        output_uri=planned("eval_uri"),
        **job_layout(image, single_node=True, **layout),
    )


def register_llama_model(
    model_name: str, model_task_id: str, *, image: str = IMAGE_FROM_PARAMS, **kwargs: Any
) -> TrainiumRegisterModelOperator:
    """The ``register`` task: the ``model_task_id`` task's model with its data set and checkpoints from the plan.
    Every run's model is kept, passing or not; the evaluation gate decides what becomes ``latest``. ``kwargs`` go
    to the operator (``base_model``, ``holdout_task_id``)."""
    from airflow_provider_trainium.operators.registry import TrainiumRegisterModelOperator

    return TrainiumRegisterModelOperator(
        task_id="register",
        model_name=model_name,
        source_uri=output_of(model_task_id),
        register_failed_models=True,
        dataset_uri=planned("data_uri"),
        checkpoint_uri=planned("checkpoint_uri"),
        image=image,
        **kwargs,
    )
