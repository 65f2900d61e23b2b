"""The DAG kit's pieces: templates, layouts, the first-task checks and the run plan helpers."""

from __future__ import annotations

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_provider_trainium import dag_kit as kit
from airflow_provider_trainium.hooks.trainium import TrainiumConfig

GOOD = {"instance_type": "trn1.32xlarge", "nodes": 2, "compute": "local", "image": None}


def test_planned_reads_the_plan_task_return_value() -> None:
    assert kit.planned("data_uri") == "{{ trainium_plan('check_params')['data_uri'] }}"
    assert kit.planned("x", task_id="plan") == "{{ trainium_plan('plan')['x'] }}"
    assert set(kit.dag_args()["user_defined_macros"]) == {"trainium_plan", "trainium_output", "trainium_compile_cache"}


BUDGET = {
    "max_cost_usd": "{{ params.max_cost_usd }}",
    "allow_over_budget_estimate": "{{ params.allow_over_budget_estimate }}",
}


def test_job_layout_distributed_and_single_node() -> None:
    assert kit.job_layout(workload="llm") == {
        "compute": "{{ params.compute }}",
        "instance_type": "{{ params.instance_type }}",
        "nodes": "{{ params.nodes }}",
        "stack": "{{ params.stack }}",
        "image": kit.IMAGE_FROM_PARAMS,
        "workload": "llm",
        **BUDGET,
    }
    single = kit.job_layout("img", single_node=True, instance_type=None)
    assert single == {"compute": "{{ params.compute }}", "image": "img", "distributed": False, **BUDGET}


def test_check_run_refuses_what_cannot_run(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", raising=False)
    assert kit.check_run(GOOD, entry_point="trainium_trainer.allreduce").configured is False
    with pytest.raises(AirflowFailException, match="trn1.2xlarge"):
        kit.check_run({**GOOD, "instance_type": "trn1.2xlarge"}, entry_point="trainium_trainer.allreduce")
    with pytest.raises(AirflowFailException, match="tensor"):
        kit.check_run({**GOOD, "tensor_parallel_size": 3}, entry_point="trainium_trainer.llama.train")
    with pytest.raises(AirflowFailException, match="tensor_parallel_size=8 on trn2.48xlarge"):
        trn2 = {**GOOD, "instance_type": "trn2.48xlarge", "tensor_parallel_size": 8}
        kit.check_run(trn2, entry_point="trainium_trainer.llama.train")
    with pytest.raises(AirflowFailException, match="input_uri"):
        kit.check_run({**GOOD, "input_uri": "s3://elsewhere/x"}, entry_point="t", inputs=["input_uri"])
    with pytest.raises(AirflowFailException):
        kit.check_run({**GOOD, "image": "evil.example/x@sha256:" + "0" * 64}, entry_point="trainium_trainer.allreduce")


@pytest.mark.parametrize(
    ("changes", "message"),
    [({"instance_type": "trn1.32xlarge", "stack": "native"}, r"stack 'native' does not train on trn1 .*'xla'"),
     ({"instance_type": "trn3.48xlarge", "stack": "xla"}, r"stack 'xla' does not train on trn3 .*'native'")],
)  # fmt: skip
def test_check_run_refuses_a_stack_the_family_cannot_train_even_on_local_compute(
    monkeypatch: pytest.MonkeyPatch, tmp_path, changes, message
) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", raising=False)
    with pytest.raises(AirflowFailException, match=message):
        kit.check_run({**GOOD, **changes}, entry_point="trainium_trainer.llama.train")


@pytest.mark.parametrize(
    "changes",
    [{}, {"stack": "auto"}, {"stack": "xla"}, {"instance_type": "trn2.48xlarge", "stack": "native"},
     {"instance_type": "trn3.48xlarge", "stack": "auto"}],
)  # fmt: skip
def test_check_run_lets_local_compute_run_a_stack_its_stand_in_family_trains(
    monkeypatch: pytest.MonkeyPatch, tmp_path, changes
) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", raising=False)
    assert kit.check_run({**GOOD, **changes}, entry_point="trainium_trainer.llama.train").configured is False


def test_plan_helpers() -> None:
    config = TrainiumConfig(artifact_root="s3://bucket/root/")
    prefix = kit.run_prefix(config, "llama", "pretrain", run_id="manual__2026-01-01T00:00:00")
    assert prefix.startswith("s3://bucket/root/llama/pretrain/manual__2026-01-01T00-00-00-")
    assert len(prefix.rsplit("-", 1)[1]) == 10  # the run id's hash keeps run keys unique
    assert kit.run_prefix(config, "a", "b") == "s3://bucket/root/a/b"
    assert kit.stage_uris("s3://b/p")["eval_uri"] == "s3://b/p/evaluation"
