"""The run plan is read from the record the plan task wrote under the run's prefix, and an XCom that disagrees
fails the task naming both."""

from __future__ import annotations

import importlib.util
import json
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_trainium.dag_kit import plan as kit_plan
from airflow_provider_trainium.dag_kit.helpers import trainium_config
from tests.unit.dag_kit.conftest import RUN_ID, RunTI

DAGS = Path(__file__).resolve().parents[3] / "dags"


def test_the_plan_comes_from_its_record_and_an_edited_xcom_fails_naming_both(root):
    ti = RunTI(dag_id="d", run_id=RUN_ID, xcoms={})
    with pytest.raises(AirflowFailException, match="no plan record"):
        kit_plan.plan_record({"ti": ti})
    plan = {"data_uri": f"{root}/d/data", "eval_uri": f"{root}/d/evaluation"}
    uri = kit_plan.write_plan_record({"ti": ti}, trainium_config(), plan)
    assert uri.startswith(f"{root}/runs/d/") and uri.endswith("/check_params/plan.json")
    assert kit_plan.plan_record({"ti": ti}) == plan  # no XCom (yet): the record
    ti.xcoms["check_params"] = dict(plan)
    assert kit_plan.plan_record({"ti": ti}) == plan
    ti.xcoms["check_params"] = {**plan, "data_uri": "file:///tmp/planted"}
    with pytest.raises(AirflowFailException) as err:
        kit_plan.plan_record({"ti": ti})
    assert "file:///tmp/planted" in str(err.value) and plan["data_uri"] in str(err.value)


def test_the_finetune_reference_is_the_current_latest_whatever_base_the_run_chose(root, tmp_path):
    from airflow_provider_trainium.registry import ModelRegistry

    spec = importlib.util.spec_from_file_location("finetune_dag", DAGS / "trainium_llama_finetune.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    params = {**module.dag.params.dump(), "compute": "local"}
    context = {"data_interval_start": datetime(2026, 1, 1), "dag_run": SimpleNamespace(run_type="scheduled")}
    base = tmp_path / "bases" / "b1"
    base.mkdir(parents=True)
    plan = module.run_plan({**params, "base_model": base.as_uri()}, trainium_config(), context)
    assert plan["reference_uri"] == plan["base_model_uri"] == base.as_uri()  # no latest: the base

    model = tmp_path / "tuned"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"\x05" * 32)
    registry = ModelRegistry(root)
    version = registry.register(module.MODEL_NAME, model.as_uri(), metrics_file=None,
                                base_model="file:///elsewhere/other-base").version  # fmt: skip
    registry.promote(module.MODEL_NAME, "latest", version.version)
    plan = module.run_plan({**params, "base_model": base.as_uri()}, trainium_config(), context)
    assert plan["reference_uri"] == version.uri.rstrip("/")  # latest, though tuned from another base


def test_a_plan_record_a_job_rewrote_fails_the_task(root):
    """The record sits under the run's prefix, which jobs may write; only Airflow holds the key of its seal."""
    ti = RunTI(dag_id="d", run_id=RUN_ID, xcoms={})
    plan = {"data_uri": f"{root}/d/data", "eval_uri": f"{root}/d/evaluation"}
    uri = kit_plan.write_plan_record({"ti": ti}, trainium_config(), plan)
    path = Path(uri.removeprefix("file://"))
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "eval_uri": "file:///tmp/planted"}))  # a job's edit, seal kept
    with pytest.raises(AirflowFailException, match="not sealed by this run's 'check_params' task"):
        kit_plan.plan_record({"ti": ti})


@pytest.mark.parametrize(
    ("run_type", "outcome"), [("scheduled", "skipped"), ("backfill", "skipped"), ("manual", "failed")]
)
def test_a_finetune_run_before_any_base_is_skipped_unless_a_person_asked_for_it(root, run_type, outcome):
    """A fresh install with the fine-tune DAG unpaused must not fail every day until a pretrain registers."""
    from airflow.sdk.exceptions import AirflowSkipException

    spec = importlib.util.spec_from_file_location("finetune_dag", DAGS / "trainium_llama_finetune.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    params = {**module.dag.params.dump(), "compute": "local"}  # base_model: the pretrain's registered name
    context = {"data_interval_start": datetime(2026, 1, 1), "dag_run": SimpleNamespace(run_type=run_type)}
    expected = AirflowSkipException if outcome == "skipped" else AirflowFailException
    with pytest.raises(expected, match="trainium_llama_pretrain") as raised:
        module.run_plan(params, trainium_config(), context)
    assert type(raised.value) is expected
