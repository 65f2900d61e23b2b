"""The job operators' OpenLineage facets: built from what the try prepared and what the job cost, serialisable by
the OpenLineage client, absent without the provider, and never an error for the task."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from airflow_provider_trainium.compute.base import JobHandle, JobState, JobStatus
from airflow_provider_trainium.operators.compile import TrainiumCompileOperator
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from airflow_provider_trainium.operators.lineage import RUN_FACET, flag_values, image_details, unique_locations
from airflow_provider_trainium.operators.training import TrainiumTrainingOperator
from tests.conftest import set_trainium_connection
from tests.unit.operators.test_job import context

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium@sha256:" + "ab" * 32
DATA = "s3://data-bucket/mnist/v3"
BASE = "s3://models/llama/versions/2/files"
ARGS = ["--data-uri", DATA, f"--base-model-uri={BASE}", "--epochs", "1", "--output-uri", "s3://ignored/out"]


def finished(op: TrainiumJobOperator, ctx: dict[str, Any]) -> Any:
    """Prepare ``op`` and finish its job as succeeded, as the wait does; returns the task's value."""
    prepared = op.prepare(ctx)
    handle = JobHandle(prepared.compute, "job-42", prepared.job_name, {"started_at": 1_800_000_000.0})
    op.remember(ctx, handle)
    return op.finish(ctx, prepared.spec, handle, JobStatus(JobState.SUCCEEDED))


def as_json(lineage: Any) -> dict[str, Any]:
    """The run facets and datasets as the OpenLineage client writes them (no placeholder for unknown types)."""
    from openlineage.client.serde import Serde

    event = {
        "inputs": [Serde.to_dict(d) for d in lineage.inputs],
        "outputs": [Serde.to_dict(d) for d in lineage.outputs],
        "run": {name: Serde.to_dict(facet) for name, facet in lineage.run_facets.items()},
    }
    text = json.dumps(event, sort_keys=True)  # no default=: a non-JSON value fails here
    assert "non-serializable" not in Serde.to_json(lineage.run_facets[RUN_FACET])
    return json.loads(text)


@pytest.fixture
def connection(tmp_path, monkeypatch: pytest.MonkeyPatch) -> str:
    root = tmp_path.as_uri()
    set_trainium_connection(monkeypatch, artifact_root=root, image=IMAGE, allowed_input_prefixes=["s3://data-bucket"])
    return root


def test_a_training_job_reads_its_data_and_base_model_and_writes_its_output_and_checkpoints(connection):
    op = TrainiumTrainingOperator(task_id="t", entry_point="trainium_trainer.mnist_mlp.train", compute="local",
                                  job_args=ARGS, instance_type="trn1.32xlarge", nodes=2, max_cost_usd=2000)  # fmt: skip
    ctx = context()
    output = finished(op, ctx)
    event = as_json(op.get_openlineage_facets_on_complete(None))

    assert event["inputs"] == [
        {"namespace": "s3://data-bucket", "name": "mnist/v3", "facets": {}},
        {"namespace": "s3://models", "name": "llama/versions/2/files", "facets": {}},
    ]
    checkpoints = op.prepare(ctx).spec.checkpoint_uri
    assert [(d["namespace"], d["name"]) for d in event["outputs"]] == [
        ("file", output.removeprefix("file://")),
        ("file", checkpoints.removeprefix("file://")),
    ]
    facet = event["run"][RUN_FACET]
    assert facet["compute"] == "local" and facet["jobId"] == "job-42" and facet["jobName"].startswith("d-t-")
    assert facet["image"] == {"uri": IMAGE, "digest": "sha256:" + "ab" * 32, "inContainer": False}
    assert facet["layout"] == {
        "instanceType": "trn1.32xlarge",
        "nodes": 2,
        "processesPerNode": 32,
        "neuronCoresPerNode": 32,
        "worldSize": 64,
        "tensorParallelSize": 1,
        "stack": "xla",
        "workload": "default",
        "distributed": True,
    }
    pushed = ctx["ti"].xcoms["trainium_cost"]
    assert facet["cost"]["is_estimate"] is True and facet["cost"]["usd"] == 0.0
    assert facet["cost"]["estimate_usd"] == pushed["estimate_usd"] and facet["cost"]["budget_usd"] == 2000.0
    assert facet["_schemaURL"].endswith("#TrainiumJobRunFacet") and facet["_producer"]


def test_a_compile_trial_writes_the_cache_it_fills_and_names_its_key(connection):
    op = TrainiumCompileOperator(task_id="compile", entry_point="tests.integration.jobs.report_env", compute="local",
                                 job_args=["--data-uri", DATA], skip_if_cached=False)  # fmt: skip
    ctx = context()
    result = finished(op, ctx)
    event = as_json(op.get_openlineage_facets_on_complete(None))

    cache = f"{connection}/compile-cache/d"
    assert event["inputs"] == [{"namespace": "s3://data-bucket", "name": "mnist/v3", "facets": {}}]
    assert [d["name"] for d in event["outputs"]] == [
        cache.removeprefix("file://"),
        op.prepare(ctx).spec.output_uri.removeprefix("file://"),
    ]
    facet = event["run"][RUN_FACET]
    assert facet["compileCache"] == {"uri": cache, "key": result["cache_key"], "skipped": False}


def test_a_skipped_compile_trial_only_reads_the_cache(connection):
    job = {"task_id": "compile", "entry_point": "tests.integration.jobs.report_env", "compute": "local",
           "job_args": ["--data-uri", DATA]}  # fmt: skip
    first = TrainiumCompileOperator(**job)
    key = finished(first, context())["cache_key"]
    again = TrainiumCompileOperator(**job)
    assert again.execute(context())["skipped"] is True
    event = as_json(again.get_openlineage_facets_on_complete(None))
    cache = f"{connection}/compile-cache/d"
    assert [d["name"] for d in event["inputs"]] == ["mnist/v3", cache.removeprefix("file://")]
    assert event["outputs"] == []
    facet = event["run"][RUN_FACET]
    assert facet["compileCache"] == {"uri": cache, "key": key, "skipped": True} and "jobId" not in facet


def test_a_training_job_that_uses_a_compile_cache_reads_it(connection):
    cache = f"{connection}/compile-cache/shared"
    op = TrainiumTrainingOperator(task_id="t", entry_point="trainium_trainer.mnist_mlp.train", compute="local",
                                  job_args=ARGS, compile_cache_uri=cache)  # fmt: skip
    finished(op, context())
    event = as_json(op.get_openlineage_facets_on_complete(None))
    assert ("file", cache.removeprefix("file://")) in [(d["namespace"], d["name"]) for d in event["inputs"]]
    assert event["run"][RUN_FACET]["compileCache"] == {"uri": cache}


def test_without_the_openlineage_provider_there_is_no_lineage(connection, monkeypatch):
    op = TrainiumJobOperator(task_id="t", entry_point="m", compute="local")
    finished(op, context())
    monkeypatch.setitem(sys.modules, "airflow.providers.openlineage.extractors", None)  # import raises ImportError
    assert op.get_openlineage_facets_on_complete(None) is None


def test_nothing_prepared_gives_empty_lineage():
    lineage = TrainiumJobOperator(task_id="t", entry_point="m").get_openlineage_facets_on_complete(None)
    assert (lineage.inputs, lineage.outputs, lineage.run_facets) == ([], [], {})


def test_a_failure_to_build_lineage_is_a_warning_not_an_error(connection):
    from structlog.testing import capture_logs

    class Broken(TrainiumJobOperator):
        def lineage_locations(self, spec: Any) -> tuple[list[str], list[str]]:
            raise RuntimeError("storage said no")

    op = Broken(task_id="t", entry_point="m", compute="local")
    finished(op, context())
    with capture_logs() as logs:
        assert op.get_openlineage_facets_on_complete(None) is None
    assert [e for e in logs if "OpenLineage" in e["event"]] == [
        {"event": "OpenLineage facets could not be built: storage said no", "log_level": "warning"}
    ]


def test_input_flags_locations_and_image_digests():
    assert flag_values(["--data-uri", "a", "--model-uri=b", "--lr", "1", "--input-uri"]) == ["a", "b"]
    assert unique_locations(["s3://b/k/", "s3://b/k", "mnist@latest", None, "", "/abs"]) == ["s3://b/k", "/abs"]
    assert image_details("repo:tag", True) == {"uri": "repo:tag", "digest": None, "inContainer": True}
    assert image_details(None, True) is None


@pytest.mark.process
def test_the_operator_modules_load_neither_openlineage_nor_heavy_modules():
    """A DAG file that imports the job operators parses without the OpenLineage client, boto3 or torch: the
    lineage module is imported only when an event is built."""
    import subprocess

    code = (
        "import json, sys\n"
        "import airflow_provider_trainium.operators.compile, airflow_provider_trainium.operators.training\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert "airflow_provider_trainium.operators.lineage" not in loaded
    assert not [m for m in loaded if m.split(".")[0] in ("openlineage", "boto3", "torch")]
    assert not [
        m
        for m in loaded
        if m.startswith(("airflow.providers.openlineage.extractors", "airflow.providers.openlineage.plugins"))
    ]
