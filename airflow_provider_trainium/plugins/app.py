"""The view's FastAPI app, mounted by the Airflow API server under ``/trainium``: one page, its assets and JSON.

A readable DAG run's page always answers: its job's curves, or, for a job that wrote no stream and for a DAG run
with no Trainium job, ``help`` on how to get curves. Only a DAG the user may not read, or a run that does not
exist, is not found (the same answer for both).

Airflow does not protect plugin apps: every route here depends on Airflow's own ``get_user`` (the API server's
JWT, from an ``Authorization: Bearer`` header or the ``_token`` cookie the UI sets), and FastAPI's own routes
(``/docs``, ``/redoc``, ``/openapi.json``, which would need no login and load Swagger from a CDN) are off. It
lists only DAGs the auth manager lets that user read, shows XCom values (output URI, metrics, cost, job,
registered version) only of DAGs whose XComs the user may read, and reads each run's stream where the run
writes it (``locate``), never from a URI an XCom names.
"""

# No ``from __future__ import annotations``: FastAPI reads the route signatures' dependency annotations, which
# are local to create_app() and must be evaluated when the routes are defined.
import logging
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import FileResponse, HTMLResponse, Response

from airflow_provider_trainium.plugins import runs as runs_db
from airflow_provider_trainium.plugins.locate import output_location
from airflow_provider_trainium.plugins.stream import build_series, profile_traces, progress_label, read_stream
from trainium_trainer import boundary

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
#: A profile trace larger than this is refused rather than held in the API server's memory.
MAX_TRACE_BYTES = 512 * 1024 * 1024
#: Where a task without curves is sent: the provider's documentation (``Documentation`` in pyproject.toml).
DOCS_URL = "https://pypi.org/project/airflow-provider-trainium/"
#: What the page shows in place of the charts of a task that wrote no stream.
HELP = {
    "text": (
        "No curves yet: this task's job wrote no metrics stream under its output. A training script gets loss, "
        "throughput and evaluation curves, and a progress line in the task log, by reporting its steps with "
        "trainium_trainer.track; a Hugging Face Trainer script adds trainium_trainer.hf_callback.TrainiumCallback."
    ),
    "example": (
        "from trainium_trainer import track\n\n"
        "track.log(step=step, loss=loss.item(), total_steps=max_steps, samples=samples, tokens=tokens)\n"
        "track.log_eval(step=max_steps, loss=val_loss)"
    ),
    "docs": 'docs/monitoring.md, "Curves from your own script"',
    "docs_url": DOCS_URL,
}


def readable_dag_ids(user: Any) -> set[str]:
    """What the auth manager lets this user read (the same filter Airflow's own DAG list uses)."""
    from airflow.api_fastapi.app import get_auth_manager

    return set(get_auth_manager().get_authorized_dag_ids(user=user, method="GET"))


def xcom_readable_dag_ids(user: Any, dag_ids: set[str], session: Any) -> set[str]:
    """The DAGs among ``dag_ids`` whose XComs the user may read (what Airflow's XCom endpoints require)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
    from airflow.models.dag import DagModel

    if not dag_ids:
        return set()
    teams = DagModel.get_dag_id_to_team_name_mapping(list(dag_ids), session=session)
    manager = get_auth_manager()
    return {
        dag_id
        for dag_id in dag_ids
        if manager.is_authorized_dag(
            method="GET",
            access_entity=DagAccessEntity.XCOM,
            details=DagDetails(id=dag_id, team_name=teams.get(dag_id)),
            user=user,
        )
    }


def artifact_settings() -> tuple[str | None, str | None]:
    """The artifact root and the AWS connection for ``s3://``, from the trainium connection, once per request.

    ``(None, None)`` when the connection cannot be read: a broken connection must not take the page down, and
    without a root nothing is readable (``artifacts`` never falls back to default credentials).
    """
    from airflow_provider_trainium.hooks.trainium import DEFAULT_CONN_ID, TrainiumHook

    try:
        config = TrainiumHook(DEFAULT_CONN_ID).get_config()
    except Exception:
        log.warning("cannot read the trainium connection; no artifact is readable", exc_info=True)
        return None, None
    return config.artifact_root, config.aws_conn_id


def run_stream(
    run: dict[str, Any], root: str | None, aws_conn_id: str | None, with_profiles: bool = False
) -> dict[str, Any]:
    """The run's plotted series (None when it wrote no stream, or it cannot be read), its progress line and what
    the page notes; ``with_profiles``: its profile traces too (only the shown run's are linked, so the previous
    versions' folders are not listed)."""
    location = output_location(run, root)
    out: dict[str, Any] = {
        "location": location.uri,
        "notes": list(location.notes),
        "capped": False,
        "series": None,
        "progress": None,
        "profiles": [],
    }
    if location.uri is None:
        return out
    try:
        if with_profiles:
            out["profiles"] = profile_traces(location.uri, root or "", aws_conn_id)
    except Exception as err:
        log.warning("cannot list the profile traces of %s", location.uri, exc_info=True)
        out["notes"].append(f"cannot list the profile traces: {type(err).__name__}")
    try:
        read = read_stream(location.uri, root or "", aws_conn_id)
    except Exception as err:
        log.warning("cannot read the metrics stream of %s", location.uri, exc_info=True)
        out["notes"].append(f"cannot read the stream: {type(err).__name__}")
        return out
    if read is not None:
        summary = read.summary()
        series = build_series(read.sources)
        out.update(
            series=series, capped=summary["capped"], progress=progress_label(series["progress"], run.get("state"))
        )
        out["notes"] += summary["notes"]
    return out


def no_job(dag_id: str, run_id: str) -> dict[str, Any]:
    """The answer for a readable DAG run with no Trainium job: the page says so and how to get curves, rather
    than an error (the run is there; it just has nothing to plot)."""
    return {
        "run": None,
        "dag_id": dag_id,
        "run_id": run_id,
        "series": None,
        "stream": None,
        "help": HELP,
        "previous": [],
    }


def create_app() -> FastAPI:
    """The app with every route behind Airflow's login (``GetUserDep``)."""
    from airflow.api_fastapi.common.db.common import SessionDep
    from airflow.api_fastapi.core_api.security import GetUserDep

    # No schema or docs routes: they would need no login (and the docs load Swagger from a CDN).
    app = FastAPI(title="Trainium view", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse)
    def page(user: GetUserDep) -> HTMLResponse:
        return HTMLResponse((STATIC / "index.html").read_text(), headers={"Cache-Control": "no-store"})

    @app.get("/static/{name}")
    def asset(name: str, user: GetUserDep) -> FileResponse:
        if name not in ASSETS:
            raise HTTPException(status_code=404, detail=f"no asset {name}")
        rel, media_type = ASSETS[name]
        return FileResponse(STATIC / rel, media_type=media_type)

    @app.get("/api/runs")
    def list_runs(
        user: GetUserDep,
        session: SessionDep,
        limit: Annotated[int, Query(ge=1, le=1000)] = runs_db.DEFAULT_LIMIT,
    ) -> dict[str, Any]:
        dag_ids = readable_dag_ids(user)
        rows = runs_db.list_job_runs(session, dag_ids, xcom_readable_dag_ids(user, dag_ids, session), limit=limit)
        return {"runs": rows, "total": len(rows)}

    def readable_run(
        user: Any, session: Any, dag_id: str, run_id: str, task_id: str | None, map_index: int
    ) -> tuple[dict[str, Any] | None, set[str], set[str]]:
        """The job run the user may read (None: no job in it), with the DAGs they may read and those whose XComs
        they may; a DAG they may not read is the same 404 as a missing one (nothing revealed)."""
        dag_ids = readable_dag_ids(user)
        if dag_id not in dag_ids:
            raise HTTPException(status_code=404, detail=f"no DAG run {dag_id}/{run_id}")
        xcom_dag_ids = xcom_readable_dag_ids(user, dag_ids, session)
        run = runs_db.get_job_run(session, dag_id, run_id, dag_id in xcom_dag_ids, task_id, map_index)
        return run, dag_ids, xcom_dag_ids

    @app.get("/api/runs/{dag_id}/{run_id}/profile/{name}")
    def profile_trace(
        dag_id: str,
        run_id: str,
        name: str,
        user: GetUserDep,
        session: SessionDep,
        task_id: str | None = None,
        map_index: int = -1,
    ) -> Response:
        """One of the run's profile traces, as a download (Perfetto or chrome://tracing open it)."""
        from airflow_provider_trainium import artifacts

        run, _, _ = readable_run(user, session, dag_id, run_id, task_id, map_index)
        root, conn_id = artifact_settings()
        missing = HTTPException(status_code=404, detail=f"no profile trace {name} in {dag_id}/{run_id}")
        if run is None or root is None:
            raise missing
        location = output_location(run, root)
        if location.uri is None or name not in profile_traces(location.uri, root, conn_id):
            raise missing
        uri = artifacts.confined(f"{location.uri.rstrip('/')}/{boundary.PROFILE_DIR}/{name}", root)
        data = artifacts.read_bytes(uri, missing_ok=True, aws_conn_id=conn_id, max_bytes=MAX_TRACE_BYTES)
        if data is None or len(data) > MAX_TRACE_BYTES:
            raise HTTPException(status_code=404, detail=f"profile trace {name} is gone or over the size limit")
        filename = f"{dag_id}.{run['task_id']}.{name}".replace('"', "")  # name matched trace-rank<R>.json
        return Response(data, media_type="application/json",
                        headers={"Content-Disposition": f'attachment; filename="{filename}"'})  # fmt: skip

    @app.get("/api/runs/{dag_id}/{run_id}")
    def run_detail(
        dag_id: str,
        run_id: str,
        user: GetUserDep,
        session: SessionDep,
        task_id: str | None = None,
        map_index: int = -1,
    ) -> dict[str, Any]:
        run, dag_ids, xcom_dag_ids = readable_run(user, session, dag_id, run_id, task_id, map_index)
        if run is None:
            if not runs_db.dag_run_exists(session, dag_id, run_id):
                raise HTTPException(status_code=404, detail=f"no DAG run {dag_id}/{run_id}")
            return no_job(dag_id, run_id)
        root, conn_id = artifact_settings()
        stream = run_stream(run, root, conn_id, with_profiles=True)
        series = stream.pop("series")
        candidates = runs_db.list_job_runs(session, dag_ids, xcom_dag_ids)
        previous = runs_db.previous_versions(run, candidates)[:MAX_COMPARED]
        return {
            "run": run,
            "series": series,
            "stream": stream,
            "help": None if series else HELP,
            "previous": [{"run": p, "series": run_stream(p, root, conn_id)["series"]} for p in previous],
        }

    return app
