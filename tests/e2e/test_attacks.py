"""What a USER may edit cannot change what gets promoted: the attacks of issue 25, through the REST API v2 of the
real deployment, as the simple auth manager's USER role (trigger, backfill, edit task instances and XComs).

* An edited ``train`` XCom naming a planted directory outside the artifact root: ``register`` fails, naming both
  URIs, and registers nothing.
* A failed evaluation marked success: ``register`` re-reads the evaluation job's verdict and refuses the model;
  ``latest`` does not move. Both attacks share one short MNIST run (one epoch: accuracy ~0.5, below the gate).
* A USER's backfill of the fine-tune DAG (``PROMOTE_MANUAL_RUNS = False``) with their own conf registers its
  model but moves no alias, although its verdict passes; the cleared interval adds no version.
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import wait_for, wait_run

pytestmark = pytest.mark.slow

MNIST = "trainium_mnist_mlp"
#: One epoch reaches ~0.5 accuracy, below the DAG's MIN_ACCURACY: the evaluation job fails its verdict.
MNIST_FAILING = {"compute": "local", "epochs": 1}
LLAMA_FAST = {"compute": "local", "runtime": "eager", "max_steps": 6, "log_every": 2, "checkpoint_every": 3}
FINETUNE = "trainium_llama_finetune"


def clear(api, dag_id: str, run_id: str, task_ids: list[str] | None = None) -> None:
    """Clear ``task_ids`` of a run (None: every task)."""
    body = {"dry_run": False, "dag_run_id": run_id, "only_failed": False, "reset_dag_runs": True}
    resp = api.request("POST", f"dags/{dag_id}/clearTaskInstances",
                       json={**body, **({"task_ids": task_ids} if task_ids else {})})  # fmt: skip
    assert resp.status_code == 200, resp.text


def clear_register(api, user_api, deployment, run_id: str) -> str:
    """The USER clears ``register``; wait for the try that clearing starts to end (not a state read before the
    clear took effect): it must fail, and the run with it. Its log."""
    before = api.task_instance(MNIST, run_id, "register")["try_number"]
    clear(user_api, MNIST, run_id, ["register"])

    def ended() -> dict | None:
        ti = api.task_instance(MNIST, run_id, "register")
        return ti if ti["try_number"] > before and ti["state"] in ("success", "failed") else None

    ti = wait_for(ended, 600, "the cleared register to run", deployment)
    log = api.log(MNIST, run_id, "register", ti["try_number"])
    assert ti["state"] == "failed", f"{ti}\n{log[-3000:]}"
    assert wait_run(api, deployment, MNIST, run_id) == "failed", api.task_states(MNIST, run_id)
    return log


@pytest.fixture
def failed_mnist_run(lane, deployment, api, user_api):
    """A MNIST run by the USER whose evaluation failed the gate; the USER then marks ``evaluate`` success (one
    per deployment, shared by the attacks here)."""
    return lane.shared("mnist-failing", lambda: fail_and_mark_success(deployment, api, user_api))


def fail_and_mark_success(deployment, api, user_api) -> str:
    api.unpause(MNIST)
    resp = user_api.trigger(MNIST, MNIST_FAILING)
    assert resp.status_code == 200, resp.text
    run_id = resp.json()["dag_run_id"]
    assert wait_run(user_api, deployment, MNIST, run_id) == "failed"
    states = user_api.task_states(MNIST, run_id)
    assert (states["evaluate"], states["register"]) == ("failed", "upstream_failed"), states
    resp = user_api.request("PATCH", f"dags/{MNIST}/dagRuns/{run_id}/taskInstances/evaluate",
                            json={"new_state": "success"})  # fmt: skip
    assert resp.status_code == 200, resp.text  # the USER role may mark a failed evaluation success
    assert user_api.task_states(MNIST, run_id)["evaluate"] == "success"
    return run_id


def patch_train_xcom(user_api, run_id: str, value: str) -> None:
    resp = user_api.request("PATCH", f"dags/{MNIST}/dagRuns/{run_id}/taskInstances/train/xcomEntries/return_value",
                            json={"value": value, "map_index": -1})  # fmt: skip
    assert resp.status_code == 200, resp.text  # the USER role may rewrite XComs


def test_an_edited_train_xcom_registers_nothing(deployment, api, user_api, registry, failed_mnist_run, tmp_path):
    run_id = failed_mnist_run
    real = user_api.xcom(MNIST, run_id, "train")
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "model.safetensors").write_bytes(b"planted")
    (planted / "metrics.json").write_text('{"accuracy": 0.99}')
    assert not planted.as_uri().startswith((deployment.home / "trainium").as_uri())  # outside the artifact root
    versions = registry.list_versions("mnist-mlp")
    latest = registry.get_alias("mnist-mlp", "latest")

    patch_train_xcom(user_api, run_id, planted.as_uri())
    log = clear_register(api, user_api, deployment, run_id)
    assert planted.as_uri() in log and real in log, log[-3000:]  # the error names both URIs
    assert registry.list_versions("mnist-mlp") == versions
    assert registry.get_alias("mnist-mlp", "latest") == latest
    patch_train_xcom(user_api, run_id, real)  # the next attack uses the real model


def test_a_marked_success_failed_evaluation_promotes_nothing(deployment, api, user_api, registry, failed_mnist_run):
    run_id = failed_mnist_run
    versions = registry.list_versions("mnist-mlp")
    latest = registry.get_alias("mnist-mlp", "latest")
    log = clear_register(api, user_api, deployment, run_id)
    assert "failed the model: accuracy" in log and "needs >= 0.9" in log, log[-3000:]
    assert registry.list_versions("mnist-mlp") == versions
    assert registry.get_alias("mnist-mlp", "latest") == latest


def backfill_runs(api, dag_id: str) -> dict[str, dict]:
    runs = api.get(f"dags/{dag_id}/dagRuns", run_type="backfill", limit=100)["dag_runs"]
    return {r["logical_date"][:10]: r for r in runs}


def test_a_users_backfill_does_not_move_latest(deployment, api, user_api, registry):
    """The fine-tune beats its base (the verdict passes) and is registered, yet ``latest`` stays where it was; the
    cleared interval then adds no version (the registry returns the existing one). One interval is enough here:
    tests/integration/llama/test_dags.py covers two intervals and their shared compilation."""
    pretrain = "trainium_llama_pretrain"
    api.unpause(pretrain)
    resp = api.trigger(pretrain, {**LLAMA_FAST, "max_steps": 8, "synthetic_records": 100})
    assert resp.status_code == 200, resp.text
    base_run = resp.json()["dag_run_id"]
    assert wait_run(api, deployment, pretrain, base_run) == "success", api.task_states(pretrain, base_run)

    api.unpause(FINETUNE)  # a backfill of a paused DAG leaves its runs queued
    before = registry.get_alias("llama-finetune", "latest")
    resp = user_api.request("POST", "backfills", json={"dag_id": FINETUNE, "from_date": "2026-01-01T00:00:00Z",
                                                       "to_date": "2026-01-01T00:00:00Z",
                                                       "dag_run_conf": LLAMA_FAST})  # fmt: skip
    assert resp.status_code == 200, resp.text  # the USER role may backfill, with their own conf

    def finished() -> dict[str, dict] | None:
        runs = backfill_runs(api, FINETUNE)
        return runs if len(runs) == 1 and all(r["state"] in ("success", "failed") for r in runs.values()) else None

    runs = wait_for(finished, 1200, "the backfill run", deployment)
    assert {day: r["state"] for day, r in runs.items()} == {"2026-01-01": "success"}
    assert registry.list_versions("llama-finetune") == [1]
    for run in runs.values():
        states = api.task_states(FINETUNE, run["dag_run_id"])
        assert (states["improved"], states["promote_latest"]) == ("success", "skipped"), states  # passed, not moved
        log = api.log(FINETUNE, run["dag_run_id"], "promote_latest", 1)
        assert "backfill run: registered, not promoted" in log, log[-2000:]
    assert registry.get_alias("llama-finetune", "latest") == before

    cleared = runs["2026-01-01"]["dag_run_id"]
    clear(api, FINETUNE, cleared)
    assert wait_run(api, deployment, FINETUNE, cleared) == "success", api.task_states(FINETUNE, cleared)
    assert api.xcom(FINETUNE, cleared, "register")["created"] is False
    assert registry.list_versions("llama-finetune") == [1]
    assert registry.get_alias("llama-finetune", "latest") == before
