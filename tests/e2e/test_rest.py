"""The REST API v2 against the PostgreSQL deployment: a run, refused confs, and a backfill with a cleared interval."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.compute.naming import job_name
from tests.e2e.conftest import mnist_min_accuracy, wait_for, wait_run

pytestmark = pytest.mark.slow

MNIST = "trainium_mnist_mlp"
# One epoch on the 8x8 digits reaches ~0.5 accuracy: enough to show a run through; the DAG's own
# accuracy is covered by tests/e2e.
# The DAG's default epochs: its accuracy gate (MIN_ACCURACY, fixed in the DAG file) is not a run param.
MNIST_FAST = {"compute": "local"}
LLAMA_FAST = {"compute": "local", "runtime": "eager", "max_steps": 6, "log_every": 2, "checkpoint_every": 3}
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


def backfill_runs(api, dag_id: str) -> dict[str, dict]:
    runs = api.get(f"dags/{dag_id}/dagRuns", run_type="backfill", limit=100)["dag_runs"]
    return {r["logical_date"][:10]: r for r in runs}


def test_backfill_over_two_intervals_then_a_cleared_interval_adds_no_version_and_keeps_latest(
    deployment, api, registry
):
    pretrain = "trainium_llama_pretrain"
    api.unpause(pretrain)
    resp = api.trigger(pretrain, {**LLAMA_FAST, "max_steps": 8, "synthetic_records": 100})
    assert resp.status_code == 200, resp.text
    base_run = resp.json()["dag_run_id"]
    assert wait_run(api, deployment, pretrain, base_run) == "success", api.task_states(pretrain, base_run)

    dag_id = "trainium_llama_finetune"
    api.unpause(dag_id)  # a backfill of a paused DAG leaves its runs queued
    resp = api.request("POST", "backfills", json={"dag_id": dag_id, "from_date": "2026-01-01T00:00:00Z",
                                                  "to_date": "2026-01-02T00:00:00Z", "max_active_runs": 2,
                                                  "dag_run_conf": LLAMA_FAST})  # fmt: skip
    assert resp.status_code == 200, resp.text

    def finished() -> dict[str, dict] | None:
        runs = backfill_runs(api, dag_id)
        return runs if len(runs) == 2 and all(r["state"] in ("success", "failed") for r in runs.values()) else None

    runs = wait_for(finished, 1200, "two backfill runs", deployment)
    assert {day: r["state"] for day, r in runs.items()} == {"2026-01-01": "success", "2026-01-02": "success"}
    assert registry.list_versions("llama-finetune") == [1, 2]
    latest = registry.get_alias("llama-finetune", "latest")
    assert latest is not None  # both fine-tunes beat the base
    by_version = {api.xcom(dag_id, r["dag_run_id"], "register")["version"]: r["dag_run_id"] for r in runs.values()}
    older = by_version[1 if latest.version == 2 else 2]

    resp = api.request(
        "POST",
        f"dags/{dag_id}/clearTaskInstances",
        json={"dry_run": False, "dag_run_id": older, "only_failed": False, "reset_dag_runs": True},
    )
    assert resp.status_code == 200, resp.text  # fmt: skip
    assert wait_run(api, deployment, dag_id, older) == "success", api.task_states(dag_id, older)
    rerun = api.xcom(dag_id, older, "register")
    assert registry.list_versions("llama-finetune") == [1, 2]
    assert rerun["created"] is False
    assert registry.get_alias("llama-finetune", "latest").version == latest.version
