"""The plugin's registration: entry point, where the view appears, and the assets it ships."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

from airflow_provider_trainium.plugins import trainium_view
from airflow_provider_trainium.plugins.app import ASSETS, STATIC

REPO = Path(__file__).resolve().parents[3]


def test_registered_through_the_airflow_plugins_entry_point():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    target = project["project"]["entry-points"]["airflow.plugins"]["trainium"]
    module, _, cls = target.partition(":")
    loaded = importlib.import_module(module)
    assert getattr(loaded, cls) is trainium_view.TrainiumViewPlugin
    package_data = project["tool"]["setuptools"]["package-data"]["airflow_provider_trainium.plugins"]
    for rel, _ in ASSETS.values():  # every served asset is packaged
        assert any(Path(rel).match(pattern.removeprefix("static/")) for pattern in package_data), rel


def test_view_is_mounted_outside_airflows_reserved_prefixes_and_reachable_from_nav_runs_and_tasks():
    from airflow.api_fastapi.app import RESERVED_URL_PREFIXES

    plugin = trainium_view.TrainiumViewPlugin
    (app,) = plugin.fastapi_apps
    assert not any(app["url_prefix"].startswith(p) for p in RESERVED_URL_PREFIXES)
    views = {v["destination"]: v for v in plugin.external_views}
    assert set(views) == {"nav", "dag_run", "task_instance"}
    assert all(v["href"].startswith(app["url_prefix"] + "/") for v in views.values())  # served by our own app
    assert len({v["url_route"] for v in views.values()}) == 3  # Airflow drops a view whose route is taken
    assert "{DAG_ID}" in views["dag_run"]["href"] and "{RUN_ID}" in views["dag_run"]["href"]
    assert "{TASK_ID}" in views["task_instance"]["href"]


def test_assets_exist_and_the_charting_library_ships_with_its_licence():
    for rel, _ in ASSETS.values():
        assert (STATIC / rel).is_file(), rel
    assert "MIT" in (STATIC / "vendor" / "uplot" / "LICENSE").read_text()
    page = (STATIC / "index.html").read_text()
    assert "http://" not in page and "https://" not in page  # nothing loads from the network: works offline


def test_every_route_requires_airflows_login():
    """Airflow does not protect plugin apps: a route added without ``GetUserDep`` would be open to anyone."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.routing import APIRoute

    from airflow_provider_trainium.plugins.app import create_app

    def calls(dependant) -> set:
        return {dependant.call} | {c for d in dependant.dependencies for c in calls(d)}

    routes = [r for r in create_app().routes if isinstance(r, APIRoute)]
    assert {r.path for r in routes} >= {"/", "/static/{name}", "/api/runs", "/api/runs/{dag_id}/{run_id}"}
    for route in routes:
        assert get_user in calls(route.dependant), route.path
