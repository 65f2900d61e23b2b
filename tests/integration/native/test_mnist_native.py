"""The MNIST MLP on the native stack: 2 ranks of plain DDP on gloo through the local launcher, then the whole
``trainium_mnist_mlp`` DAG with ``stack=native`` through ``dag.test()``.

Every run here has torch-xla made unimportable (``sitecustomize`` on ``PYTHONPATH`` records any attempt and
refuses it), so a native path that reached for torch-xla fails the run and leaves a record.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.compute.base import JobState
from airflow_provider_trainium.compute.local.backend import LocalBackend
from airflow_provider_trainium.neuron.spec import JobSpec
from trainium_trainer.mnist_mlp.prepare import prepare

REPO = Path(__file__).resolve().parents[3]
DAGS = REPO / "dags"
ARGS = ("--epochs", "5", "--lr", "0.05", "--momentum", "0.9", "--batch-size", "32")
NATIVE = {"compute": "local", "stack": "native", "instance_type": "trn2.48xlarge"}
#: Refuses every ``torch_xla`` import and appends the refused name to ``$XLA_BLOCK_LOG``.
BLOCKER = """
import importlib.abc, os, sys

class _NoXla(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch_xla" or name.startswith("torch_xla."):
            with open(os.environ["XLA_BLOCK_LOG"], "a") as log:
                log.write(name + "\\n")
            raise ImportError(f"{name} is blocked: the native stack must not import torch-xla")
        return None

sys.meta_path.insert(0, _NoXla())
"""


@pytest.fixture
def no_xla(tmp_path, monkeypatch) -> Path:
    """Every process of a local job started from here cannot import torch-xla. Local compute passes a job none of
    the worker's ``PYTHONPATH``, so the blocker comes the way a platform decides a local job's code: the job's
    interpreter (``LocalBackend.python``), here a wrapper that sets it for the launcher, which passes its
    environment on to every rank."""
    site = tmp_path / "no-xla"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    log = tmp_path / "xla-imports.log"
    python = tmp_path / "python-no-xla"
    env = {"PYTHONPATH": f"{site}:{REPO}", "XLA_BLOCK_LOG": str(log), "OMP_NUM_THREADS": "1"}
    assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    python.write_text(f'#!/bin/sh\nexport {assignments}\nexec {shlex.quote(sys.executable)} "$@"\n')
    python.chmod(0o755)
    init = LocalBackend.__init__

    def on_the_wrapper(self: LocalBackend, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.python = str(python)

    monkeypatch.setattr(LocalBackend, "__init__", on_the_wrapper)
    blocked = subprocess.run([str(python), "-c", "import torch_xla"], capture_output=True, text=True)
    assert blocked.returncode != 0 and log.read_text() == "torch_xla\n", blocked.stderr  # the blocker is live
    log.unlink()
    return log


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> str:
    uri = tmp_path_factory.mktemp("digits").as_uri()
    prepare(uri, seed=0)
    return uri


def launch(tmp_path: Path, entry_point: str, *args: str, ranks: int = 2, out: str = "out") -> list[str]:
    """One job through the local launcher, as local compute runs it; the job's log lines."""
    spec = JobSpec(name="mnist", entry_point=entry_point, args=args, stack="native", instance_type="trn2.48xlarge",
                   processes_per_node=ranks, output_uri=(tmp_path / out).as_uri())  # fmt: skip
    lines: list[str] = []
    backend = LocalBackend(tmp_path / "state")
    status = backend.wait(backend.submit(spec, f"{out}-native", {}), lines.append, 600)
    assert status.state is JobState.SUCCEEDED, "\n".join(lines[-40:])
    return lines


def test_two_ddp_ranks_learn_in_bf16_without_torch_xla(tmp_path, digits, no_xla):
    launch(tmp_path, "trainium_trainer.mnist_mlp.train", "--data-uri", digits, *ARGS, "--precision", "bf16")
    out = tmp_path / "out"
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["stack"], metrics["runtime"], metrics["process_group_backend"]) == ("native", "native-cpu", "gloo")
    assert metrics["world_size"] == 2 and metrics["precision"] == "bf16"
    assert metrics["accuracy"] >= 0.9  # the DAG's promotion gate (dags/trainium_mnist_mlp.py MIN_ACCURACY)
    losses = [h["loss"] for h in metrics["history"]]
    assert losses[-1] < losses[0] / 4
    assert [h["xla_graphs"] for h in metrics["history"]] == [None] * len(losses)
    for name in ("model.safetensors", "model_config.json", "_SUCCESS"):
        assert (out / name).exists()
    assert sorted(p.name for p in (out / "stream" / "train").iterdir())  # the live curve, as on the XLA path
    # the model the registry gets is the one the XLA path's evaluation loads, and it scores what training said
    launch(tmp_path, "trainium_trainer.mnist_mlp.evaluate", "--model-uri", out.as_uri(), "--data-uri", digits,
           "--min-accuracy", "0.9", ranks=1, out="eval")  # fmt: skip
    assert json.loads((out / "evaluation.json").read_text())["accuracy"] == metrics["accuracy"]
    assert not no_xla.exists(), no_xla.read_text()


@pytest.mark.slow
def test_mnist_dag_on_the_native_stack_registers_a_version(tmp_path, monkeypatch, no_xla):
    from airflow.dag_processing.dagbag import DagBag

    from airflow_provider_trainium.registry import ModelRegistry

    conn = json.dumps({"conn_type": "trainium", "extra": {"artifact_root": (tmp_path / "root").as_uri()}})
    monkeypatch.setenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", conn)
    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    run = bag.get_dag("trainium_mnist_mlp").test(run_conf=NATIVE)
    assert str(run.state) == "success"
    version = ModelRegistry((tmp_path / "root").as_uri()).get_version("mnist-mlp", 1)
    assert version.metrics["stack"] == "native" and version.metrics["process_group_backend"] == "gloo"
    assert version.metrics["world_size"] == 2 and version.metrics["accuracy"] >= 0.9
    trials = [json.loads(p.read_text()) for p in (tmp_path / "root").rglob("compile/metrics.json")]
    assert [(t["compile_only"], t["stack"]) for t in trials] == [(True, "native")]
    assert not no_xla.exists(), no_xla.read_text()
