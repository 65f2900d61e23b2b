"""URIs from the run's identity: the plan is read from the record the plan task wrote under the run's prefix, a
task's output is re-derived as that task chose it, and an XCom that disagrees fails the task naming both."""

from __future__ import annotations

import importlib.util
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_trainium import dag_kit as kit
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from tests.conftest import set_trainium_connection

RUN_ID = "manual__2026-12-02T00:00:00+00:00"
DAGS = Path(__file__).resolve().parents[2] / "dags"


class RunTI(SimpleNamespace):
    """A task instance of one run: ``xcoms`` is what each upstream task's XCom says now."""

    def xcom_pull(self, task_ids: str, **_: Any) -> Any:
        return self.xcoms.get(task_ids)


@pytest.fixture
def root(tmp_path, monkeypatch) -> str:
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    return tmp_path.as_uri()


def test_the_plan_comes_from_its_record_and_an_edited_xcom_fails_naming_both(root):
    ti = RunTI(dag_id="d", run_id=RUN_ID, xcoms={})
    with pytest.raises(AirflowFailException, match="no plan record"):
        kit.plan_record({"ti": ti})
    plan = {"data_uri": f"{root}/d/data", "eval_uri": f"{root}/d/evaluation"}
    uri = kit.write_plan_record({"ti": ti}, kit.trainium_config(), plan)
    assert uri.startswith(f"{root}/runs/d/") and uri.endswith("/check_params/plan.json")
    assert kit.plan_record({"ti": ti}) == plan  # no XCom (yet): the record
    ti.xcoms["check_params"] = dict(plan)
    assert kit.plan_record({"ti": ti}) == plan
    ti.xcoms["check_params"] = {**plan, "data_uri": "file:///tmp/planted"}
    with pytest.raises(AirflowFailException) as err:
        kit.plan_record({"ti": ti})
    assert "file:///tmp/planted" in str(err.value) and plan["data_uri"] in str(err.value)


def test_a_templated_output_is_re_derived_and_an_edited_xcom_fails_naming_both(root):
    with DAG("derived", schedule=None, **kit.dag_args()) as dag:
        train = TrainiumJobOperator(task_id="train", entry_point="trainium_trainer.mnist_mlp.train")
        register = TrainiumJobOperator(task_id="evaluate", entry_point="trainium_trainer.mnist_mlp.evaluate",
                                       job_args=["--model-uri", kit.output_of("train")])  # fmt: skip
        train >> register
    derived = f"{root}/runs/derived/"
    ti = RunTI(dag_id="derived", run_id=RUN_ID, task_id="evaluate", map_index=-1, xcoms={})
    context = {"ti": ti, "dag": dag, "run_id": RUN_ID, "params": {}}
    rendered = register.render_template(kit.output_of("train"), context)
    assert rendered.startswith(derived) and rendered.endswith("/train")
    ti.xcoms["train"] = rendered + "/"
    assert register.render_template(kit.output_of("train"), context) == rendered
    ti.xcoms["train"] = "file:///tmp/planted"
    with pytest.raises(AirflowFailException) as err:
        register.render_template(kit.output_of("train"), context)
    assert "file:///tmp/planted" in str(err.value) and rendered in str(err.value)


def test_the_finetune_reference_is_the_current_latest_whatever_base_the_run_chose(root, tmp_path):
    from airflow_provider_trainium.registry import ModelRegistry

    spec = importlib.util.spec_from_file_location("finetune_dag", DAGS / "trainium_llama_finetune.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    params = {**module.dag.params.dump(), "compute": "local"}
    context = {"data_interval_start": datetime(2026, 1, 1), "dag_run": SimpleNamespace(run_type="scheduled")}
    base = tmp_path / "bases" / "b1"
    base.mkdir(parents=True)
    plan = module.run_plan({**params, "base_model": base.as_uri()}, kit.trainium_config(), context)
    assert plan["reference_uri"] == plan["base_model_uri"] == base.as_uri()  # no latest: the base

    model = tmp_path / "tuned"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"\x05" * 32)
    registry = ModelRegistry(root)
    version = registry.register(module.MODEL_NAME, model.as_uri(), metrics_file=None,
                                base_model="file:///elsewhere/other-base").version  # fmt: skip
    registry.promote(module.MODEL_NAME, "latest", version.version)
    plan = module.run_plan({**params, "base_model": base.as_uri()}, kit.trainium_config(), context)
    assert plan["reference_uri"] == version.uri.rstrip("/")  # latest, though tuned from another base
