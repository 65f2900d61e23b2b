"""The compile step on the native stack through ``dag.test()``: local compute, the MNIST trainer with
``--compile`` on 2 gloo ranks.

The trial is the training command's ``--compile-only`` run; on this CPU its ``torch.compile`` is inductor, whose
persistent cache (``TORCHINDUCTOR_CACHE_DIR``) stands in for TorchNeuron's NEFF cache. The trial warms it under
the compile cache URI and records the key; a rerun with the same key skips the trial; another layout is
another key, so its trial runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.dag_files import import_dag_file
from trainium_trainer.mnist_mlp.prepare import prepare


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    # one thread per rank: the local jobs keep OMP_NUM_THREADS because the connection says so
    extra = {"artifact_root": (tmp_path / "root").as_uri(), "local_inherited_env": ["OMP_NUM_THREADS"]}
    monkeypatch.setenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", json.dumps({"conn_type": "trainium", "extra": extra}))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return tmp_path / "root"


DAG_FILE = """
import datetime as dt

from airflow.sdk import DAG

from airflow_provider_trainium.operators.compile import TrainiumCompileOperator

dags = {{}}
for ranks in (1, 2):
    with DAG(f"native_compile_{{ranks}}_ranks", schedule=None, start_date=dt.datetime(2026, 1, 1)) as dag:
        TrainiumCompileOperator(task_id="compile", entry_point="trainium_trainer.mnist_mlp.train",
                                job_args=["--data-uri", {data!r}, "--batch-size", "32", "--compile"], trial_steps=4,
                                compute="local", stack="native", instance_type="trn2.48xlarge",
                                processes_per_node=ranks, compile_cache_uri={cache!r})
    dags[ranks] = dag
"""


def compile_dags(tmp_path: Path, monkeypatch, data_uri: str, cache_uri: str) -> dict[int, Any]:
    """Two DAGs of one compile task each, 2 ranks and 1, on one cache (``dag.test()`` needs them in a bundle)."""
    source = DAG_FILE.format(data=data_uri, cache=cache_uri)
    return import_dag_file(tmp_path / "dags", "native_compile", source, "native-compile", monkeypatch).dags


def records(cache: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((cache / "keys").glob("*.json"))}


def trials(root: Path) -> list[Path]:
    return sorted(root.rglob("compile/metrics.json"))


@pytest.mark.slow
def test_native_trial_warms_the_cache_records_its_key_and_a_rerun_with_that_key_skips(root, tmp_path, monkeypatch):
    data = (tmp_path / "digits").as_uri()
    prepare(data, seed=0)
    cache = tmp_path / "cache"
    dags = compile_dags(tmp_path, monkeypatch, data, cache.as_uri())

    first = dags[2]
    assert str(first.test().state) == "success"
    ((key, record),) = records(cache).items()
    inputs = record["inputs"]
    assert (inputs["stack"], inputs["compile_backend"], inputs["processes_per_node"]) == ("native", "inductor", 2)
    assert inputs["compiler_version"].startswith("torch==") and "--compile" in inputs["args"]
    trial = record["metrics"]
    assert trial["compile_only"] is True and trial["stack"] == "native" and trial["steps"] == 4
    assert trial["compile_backend"] == "inductor" and trial["compile_cache_persistent"] is True
    assert trial["compile_cache"]["miss"] > 0  # a cold cache: the trial compiled the graphs
    assert trial["compile_cache_dir"] == str(cache / "native" / "inductor")
    assert any((cache / "native" / "inductor" / "fxgraph").rglob("*")), "the trial left no compiled graph"
    assert len(trials(root)) == 1

    assert str(first.test().state) == "success"  # same key: a cache hit, no second trial
    assert list(records(cache)) == [key] and len(trials(root)) == 1

    assert str(dags[1].test().state) == "success"  # another layout: another key, so the trial runs
    keys = records(cache)
    one_rank = keys[next(k for k in keys if k != key)]
    assert len(keys) == 2 and one_rank["inputs"]["processes_per_node"] == 1
    assert len(trials(root)) == 2
    # its rank compiles the same graphs (32 samples a rank): every one is in the cache the first trial warmed
    assert one_rank["metrics"]["compile_cache"] == {"hit": trial["compile_cache"]["miss"], "miss": 0}
