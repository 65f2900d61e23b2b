"""Who sees what in the view: every route needs the login, runs of DAGs the user may not read are never listed,
compared or opened, and XCom values are shown only to users who may read that DAG's XComs.

Real auth manager (the simple auth manager; a team-restricted user reads only their teams' DAGs), real JWTs, the
app the API server mounts, rows in Airflow's metadata database."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.routing import APIRoute

from airflow_provider_trainium.plugins.app import create_app
from tests.unit.plugins.conftest import Rows, login

FORGED = [{"Authorization": "Bearer not-a-token"}, {"Cookie": "_token=not-a-token"}]


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x", path)


def test_every_route_of_the_app_refuses_anonymous_and_forged_requests(client):
    """Enumerates the app's routes, so a route added later (or FastAPI's docs, schema and their CDN page, were
    they turned back on) is checked too."""
    routes = create_app().routes
    assert routes, "the app has no routes"
    for route in routes:
        assert isinstance(route, APIRoute), f"{route.path} is not an API route behind the login dependency"
        for method in route.methods:
            url = concrete(route.path)
            assert client.request(method, url).status_code in (401, 403), (method, url)
            for headers in FORGED:
                assert client.request(method, url, headers=headers).status_code in (401, 403), (method, url)


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"])
def test_no_schema_or_docs_pages(client, auth_manager, path):
    admin = login(auth_manager, "admin", "admin")
    assert client.get(path).status_code in (401, 403, 404)
    assert client.get(path, headers=admin).status_code == 404  # not there even for an admin: nothing to pull


def training(rows: Rows, dag_id: str, run_id: str, model: str, version: int, **kwargs: Any) -> None:
    """A finished training task and the register task that registered ``model`` ``version`` from it."""
    rows.task(dag_id, run_id, xcoms={"return_value": f"file:///nowhere/{run_id}", "metrics": {"accuracy": 0.9},
                                     "trainium_cost": {"usd": 1.5}, **kwargs})  # fmt: skip
    rows.task(dag_id, run_id, task_id="register", operator="TrainiumRegisterModelOperator",
              xcoms={"return_value": {"name": model, "version": version, "uri": "file:///m"}})  # fmt: skip


@pytest.fixture
def two_teams(rows: Rows) -> dict[str, Any]:
    """A red DAG and a blue DAG that register the same model: red v1, blue v2, red v3."""
    red, blue = rows.dag("red_dag", "red"), rows.dag("blue_dag", "blue")
    training(rows, red, "r1", "shared-model", 1)
    training(rows, blue, "b2", "shared-model", 2)
    training(rows, red, "r3", "shared-model", 3)
    return {"red": red, "blue": blue, "red_user": ["red-" + rows.tag]}


def listed(client, headers) -> set[tuple[str, str]]:
    resp = client.get("/api/runs", headers=headers)
    assert resp.status_code == 200, resp.text
    return {(r["dag_id"], r["run_id"]) for r in resp.json()["runs"] if r["task_id"] == "train"}


def test_the_run_list_shows_only_dags_the_user_may_read(client, auth_manager, two_teams):
    red, blue = two_teams["red"], two_teams["blue"]
    everyone = {(red, "r1"), (blue, "b2"), (red, "r3")}
    assert listed(client, login(auth_manager, "admin", "admin")) >= everyone  # the filter is not empty-handed
    red_user = login(auth_manager, "rita", "viewer", two_teams["red_user"])
    assert listed(client, red_user) & everyone == {(red, "r1"), (red, "r3")}


def test_a_run_of_a_dag_the_user_may_not_read_is_not_found(client, auth_manager, two_teams):
    red_user = login(auth_manager, "rita", "viewer", two_teams["red_user"])
    assert client.get(f"/api/runs/{two_teams['red']}/r3", headers=red_user).status_code == 200
    resp = client.get(f"/api/runs/{two_teams['blue']}/b2", headers=red_user)
    assert resp.status_code == 404 and "shared-model" not in resp.text


def test_versions_registered_by_a_dag_the_user_may_not_read_are_not_compared(client, auth_manager, two_teams):
    red = two_teams["red"]
    admin = client.get(f"/api/runs/{red}/r3", headers=login(auth_manager, "admin", "admin")).json()
    assert [p["run"]["run_id"] for p in admin["previous"]] == ["b2", "r1"]  # both teams' earlier versions
    red_user = login(auth_manager, "rita", "viewer", two_teams["red_user"])
    detail = client.get(f"/api/runs/{red}/r3", headers=red_user).json()
    assert [p["run"]["run_id"] for p in detail["previous"]] == ["r1"]


@pytest.fixture
def no_xcom_readers(monkeypatch, auth_manager) -> Any:
    """The simple auth manager, except that viewers may not read XComs (as a FAB role without "XComs" read)."""
    from airflow.api_fastapi.app import _AuthManagerState
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

    class ViewersReadNoXComs(SimpleAuthManager):
        def is_authorized_dag(self, *, method, user, access_entity=None, details=None) -> bool:
            if access_entity == DagAccessEntity.XCOM and user.role.upper() == "VIEWER":
                return False
            return super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)

    manager = ViewersReadNoXComs()
    monkeypatch.setattr(_AuthManagerState, "instance", manager)
    return manager


XCOM_FIELDS = ("output_uri", "metrics", "cost", "job", "model")


def test_xcom_values_are_shown_only_to_users_who_may_read_xcoms(client, no_xcom_readers, rows):
    dag_id = rows.dag("xcom_dag", "red")
    training(rows, dag_id, "r1", "secret-model", 1, job={"job_id": "j-1"})
    training(rows, dag_id, "r2", "secret-model", 2, job={"job_id": "j-2"})
    team = [rows.team("red")]
    user = login(no_xcom_readers, "una", "user", team)  # USER role: may read XComs
    viewer = login(no_xcom_readers, "vic", "viewer", team)  # may read the DAG, not its XComs

    shown = {r["run_id"]: r for r in client.get("/api/runs", headers=user).json()["runs"] if r["dag_id"] == dag_id}
    assert shown["r2"]["model"]["name"] == "secret-model" and shown["r2"]["cost"] == {"usd": 1.5}
    assert shown["r2"]["job"] == {"job_id": "j-2"} and not shown["r2"]["xcom_hidden"]
    hidden = {r["run_id"]: r for r in client.get("/api/runs", headers=viewer).json()["runs"] if r["dag_id"] == dag_id}
    assert set(hidden) == {"r1", "r2"}  # the runs are listed: the DAG is readable
    for row in hidden.values():
        assert row["xcom_hidden"] and all(row[name] is None for name in XCOM_FIELDS), row
        assert row["final"] == {"loss": None, "accuracy": None}

    assert [p["run"]["run_id"] for p in client.get(f"/api/runs/{dag_id}/r2", headers=user).json()["previous"]] == ["r1"]
    detail = client.get(f"/api/runs/{dag_id}/r2", headers=viewer)
    assert detail.status_code == 200
    assert "secret-model" not in detail.text and "j-2" not in detail.text and "nowhere" not in detail.text
    assert detail.json()["previous"] == []
