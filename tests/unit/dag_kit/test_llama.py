"""The Llama recipe (``dag_kit.llama``): the image build only when needed before the data step, the evaluation
job against a reference, every run's model registered, a pretraining run's URIs and its gate's log line."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

from airflow.sdk import DAG

from airflow_provider_trainium.dag_kit import llama
from airflow_provider_trainium.dag_kit.tasks import check_params_task
from airflow_provider_trainium.dag_kit.templates import IMAGE_BUILT_OR_FROM_PARAMS, output_of, planned

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig


def test_image_then_data_builds_only_on_a_branch_and_data_prep_runs_after_either():
    with DAG("recipe", schedule=None) as dag:
        has_data = llama.image_then_data(check_params_task("trainium_trainer.llama.train"))
    assert has_data.operator.task_id == "has_data"
    down = {t.task_id: set(t.downstream_task_ids) for t in dag.tasks}
    assert down == {
        "check_params": {"image_needed", "has_data"},
        "image_needed": {"build_image", "prepare_data"},
        "build_image": {"prepare_data"},
        "prepare_data": {"has_data"},
        "has_data": set(),
    }
    prepare = dag.get_task("prepare_data")
    assert prepare.trigger_rule == "none_failed_min_one_success"  # runs when the build was skipped
    assert prepare.image == IMAGE_BUILT_OR_FROM_PARAMS


def test_evaluate_llama_judges_the_model_against_the_reference_on_the_plans_blocks():
    with DAG("recipe", schedule=None):
        untrained = llama.evaluate_llama("pretrain", min_improvement=0.5)
    with DAG("recipe2", schedule=None):
        finetune = llama.evaluate_llama(
            "finetune", min_improvement=0.01, reference_key="reference_uri", data_key="holdout_uri"
        )
    assert untrained.job_args == [
        "--model-uri", output_of("pretrain"), "--data-uri", planned("data_uri"),
        "--batch-size", "{{ params.batch_size }}", "--min-improvement", "0.5",
    ]  # fmt: skip
    assert finetune.job_args[:4] == ["--model-uri", output_of("finetune"), "--base-model-uri", planned("reference_uri")]
    assert finetune.job_args[4:6] == ["--data-uri", planned("holdout_uri")]
    assert (untrained.task_id, untrained.output_uri, untrained.distributed) == ("evaluate", planned("eval_uri"), False)


def test_register_llama_model_keeps_every_runs_model_with_its_data_and_checkpoints():
    with DAG("recipe", schedule=None):
        register = llama.register_llama_model("m", "train", holdout_task_id="prepare_holdout")
    assert register.register_failed_models is True
    assert (register.source_uri, register.dataset_uri) == (output_of("train"), planned("data_uri"))
    assert (register.checkpoint_uri, register.holdout_task_id) == (planned("checkpoint_uri"), "prepare_holdout")


def test_pretrain_plan_puts_a_run_under_its_key_and_the_gate_line_names_the_threshold():
    config = cast("TrainiumConfig", SimpleNamespace(artifact_root="file:///art/"))
    plan = llama.pretrain_plan("llama", "titan", tokenizer_file="tokenizer.json")({}, config, {"run_id": "manual__1"})
    prefix = plan["data_uri"].removesuffix("/data")
    assert prefix.startswith("file:///art/llama/titan/") and "/" not in prefix.removeprefix("file:///art/llama/titan/")
    assert plan["tokenizer_uri"] == f"{plan['data_uri']}/tokenizer.json"
    assert {k: v.removeprefix(prefix) for k, v in plan.items()} == {
        "data_uri": "/data", "checkpoint_uri": "/checkpoints", "model_uri": "/model", "eval_uri": "/evaluation",
        "tokenizer_uri": "/data/tokenizer.json",
    }  # fmt: skip
    line = llama.beats_untrained(0.5)({"improved": False, "eval_loss": 2.0, "base_eval_loss": 2.1}, plan, None)
    assert line == "eval loss 2.0 vs untrained 2.1: fails the gate (at least 0.5 lower)"
