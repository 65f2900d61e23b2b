"""A shipped DAG file imports only what declaring its tasks needs: what runs a job (``compute/``, the image build,
the registry, the Neuron release table and container plan) and the libraries a job uses are imported by the task
that runs, never while the DAG processor parses the file.

Each DAG file runs in a fresh interpreter that has loaded what ``benchmarks/dag_parse.py`` loads before it times a
file (the DAG processor's modules and the ``airflow.*`` modules the file imports), plus what a trivial TaskFlow DAG
loads (the standard provider's decorators, which import ``packaging.requirements``): the benchmark's baseline pays
for those too, and no DAG can avoid them. A module that only the baseline loaded is not held against the file (so
``packaging`` and ``fsspec``, which Airflow itself has loaded by then, are checked for what the file adds).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.dag_parse import TRIVIAL

ROOT = Path(__file__).resolve().parents[3]
DAG_FILES = sorted((ROOT / "dags").glob("*.py"))

#: Modules (and everything under them) no DAG file may load while it is parsed: what runs a job, the provider's
#: run-time helpers (each imported by the method that needs it) and every AWS or ML library a job or task uses.
FORBIDDEN = (
    # what runs a job: the backends, the image build, the registry, the release table (a TOML parse)
    "airflow_provider_trainium.compute",
    "airflow_provider_trainium.image",
    "airflow_provider_trainium.registry",
    "airflow_provider_trainium.neuron.releases",
    "airflow_provider_trainium.neuron.plan",
    # the provider's run-time helpers: a task's try, not the DAG's declaration
    "airflow_provider_trainium.artifacts",
    "airflow_provider_trainium.code_bundle",
    "airflow_provider_trainium.hooks.trainium",  # the hook: DAG files read DEFAULT_CONN_ID from trainium_fields
    "airflow_provider_trainium.hooks.trainium_config",
    "airflow_provider_trainium.neuron.budget",
    "airflow_provider_trainium.neuron.compile_key",
    "airflow_provider_trainium.neuron.container",
    "airflow_provider_trainium.neuron.images",
    "airflow_provider_trainium.neuron.inputs",
    "airflow_provider_trainium.neuron.launch",
    "airflow_provider_trainium.neuron.pricing",
    "airflow_provider_trainium.neuron.secrets",
    "airflow_provider_trainium.neuron.spec",
    "airflow_provider_trainium.operators.job_checks",
    "airflow_provider_trainium.operators.job_cost",
    "airflow_provider_trainium.operators.job_finish",
    "airflow_provider_trainium.operators.lineage",
    "airflow_provider_trainium.operators.prepared_job",
    "airflow_provider_trainium.operators.run_images",
    "airflow_provider_trainium.operators.run_outputs",
    "airflow_provider_trainium.preflight",
    "airflow_provider_trainium.sensors",
    "airflow_provider_trainium.trackers",
    "airflow_provider_trainium.triggers",
    "trainium_trainer.common",
    "trainium_trainer.llama",
    "trainium_trainer.native",
    "trainium_trainer.titan",
    # libraries: version parsing, TOML, AWS, storage, ML, trackers
    "packaging",
    "tomllib",
    "tomli",
    "boto3",
    "botocore",
    "aiobotocore",
    "s3transfer",
    "s3fs",
    "fsspec",
    "airflow.providers.amazon",
    "docker",
    "torch",
    "torch_xla",
    "torch_neuronx",
    "neuronx_distributed",
    "torchtitan",
    "numpy",
    "pandas",
    "pyarrow",
    "transformers",
    "tokenizers",
    "sentencepiece",
    "safetensors",
    "datasets",
    "huggingface_hub",
    "accelerate",
    "mlflow",
    "tensorboard",
)

#: Run as ``python -c PROBE <dag file> <trivial DAG source> <forbidden...>``; prints one JSON line: the forbidden
#: modules the DAG file loaded, each with the first place that imported it, and those the baseline had loaded.
PROBE = r'''
import json, runpy, sys
import structlog
import airflow.dag_processing.processor as processor  # what the DAG processor has loaded before it forks
path, trivial, forbidden = sys.argv[1], sys.argv[2], tuple(sys.argv[3:])
processor._pre_import_airflow_modules(path, structlog.get_logger())
exec(trivial)  # the benchmark's baseline (benchmarks/dag_parse.py): @task loads the standard provider's decorators

def matches(name):
    return any(name == f or name.startswith(f + ".") for f in forbidden)

baseline = sorted(m for m in sys.modules if matches(m))
importers = {}

class FirstImporter:
    """Records, for each module imported from here on, the first frame outside importlib that asked for it."""

    def find_spec(self, name, path=None, target=None):
        if name not in importers:
            frame = sys._getframe(1)
            while frame is not None and (
                frame.f_code.co_filename.startswith("<frozen importlib") or "/importlib/" in frame.f_code.co_filename
            ):
                frame = frame.f_back
            importers[name] = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"
        return None

sys.meta_path.insert(0, FirstImporter())
runpy.run_path(path, run_name="dag_file")
loaded = sorted(m for m in sys.modules if matches(m) and m not in baseline)
print(json.dumps({"loaded": {m: importers.get(m, "?") for m in loaded}, "baseline": baseline}))
'''


def parse_closure(dag_file: Path) -> dict[str, dict[str, str] | list[str]]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(dag_file), TRIVIAL, *FORBIDDEN],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, f"parsing {dag_file.name} failed:\n{out.stderr[-4000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_there_are_dag_files_to_check():
    assert DAG_FILES, "no DAG files under dags/: the closure test would pass vacuously"


@pytest.mark.process
@pytest.mark.parametrize("dag_file", DAG_FILES, ids=lambda p: p.name)
def test_a_dag_file_loads_nothing_only_a_running_task_needs(dag_file: Path):
    found = parse_closure(dag_file)
    loaded: dict[str, str] = found["loaded"]  # type: ignore[assignment]
    # a package and its submodules: name the package (the first importer of the package is the one to fix)
    roots = {m: where for m, where in loaded.items() if not any(m.startswith(p + ".") for p in loaded)}
    report = "\n".join(f"  {m}  (first imported at {where})" for m, where in sorted(roots.items()))
    assert not loaded, (
        f"{dag_file.name} loads, while it is parsed, what only a running task needs:\n{report}\n"
        f"(all {len(loaded)}: {', '.join(loaded)}; the baseline alone loaded: {found['baseline']})"
    )


@pytest.mark.parametrize("dag_file", DAG_FILES, ids=lambda p: p.name)
def test_the_benchmarks_stock_twin_declares_the_same_dag_with_airflow_alone(dag_file: Path, tmp_path: Path):
    """``make bench-parse`` measures each file against its twin: same schedule, params, task ids, task kinds and
    edges, and nothing of the provider's (else the ratio would not isolate what the provider adds)."""
    from benchmarks.dag_parse import dags_of, stock_twin, twin_decorator

    source = stock_twin(dag_file)
    assert "airflow_provider_trainium" not in source and "trainium_trainer" not in source
    twin_file = tmp_path / f"stock_twin_of_{dag_file.name}"
    twin_file.write_text(source)
    ((dag,), (twin,)) = dags_of(dag_file), dags_of(twin_file)

    def shape(d: Any) -> dict:
        return {
            "schedule": d.schedule,
            "params": {k: (d.params.get_param(k).value, d.params.get_param(k).schema) for k in d.params},
            "edges": sorted((up, t.task_id) for t in d.tasks for up in t.upstream_task_ids),
            "kinds": sorted((t.task_id, twin_decorator(t)) for t in d.tasks),
        }

    assert shape(twin) == shape(dag)
