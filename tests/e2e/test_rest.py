"""The REST API v2 against the PostgreSQL deployment: the shared MNIST run (triggered through it) and what it
registered, and refused confs (a bad layout through the form: tests/e2e/test_ui.py; a USER's backfill with a
cleared interval: tests/e2e/test_attacks.py)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from tests.e2e.conftest import MNIST, SHARED_EPOCHS, mnist_min_accuracy

pytestmark = pytest.mark.slow


def test_rest_triggered_mnist_run_succeeds_and_registers_one_version(deployment, api, registry, mnist_run):
    """The run trained on 2 XLA ranks with every graph from the compile step's cache, evaluated to the DAG's
    gate, and registered one version whose manifest matches its files and names the run."""
    version = mnist_run["version"]
    assert registry.list_versions("mnist-mlp") == [version]  # a fresh deployment: this run's version only
    assert registry.get_alias("mnist-mlp", "latest").version == version
    train_dir = Path(unquote(urlparse(mnist_run["output_uri"]).path))
    metrics = json.loads((train_dir / "metrics.json").read_text())
    assert metrics["accuracy"] >= mnist_min_accuracy() and metrics["samples_per_second"] > 0
    assert metrics["world_size"] == 2 and metrics["runtime"] == "xla"
    assert metrics["xla_cache_missing"] == 0  # the compile step produced every graph training needed
    evaluation = json.loads((train_dir / "evaluation.json").read_text())
    assert evaluation["accuracy"] == pytest.approx(metrics["accuracy"])

    version_dir = deployment.home / "trainium" / "models" / "mnist-mlp" / "versions" / str(version)
    manifest = json.loads((version_dir / "manifest.json").read_text())
    assert manifest["metrics"]["accuracy"] == pytest.approx(metrics["accuracy"])
    assert manifest["source"]["dag_id"] == MNIST and manifest["source"]["run_id"] == mnist_run["run_id"]
    assert manifest["params"]["epochs"] == SHARED_EPOCHS
    assert manifest["software"]["torch"] == importlib.metadata.version("torch").split("+")[0]
    listed = {f["path"]: f for f in manifest["files"]}
    assert {"model.safetensors", "model_config.json", "metrics.json"} <= set(listed)
    for path, entry in listed.items():
        data = (version_dir / "files" / path).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["size"], entry["sha256"])


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"nodes": 0}, "Invalid input for param nodes: 0 is less than the minimum of 1"),
        ({"instance_type": "trn9.huge"}, "Invalid input for param instance_type: 'trn9.huge' is not one of"),
        ({"epochs": "five"}, "Invalid input for param epochs: 'five' is not of type 'integer'"),
    ],
    ids=["nodes-0", "unknown-instance-type", "string-for-number"],
)
def test_api_refuses_a_bad_conf_with_400_and_creates_no_run(api, conf, message):
    runs = api.run_ids(MNIST)
    resp = api.trigger(MNIST, {"compute": "local", **conf})
    assert resp.status_code == 400 and message in resp.json()["detail"], resp.text
    assert api.run_ids(MNIST) == runs
