"""Every Trainium job is in the view, not only training tasks: a ``TrainiumJobOperator(script=...)`` task, a
``@task.trainium`` task, a DAG's own subclass and a task recorded under a former name are listed and plotted
from their stream; one without a stream, and a DAG run without a job, get help on how to get curves instead of
a 404. Real metadata database, auth manager and stream files, as in test_app_run_page.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.plugins import runs
from airflow_provider_trainium.plugins.locate import run_output_prefix
from tests.conftest import set_trainium_connection
from tests.unit.plugins.conftest import Rows, login

DECORATED = {"operator": "_TrainiumDecoratedOperator", "custom_operator_name": "@task.trainium"}


def write_stream(root: str, dag_id: str, run_id: str, task_id: str, steps: list[int], total: int = 10) -> None:
    """What ``trainium_trainer.track`` writes for ``task_id``: train records under ``<output>/stream/train``."""
    output = Path(run_output_prefix(root, dag_id, run_id, task_id).removeprefix("file://"))
    folder = output / "stream" / "train"
    folder.mkdir(parents=True)
    records = [{"v": 1, "kind": "train", "time": 1000.0 + s, "step": s, "total_steps": total, "loss": 1.0 / s}
               for s in steps]  # fmt: skip
    (folder / "000000.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture
def root(monkeypatch, tmp_path) -> str:
    uri = (tmp_path / "root").as_uri()
    set_trainium_connection(monkeypatch, artifact_root=uri)
    return uri


@pytest.fixture
def admin(auth_manager) -> dict[str, str]:
    return login(auth_manager, "admin", "admin")


def job_classes() -> list[type]:
    """The provider's job operator classes: ``TrainiumJobOperator`` and every subclass it defines."""
    import airflow_provider_trainium.decorators.trainium  # noqa: F401 (defines the decorator's operator)
    import airflow_provider_trainium.operators.compile  # noqa: F401
    import airflow_provider_trainium.operators.training  # noqa: F401
    from airflow_provider_trainium.operators.job import TrainiumJobOperator

    found, todo = [], [TrainiumJobOperator]
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("airflow_provider_trainium."):
            found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_job_operator_the_provider_defines_is_a_job_of_the_view():
    """A job operator added (or renamed) later must be named in the rule, or left out there on purpose."""
    classes = job_classes()
    assert {c.__name__ for c in classes} >= {"TrainiumJobOperator", "TrainiumTrainingOperator",
                                             "_TrainiumDecoratedOperator"}  # fmt: skip
    for cls in classes:
        assert cls.__name__ in runs.JOB_OPERATORS or cls.__name__ in runs.NOT_JOBS, cls
    assert {"NeuronJobOperator", "NeuronTrainingOperator"} <= set(runs.JOB_OPERATORS)  # the former names
    decorated = next(c for c in classes if c.__name__ == "_TrainiumDecoratedOperator")
    assert decorated.custom_operator_name in runs.JOB_OPERATOR_NAMES


def listed(client, headers, dag_id: str) -> dict[str, dict[str, Any]]:
    resp = client.get("/api/runs", headers=headers)
    assert resp.status_code == 200, resp.text
    return {r["task_id"]: r for r in resp.json()["runs"] if r["dag_id"] == dag_id}


def test_jobs_of_every_job_operator_are_listed_and_other_tasks_are_not(client, admin, rows: Rows):
    dag_id = rows.dag("jobs", "red")
    rows.task(dag_id, "r1", task_id="script_job", operator="TrainiumJobOperator")
    rows.task(dag_id, "r1", task_id="decorated", **DECORATED)
    rows.task(dag_id, "r1", task_id="former", operator="NeuronJobOperator")
    rows.task(dag_id, "r1", task_id="own_subclass", operator="NightlyJobOperator", xcoms={"job": {"job_id": "j"}})
    rows.task(dag_id, "r1", task_id="train")
    rows.task(dag_id, "r1", task_id="compile", operator="TrainiumCompileOperator", xcoms={"metrics": {}})
    rows.task(dag_id, "r1", task_id="python", operator="PythonOperator")
    rows.task(dag_id, "r1", task_id="register", operator="TrainiumRegisterModelOperator")

    shown = listed(client, admin, dag_id)
    assert set(shown) == {"script_job", "decorated", "former", "own_subclass", "train"}
    assert shown["decorated"]["operator_name"] == "@task.trainium"
    assert [t for t, r in sorted(shown.items()) if r["training"]] == ["train"]


@pytest.mark.parametrize("job", [{"operator": "TrainiumJobOperator"}, DECORATED, {"operator": "NeuronJobOperator"}])
def test_a_jobs_stream_is_plotted_on_its_task_page(client, admin, rows: Rows, root: str, job: dict[str, str]):
    dag_id = rows.dag("script_stream", "red")
    rows.task(dag_id, "r1", task_id="finetune", state="running", **job)
    write_stream(root, dag_id, "r1", "finetune", [1, 2, 3])

    resp = client.get(f"/api/runs/{dag_id}/r1", params={"task_id": "finetune"}, headers=admin)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["run"]["task_id"] == "finetune" and body["help"] is None
    assert body["series"]["loss"] == {"x": [1, 2, 3], "y": [1.0, 0.5, 1 / 3]}
    assert body["stream"]["progress"] == "step 3/10 (30%)"


def test_a_dag_runs_page_opens_its_training_task_before_jobs_that_sort_first(client, admin, rows: Rows, root: str):
    """As in the MNIST DAG: ``evaluate`` and ``prepare_data`` are jobs too, but the run's page is the training's."""
    dag_id = rows.dag("pipeline", "red")
    for task_id in ("evaluate", "prepare_data"):
        rows.task(dag_id, "r1", task_id=task_id, operator="TrainiumJobOperator")
    rows.task(dag_id, "r1", task_id="train")
    resp = client.get(f"/api/runs/{dag_id}/r1", headers=admin)
    assert resp.status_code == 200 and resp.json()["run"]["task_id"] == "train"
    named = client.get(f"/api/runs/{dag_id}/r1", params={"task_id": "evaluate"}, headers=admin)
    assert named.json()["run"]["task_id"] == "evaluate"


def test_only_training_tasks_carry_the_registered_version_and_are_compared(client, admin, rows: Rows, root: str):
    dag_id = rows.dag("versions", "red")
    for run_id, version in (("r1", 1), ("r2", 2)):
        rows.task(dag_id, run_id, xcoms={"metrics": {"accuracy": 0.9}})
        rows.task(dag_id, run_id, task_id="evaluate", operator="TrainiumJobOperator")  # started after train
        rows.task(dag_id, run_id, task_id="register", operator="TrainiumRegisterModelOperator",
                  xcoms={"return_value": {"name": "m", "version": version, "uri": "file:///m"}})  # fmt: skip
    shown = {(r["run_id"], r["task_id"]): r for r in client.get("/api/runs", headers=admin).json()["runs"]}
    assert shown[("r2", "train")]["model"]["version"] == 2 and shown[("r2", "evaluate")]["model"] is None
    detail = client.get(f"/api/runs/{dag_id}/r2", headers=admin).json()
    assert [(p["run"]["run_id"], p["run"]["task_id"]) for p in detail["previous"]] == [("r1", "train")]


def test_a_job_without_a_stream_gets_help_on_getting_curves(client, admin, rows: Rows, root: str):
    dag_id = rows.dag("no_stream", "red")
    rows.task(dag_id, "r1", task_id="decorated", **DECORATED)
    resp = client.get(f"/api/runs/{dag_id}/r1", params={"task_id": "decorated"}, headers=admin)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["run"]["task_id"] == "decorated" and body["series"] is None
    assert "trainium_trainer.track" in body["help"]["text"] and "track.log(" in body["help"]["example"]
    assert body["help"]["docs"].startswith("docs/monitoring.md")


def test_a_dag_run_without_a_job_gets_help_and_a_missing_one_is_not_found(client, admin, rows: Rows, root: str):
    dag_id = rows.dag("no_job", "red")
    rows.task(dag_id, "r1", task_id="register", operator="TrainiumRegisterModelOperator")
    resp = client.get(f"/api/runs/{dag_id}/r1", params={"task_id": "register"}, headers=admin)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["run"] is None and body["run_id"] == "r1" and "trainium_trainer.track" in body["help"]["text"]
    assert client.get(f"/api/runs/{dag_id}/no-such-run", headers=admin).status_code == 404


def test_a_finished_job_is_labelled_by_its_last_logged_step(client, admin, rows: Rows, root: str):
    """A job that stopped at step 100 of 110 ended there: "step 100/110 (91%)" would read as cut short."""
    dag_id = rows.dag("finished", "red")
    rows.task(dag_id, "r1", task_id="job", operator="TrainiumJobOperator", state="success")
    write_stream(root, dag_id, "r1", "job", [50, 100], total=110)
    body = client.get(f"/api/runs/{dag_id}/r1", headers=admin).json()
    assert body["stream"]["progress"] == "last logged step 100"


def test_help_never_answers_for_a_dag_the_user_may_not_read(client, auth_manager, rows: Rows, root: str):
    """The help page tells that a run exists: for another team's DAG the answer stays "not found"."""
    blue = rows.dag("blue_no_job", "blue")
    rows.task(blue, "b1", task_id="register", operator="TrainiumRegisterModelOperator")
    red_user = login(auth_manager, "rita", "viewer", [rows.team("red")])
    resp = client.get(f"/api/runs/{blue}/b1", headers=red_user)
    assert resp.status_code == 404 and "help" not in resp.json()
    missing = client.get(f"/api/runs/{blue}/no-such-run", headers=red_user)
    assert missing.status_code == 404 and missing.json()["detail"].split()[:3] == resp.json()["detail"].split()[:3]


def test_the_help_links_the_projects_documentation():
    import tomllib

    from airflow_provider_trainium.plugins.app import HELP

    project = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
    assert HELP["docs_url"] == project["project"]["urls"]["Documentation"]
