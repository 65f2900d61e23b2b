"""The Trainium view: an Airflow 3 UI plugin, served by the Airflow API server itself.

Two plugin interfaces, and why these:

- ``fastapi_apps``: the page, its bundled assets (uPlot, MIT) and the JSON it reads, mounted by the API server
  under ``/trainium``. No second server, no CDN: it works offline.
- ``external_views`` rather than ``react_apps``: the UI shows an external view with a ``url_route`` in an iframe
  inside its own frame (navigation, DAG run tab, task instance tab), with ``{DAG_ID}``/``{RUN_ID}``/``{TASK_ID}``
  filled in. The page comes from our own app on the same origin, so the UI's ``_token`` cookie authenticates it.
  A React app would have to be built against the UI's React version and shipped as a bundle that breaks when the
  UI upgrades; a plain page with a charting library has no build step and no such coupling.

Registered through the ``airflow.plugins`` entry point, so installing the provider is enough.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

URL_PREFIX = "/trainium"
PAGE = f"{URL_PREFIX}/"
ICON = f"{URL_PREFIX}/static/trainium-icon.svg"


class TrainiumViewApp:
    """The view's ASGI app, built on its first request: only the API server serves it, while every Airflow
    process that loads plugins (task runners for macros, the scheduler) imports this module."""

    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            from airflow_provider_trainium.plugins.app import create_app

            self._app = create_app()
        await self._app(scope, receive, send)


def external_views() -> list[dict[str, Any]]:
    """Where the view appears: Airflow's navigation, the DAG run page and the task instance page."""
    common = {"category": None, "icon": ICON}
    return [
        {**common, "name": "Trainium", "href": PAGE, "url_route": "trainium", "destination": "nav"},
        {
            **common,
            "name": "Trainium",
            "href": f"{PAGE}?dag_id={{DAG_ID}}&run_id={{RUN_ID}}",
            "url_route": "trainium-run",
            "destination": "dag_run",
        },
        {
            **common,
            "name": "Trainium",
            "href": f"{PAGE}?dag_id={{DAG_ID}}&run_id={{RUN_ID}}&task_id={{TASK_ID}}&map_index={{MAP_INDEX}}",
            "url_route": "trainium-task",
            "destination": "task_instance",
        },
    ]


class TrainiumViewPlugin(AirflowPlugin):
    """Trainium jobs across DAGs: layout, cost, final metrics, registered version and the live metrics stream."""

    name = "trainium"
    fastapi_apps = [{"name": "trainium-view", "app": TrainiumViewApp(), "url_prefix": URL_PREFIX}]
    external_views = external_views()
