"""The view's FastAPI app, mounted by the Airflow API server under ``/trainium``: one page, its assets and JSON.

Airflow does not protect plugin apps: every route here depends on Airflow's own ``get_user`` (the API server's
JWT, from an ``Authorization: Bearer`` header or the ``_token`` cookie the UI sets), and lists only DAGs the
auth manager lets that user read.
"""

# No ``from __future__ import annotations``: FastAPI reads the route signatures' dependency annotations, which
# are local to create_app() and must be evaluated when the routes are defined.
import logging
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import FileResponse, HTMLResponse

from airflow_provider_trainium import artifacts
from airflow_provider_trainium.plugins import runs as runs_db
from airflow_provider_trainium.plugins.stream import build_series, read_stream

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
# Served by name only: nothing outside this list can be asked for.
ASSETS = {
    "trainium-view.js": ("trainium-view.js", "text/javascript"),
    "trainium-view.css": ("trainium-view.css", "text/css"),
    "trainium-icon.svg": ("trainium-icon.svg", "image/svg+xml"),
    "uPlot.iife.min.js": ("vendor/uplot/uPlot.iife.min.js", "text/javascript"),
    "uPlot.min.css": ("vendor/uplot/uPlot.min.css", "text/css"),
    "uPlot-LICENSE": ("vendor/uplot/LICENSE", "text/plain"),
}
MAX_COMPARED = 5


def readable_dag_ids(user: Any) -> set[str]:
    """What the auth manager lets this user read (the same filter Airflow's own DAG list uses)."""
    from airflow.api_fastapi.app import get_auth_manager

    return set(get_auth_manager().get_authorized_dag_ids(user=user, method="GET"))


def artifacts_conn_id() -> str | None:
    """The AWS connection the trainium connection names for ``s3://`` artifacts, read once per request.

    None when the connection cannot be read: a broken connection must not take the page down; ``file://``
    still reads, and ``s3://`` reads fail (``artifacts`` never falls back to default credentials).
    """
    try:
        return artifacts.aws_conn_id_of()
    except Exception:
        log.warning("cannot read the trainium connection; s3:// artifacts are not readable", exc_info=True)
        return None


def run_series(run: dict[str, Any], aws_conn_id: str | None) -> dict[str, Any] | None:
    """The run's plotted series from its stream; None when it wrote none (or it cannot be read)."""
    if not run.get("output_uri"):
        return None
    try:
        sources = read_stream(run["output_uri"], aws_conn_id)
    except Exception:
        log.warning("cannot read the metrics stream of %s", run["output_uri"], exc_info=True)
        return None
    return None if sources is None else build_series(sources)


def create_app() -> FastAPI:
    """The app with every route behind Airflow's login (``GetUserDep``)."""
    from airflow.api_fastapi.common.db.common import SessionDep
    from airflow.api_fastapi.core_api.security import GetUserDep

    user_dep, session_dep = GetUserDep, SessionDep
    app = FastAPI(title="Trainium view", description="Training runs, their metrics stream and cost.")

    @app.get("/", response_class=HTMLResponse)
    def page(user: user_dep) -> HTMLResponse:
        return HTMLResponse((STATIC / "index.html").read_text(), headers={"Cache-Control": "no-store"})

    @app.get("/static/{name}")
    def asset(name: str, user: user_dep) -> FileResponse:
        if name not in ASSETS:
            raise HTTPException(status_code=404, detail=f"no asset {name}")
        rel, media_type = ASSETS[name]
        return FileResponse(STATIC / rel, media_type=media_type)

    @app.get("/api/runs")
    def list_runs(
        user: user_dep,
        session: session_dep,
        limit: Annotated[int, Query(ge=1, le=1000)] = runs_db.DEFAULT_LIMIT,
    ) -> dict[str, Any]:
        rows = runs_db.list_training_runs(session, readable_dag_ids(user), limit=limit)
        return {"runs": rows, "total": len(rows)}

    @app.get("/api/runs/{dag_id}/{run_id}")
    def run_detail(
        dag_id: str,
        run_id: str,
        user: user_dep,
        session: session_dep,
        task_id: str | None = None,
        map_index: int = -1,
    ) -> dict[str, Any]:
        dag_ids = readable_dag_ids(user)
        if dag_id not in dag_ids:  # the same answer as a missing DAG: do not reveal what exists
            raise HTTPException(status_code=404, detail=f"no training run {dag_id}/{run_id}")
        run = runs_db.get_training_run(session, dag_id, run_id, task_id, map_index)
        if run is None:
            raise HTTPException(status_code=404, detail=f"no training task in {dag_id}/{run_id}")
        conn_id = artifacts_conn_id()
        previous = runs_db.previous_versions(run, runs_db.list_training_runs(session, dag_ids))[:MAX_COMPARED]
        return {
            "run": run,
            "series": run_series(run, conn_id),
            "previous": [{"run": p, "series": run_series(p, conn_id)} for p in previous],
        }

    return app
