"""A compile task and a training task on local compute, watched by the OpenLineage provider's own listener with
its file transport: their COMPLETE events name the data read, the cache and outputs written, and the job's image,
layout and cost. The DAG runs in a fresh process: the listener and its transport are configured once, at start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.operators.lineage import RUN_FACET
from tests.integration.lineage.pipeline import DAG_ID
from trainium_trainer.mnist_mlp.prepare import prepare

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium-train@sha256:" + "5e" * 32
RUN_S = 300


def complete_events(log_file: Path) -> dict[str, dict[str, Any]]:
    """Task id -> its COMPLETE event, from the file transport's one-event-per-line log."""
    events = [json.loads(line) for line in log_file.read_text().splitlines() if line.strip()]
    return {
        e["job"]["name"].split(".", 1)[1]: e for e in events if e["eventType"] == "COMPLETE" and "." in e["job"]["name"]
    }


def datasets(event: dict[str, Any], side: str) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in event[side]]


def test_compile_and_training_events_carry_inputs_outputs_and_the_job_facet(tmp_path):
    data = tmp_path / "digits"
    prepare(data.as_uri(), seed=0)
    root = tmp_path / "root"
    cache = root / "compile-cache" / "shared"
    log_file = tmp_path / "openlineage.jsonl"
    connection = {"conn_type": "trainium", "extra": {"artifact_root": root.as_uri(), "image": IMAGE,
                                                     "allowed_input_prefixes": [data.as_uri()]}}  # fmt: skip
    env = {
        **os.environ,
        "AIRFLOW_CONN_TRAINIUM_DEFAULT": json.dumps(connection),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(log_file), "append": True}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "trainium-tests",
    }
    argv = [sys.executable, "-m", "tests.integration.lineage.pipeline", data.as_uri(), cache.as_uri()]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=RUN_S, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]

    events = complete_events(log_file)
    assert {"compile", "train"} <= set(events), sorted(events)
    compile_event, train_event = events["compile"], events["train"]
    assert compile_event["job"]["name"] == f"{DAG_ID}.compile"

    # the trial reads the data and writes the cache; training reads the data and the cache the trial filled
    assert datasets(compile_event, "inputs") == [("file", str(data))]
    assert datasets(compile_event, "outputs")[0] == ("file", str(cache))
    assert datasets(train_event, "inputs") == [("file", str(data)), ("file", str(cache))]
    output = root / "runs" / DAG_ID
    written = datasets(train_event, "outputs")
    assert written[0][0] == "file" and Path(written[0][1]).parent.parent == output and written[0][1].endswith("/train")
    assert (Path(written[0][1]) / "metrics.json").is_file()  # the output named is the one the job wrote
    assert written[1][1].startswith(str(root / "checkpoints" / DAG_ID))

    for event in (compile_event, train_event):
        facet = event["run"]["facets"][RUN_FACET]
        assert facet["compute"] == "local" and facet["jobId"]
        assert facet["image"] == {"uri": IMAGE, "digest": "sha256:" + "5e" * 32, "inContainer": False}
        assert facet["layout"]["instanceType"] == "trn1.2xlarge" and facet["layout"]["nodes"] == 1
        assert facet["layout"]["neuronCoresPerNode"] == 2 and facet["layout"]["stack"] == "xla"
        assert facet["cost"]["is_estimate"] is True and facet["cost"]["usd"] == 0.0 and facet["cost"]["wall_s"] > 0
    compiled = compile_event["run"]["facets"][RUN_FACET]["compileCache"]
    assert compiled["uri"] == cache.as_uri() and compiled["skipped"] is False and len(compiled["key"]) > 8
    assert (cache / "keys" / f"{compiled['key']}.json").is_file()  # the key the facet names is the one recorded
