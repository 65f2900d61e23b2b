"""The REST API v2 against the PostgreSQL deployment: a run and refused confs (a USER's backfill with a cleared
interval: tests/e2e/test_attacks.py)."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.compute.naming import job_name
from tests.e2e.conftest import mnist_min_accuracy, wait_run

pytestmark = pytest.mark.slow

MNIST = "trainium_mnist_mlp"
# One epoch on the 8x8 digits reaches ~0.5 accuracy: enough to show a run through; the DAG's own
# accuracy is covered by tests/e2e.
# The DAG's default epochs: its accuracy gate (MIN_ACCURACY, fixed in the DAG file) is not a run param.
MNIST_FAST = {"compute": "local"}
MNIST_TASKS = ("prepare_data", "compile", "train", "evaluate")


def test_rest_triggered_mnist_run_succeeds_and_registers_one_version(deployment, api, registry):
    api.unpause(MNIST)
    before = set(registry.list_versions("mnist-mlp"))
    resp = api.trigger(MNIST, MNIST_FAST)
    assert resp.status_code == 200, resp.text
    run_id = resp.json()["dag_run_id"]
    assert wait_run(api, deployment, MNIST, run_id) == "success", api.task_states(MNIST, run_id)
    registered = api.xcom(MNIST, run_id, "register")
    assert set(registry.list_versions("mnist-mlp")) - before == {registered["version"]}
    assert registry.get_alias("mnist-mlp", "latest").version == registered["version"]
    metrics = registry.get_version("mnist-mlp", registered["version"]).metrics
    assert metrics["accuracy"] >= mnist_min_accuracy() and metrics["samples_per_second"] > 0


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"nodes": 0}, "Invalid input for param nodes: 0 is less than the minimum of 1"),
        ({"instance_type": "trn9.huge"}, "Invalid input for param instance_type: 'trn9.huge' is not one of"),
        ({"epochs": "five"}, "Invalid input for param epochs: 'five' is not of type 'integer'"),
    ],
    ids=["nodes-0", "unknown-instance-type", "string-for-number"],
)
def test_api_refuses_a_bad_conf_with_400_and_creates_no_run(api, registry, conf, message):
    runs = api.run_ids(MNIST)
    resp = api.trigger(MNIST, {"compute": "local", **conf})
    assert resp.status_code == 400 and message in resp.json()["detail"], resp.text
    assert api.run_ids(MNIST) == runs


def test_three_single_node_instances_fail_in_the_first_task_before_any_job(deployment, api, registry):
    api.unpause(MNIST)
    before = registry.list_versions("mnist-mlp")
    resp = api.trigger(MNIST, {"compute": "local", "instance_type": "trn1.2xlarge", "nodes": 3})
    assert resp.status_code == 200, resp.text  # a cross-field rule: JSON Schema cannot say it
    run_id = resp.json()["dag_run_id"]
    assert wait_run(api, deployment, MNIST, run_id) == "failed"
    states = api.task_states(MNIST, run_id)
    assert states["check_params"] == "failed"
    assert {states[t] for t in (*MNIST_TASKS, "register")} == {"upstream_failed"}
    check = api.task_instance(MNIST, run_id, "check_params")
    assert check["try_number"] == 1  # failed once, not retried
    last_lines = api.log(MNIST, run_id, "check_params", 1).splitlines()[-15:]
    assert any("nodes=3 on trn1.2xlarge: this instance type has no EFA and runs on one node only" in line
               for line in last_lines), last_lines  # fmt: skip
    state_dir = deployment.home / "trainium-local"
    assert not [t for t in MNIST_TASKS if (state_dir / f"{job_name(MNIST, t, run_id)}.json").exists()]
    assert registry.list_versions("mnist-mlp") == before
