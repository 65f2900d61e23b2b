"""Gates a trigger can't lower, and fine-tune artifacts keyed by the run's spec.

* Promotion thresholds are DAG constants: no run param reaches them.
* A manual run registers but promotes only where the DAG's author allows it.
* A future-dated manual fine-tune writes under its own spec key, so the scheduled run of that interval
  never resumes its checkpoints or reuses its model.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_provider_trainium.neuron.spec_key import finetune_spec_key
from tests.dag_runs import get_dag

DAGS = Path(__file__).resolve().parents[3] / "dags"


def xcom(run, task_id: str):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=run.dag_id, run_id=run.run_id, task_id=task_id, key="return_value")
            .one_or_none()
        )
        return None if row is None else XComModel.deserialize_value(row)


@pytest.mark.parametrize(
    ("dag_id", "task_id", "flag", "module_constant"),
    [
        ("trainium_mnist_mlp", "evaluate", "--min-accuracy", "MIN_ACCURACY"),
        ("trainium_llama_finetune", "evaluate", "--min-improvement", "MIN_IMPROVEMENT"),
        ("trainium_llama_pretrain", "evaluate", "--min-improvement", "MIN_IMPROVEMENT_OVER_UNTRAINED"),
        ("trainium_titan_pretrain", "evaluate", "--min-improvement", "MIN_IMPROVEMENT_OVER_UNTRAINED"),
    ],
)
def test_promotion_thresholds_are_fixed_by_the_dag(dag_id, task_id, flag, module_constant):
    import importlib.util

    dag = get_dag(dag_id)
    args = list(dag.get_task(task_id).job_args)
    value = args[args.index(flag) + 1]
    assert "{{" not in value and float(value) > 0  # a literal, not a template a run's conf could fill
    spec = importlib.util.spec_from_file_location(dag_id, DAGS / f"{dag_id}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert float(value) == getattr(module, module_constant)
    assert not {"min_accuracy", "min_improvement"} & set(dag.params)


def test_the_finetune_reference_and_held_out_set_come_from_the_plan_not_the_conf():
    dag = get_dag("trainium_llama_finetune")
    args = list(dag.get_task("evaluate").job_args)
    assert "reference_uri" in args[args.index("--base-model-uri") + 1]
    assert "holdout_uri" in args[args.index("--data-uri") + 1]
    promote = dag.get_task("promote_latest")
    assert promote.forward_only and not promote.promote_manual_runs


def test_a_manual_run_registers_but_does_not_promote_unless_the_dag_allows_it(tmp_path):
    from airflow.sdk import DAG

    from airflow_provider_trainium.operators.registry import TrainiumRegisterModelOperator
    from airflow_provider_trainium.registry import ModelRegistry
    from tests.integration.registry.conftest import run_dag

    source = tmp_path / "run"
    source.mkdir()
    (source / "model.safetensors").write_bytes(b"\x01" * 64)
    (source / "metrics.json").write_text('{"accuracy": 0.99}')
    root = (tmp_path / "root").as_uri()
    with DAG("manual_promotion_gate", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        TrainiumRegisterModelOperator(
            task_id="register", model_name="m", source_uri=str(source), artifact_root=root, promote_alias="latest",
            require_evaluation=False,
        )  # fmt: skip
    run = run_dag(dag)
    assert str(run.state) == "success"
    registry = ModelRegistry(root)
    assert registry.list_versions("m") == [1]
    assert registry.get_alias("m", "latest") is None


def test_spec_keys_separate_manual_runs_bases_and_params():
    params = {"compute": "local", "max_steps": 30, "learning_rate": 1e-3, "input_uri": None}
    scheduled = finetune_spec_key(params, "file:///r/models/base/versions/1/files", "fp1", manual=False)
    assert scheduled == finetune_spec_key({**params, "compute": "ecs"}, "file:///r/models/base/versions/1/files/",
                                          "fp1", manual=False)  # fmt: skip
    assert scheduled != finetune_spec_key(params, "file:///r/models/base/versions/1/files", "fp1", manual=True)
    assert scheduled != finetune_spec_key(params, "file:///r/models/base/versions/1/files", "fp2", manual=False)
    assert scheduled != finetune_spec_key({**params, "max_steps": 31}, "file:///r/models/base/versions/1/files",
                                          "fp1", manual=False)  # fmt: skip


def test_a_future_dated_manual_run_cannot_feed_the_scheduled_run(tmp_path, monkeypatch):
    """The manual run's checkpoints and model live under its own key: the scheduled run of the same interval
    (same params, not manual) looks elsewhere, so it can neither resume nor skip to the manual run's model."""
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setenv(
        "AIRFLOW_CONN_TRAINIUM_DEFAULT",
        json.dumps({"conn_type": "trainium", "extra": {"artifact_root": root.as_uri()}}),
    )
    base = (root / "models-by-hand" / "base").as_uri()
    dag = get_dag("trainium_llama_finetune")
    future = datetime(2027, 6, 1, tzinfo=UTC)
    run = dag.test(
        logical_date=future,
        run_conf={"compute": "local", "base_model": base},
        mark_success_pattern=r"^(?!check_params$)",  # only the planning task runs
    )
    plan = xcom(run, "check_params")
    params = {**{k: v for k, v in dag.params.dump().items()}, "compute": "local", "base_model": base}
    mine = finetune_spec_key(params, base, None, manual=True)
    scheduled = finetune_spec_key(params, base, None, manual=False)
    assert plan["spec_key"] == mine != scheduled
    interval = f"{root.as_uri()}/llama/finetune/2027-06-01"
    assert plan["checkpoint_uri"] == f"{interval}/{mine}/checkpoints"
    assert plan["model_uri"] == f"{interval}/{mine}/model"
    assert not plan["checkpoint_uri"].startswith(f"{interval}/{scheduled}")
