"""``trainium_titan_pretrain`` through ``dag.test()``: TorchTitan's trainer on local compute, 2 ranks on gloo,
checkpointing to the run's folder; the registered version loads with ``from_pretrained``, and its metrics say
TorchTitan trained it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

pytest.importorskip("torchtitan")  # the native venv's; the main venv never collects this folder

from tests.dag_runs import get_dag  # noqa: E402

DAGS = Path(__file__).resolve().parents[3] / "dags"
DAG_FILE = DAGS / "trainium_titan_pretrain.py"
CONF = {"compute": "local", "instance_type": "trn2.48xlarge", "max_steps": 10, "log_every": 5,
        "checkpoint_every": 5, "batch_size": 4}  # fmt: skip


def test_the_dag_offers_exactly_the_flavours_the_titan_trainer_runs():
    from trainium_trainer.titan.spec import FLAVORS

    (listed,) = [ast.literal_eval(node.value) for node in ast.parse(DAG_FILE.read_text()).body
                 if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "FLAVORS"]  # fmt: skip
    assert listed == list(FLAVORS) and "llama3.2-1b" not in listed  # tied embeddings: no TorchTitan form


@pytest.mark.slow
def test_titan_dag_trains_with_torchtitan_and_registers_a_version_from_pretrained_loads(artifact_root):
    from transformers import AutoModelForCausalLM

    from airflow_provider_trainium.registry import ModelRegistry
    from trainium_trainer.common.uri import local_path

    dag = get_dag("trainium_titan_pretrain")
    assert "compile" not in dag.task_ids  # TorchTitan runs eager: no graph cache to warm
    run = dag.test(run_conf=CONF)
    assert str(run.state) == "success"

    version = ModelRegistry(artifact_root.as_uri()).get_version("llama-titan-pretrain", 1)
    metrics = version.metrics
    assert metrics["trainer"] == "torchtitan" and metrics["torchtitan_version"] == "0.2.2"
    assert (metrics["stack"], metrics["process_group_backend"], metrics["world_size"]) == ("native", "gloo", 2)
    assert metrics["steps"] == 10 and metrics["preset"] == "tiny" and metrics["batch_size_per_rank"] == 4

    model = AutoModelForCausalLM.from_pretrained(local_path(version.uri))
    assert model.config.model_type == "llama" and model.config.hidden_size == 64  # the tiny preset

    # TorchTitan checkpointed into the run's planned folder every 5 steps, and the registry records it
    (run_dir,) = (artifact_root / "llama" / "titan").iterdir()
    checkpoints = run_dir / "checkpoints"
    assert {"step-5", "step-10"} <= {p.name for p in checkpoints.iterdir()}
    assert metrics["checkpoint"] == str(checkpoints / "step-10")
    assert version.manifest["checkpoint"] == {"uri": checkpoints.as_uri()}
    evaluation = json.loads((run_dir / "evaluation" / "evaluation.json").read_text())
    assert evaluation["eval_loss"] == pytest.approx(metrics["eval_loss"], abs=1e-3)
