"""``trainium_llama_pretrain`` on the native stack through ``dag.test()``: local compute, 2 ranks on gloo.

The run's params choose the stack; the job's container plan carries ``TRAINIUM_STACK=native`` to the trainer,
its compile task runs the native trial, and the registered version loads with ``from_pretrained``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.dag_runs import get_dag

DAGS = Path(__file__).resolve().parents[3] / "dags"
NATIVE = {"compute": "local", "stack": "native", "instance_type": "trn2.48xlarge", "max_steps": 10,
          "log_every": 5, "checkpoint_every": 5}  # fmt: skip


@pytest.mark.slow
def test_pretrain_dag_on_the_native_stack_registers_a_version_from_pretrained_loads(artifact_root):
    from transformers import AutoModelForCausalLM

    from airflow_provider_trainium.registry import ModelRegistry

    run = get_dag("trainium_llama_pretrain").test(run_conf=NATIVE)
    assert str(run.state) == "success"
    model = ModelRegistry(artifact_root.as_uri()).get_version("llama-pretrain", 1)
    metrics = model.metrics
    assert metrics["stack"] == "native" and metrics["process_group_backend"] == "gloo"
    assert metrics["world_size"] == 2 and metrics["steps"] == 10
    (model_dir,) = (artifact_root / "llama" / "pretrain").glob("*/model")
    loaded = AutoModelForCausalLM.from_pretrained(model_dir)
    assert loaded.config.model_type == "llama"
    summaries = [json.loads(p.read_text()) for p in artifact_root.rglob("compile/metrics.json")]
    assert [(s["compile_only"], s.get("stack")) for s in summaries] == [(True, "native")]


@pytest.mark.slow
def test_finetune_dag_on_the_native_stack_starts_from_a_sharded_hugging_face_directory(tmp_path, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag
    from transformers import AutoModelForCausalLM

    from airflow_provider_trainium.registry import ModelRegistry
    from tests.hf_fixtures import save_tiny_llama
    from trainium_trainer.common.uri import local_path
    from trainium_trainer.llama.hf_checkpoint import HFCheckpoint

    root, base = tmp_path / "artifacts", tmp_path / "base"
    extra = {"artifact_root": root.as_uri(), "allowed_input_prefixes": [base.as_uri()]}
    monkeypatch.setenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", json.dumps({"conn_type": "trainium", "extra": extra}))
    save_tiny_llama(base)
    assert len(list(base.glob("model-*.safetensors"))) > 2
    conf = {**NATIVE, "max_steps": 6, "log_every": 3, "checkpoint_every": 0, "base_model": base.as_uri()}
    run = DagBag(dag_folder=str(DAGS)).get_dag("trainium_llama_finetune").test(run_conf=conf)
    assert str(run.state) == "success"
    version = ModelRegistry(root.as_uri()).get_version("llama-finetune", 1)
    metrics = version.metrics
    assert metrics["stack"] == "native" and metrics["world_size"] == 2
    assert metrics["base_read_fraction"] < 0.6  # each of the 2 ranks read its own shards of the base
    assert version.manifest["metrics"]["base_model"] == HFCheckpoint(base.as_uri()).fingerprint()
    assert AutoModelForCausalLM.from_pretrained(local_path(version.uri)).config.model_type == "llama"
