"""A run's export as one MLflow run, found again by its task instance so a retry or a rerun adds nothing.

``mlflow`` is imported inside :func:`export_mlflow` only: DAG files import the operators and must parse fast,
and the package is an extra (``airflow-provider-trainium[mlflow]``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from airflow_provider_trainium.trackers.gather import RunExport

#: MLflow's own per-request limits for log_batch (metrics, params, tags).
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
TASK_INSTANCE_TAG = "trainium.task_instance"
#: Retries and timeout of each HTTP request, unless the worker sets its own: MLflow's defaults retry for
#: minutes, which would hold a finished task on a tracking server that is down.
_HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}

Log = Callable[..., None]


@contextlib.contextmanager
def _short_http_retries() -> Iterator[None]:
    added = [name for name in _HTTP_DEFAULTS if name not in os.environ]
    os.environ.update({name: _HTTP_DEFAULTS[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _experiment_id(client: Any, name: str) -> str:
    """The experiment named ``name``, created if missing (another worker may create it at the same time)."""
    from mlflow.exceptions import MlflowException

    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        try:
            return str(client.create_experiment(name))
        except MlflowException:
            experiment = client.get_experiment_by_name(name)
            if experiment is None:
                raise
    if experiment.lifecycle_stage != "active":
        raise ValueError(f"the MLflow experiment {name!r} is deleted: restore it or name another")
    return str(experiment.experiment_id)


def export_mlflow(export: RunExport, tracking_uri: str, experiment: str, log: Log) -> str | None:
    """The MLflow run id written, or None when a finished run of this task instance exists already.

    An unfinished run of this task instance (an export that crashed) is deleted and written again.
    """
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param, RunStatus, RunTag, ViewType

    with _short_http_retries():
        client = MlflowClient(tracking_uri=tracking_uri)
        experiment_id = _experiment_id(client, experiment)
        existing = client.search_runs(
            [experiment_id],
            filter_string=f"tags.`{TASK_INSTANCE_TAG}` = '{export.ti.key}'",
            run_view_type=ViewType.ACTIVE_ONLY,
        )
        finished = [r for r in existing if r.info.status == RunStatus.to_string(RunStatus.FINISHED)]
        if finished:
            log("MLflow run %s of this task instance is there already: not exported again", finished[0].info.run_id)
            return None
        for stale in existing:
            log("MLflow run %s of this task instance is unfinished: deleted and exported again", stale.info.run_id)
            client.delete_run(stale.info.run_id)

        run = client.create_run(experiment_id, run_name=export.ti.name, tags=export.ti.tags())
        run_id: str = run.info.run_id
        try:
            params = [Param(k, v) for k, v in export.params.items()]
            for batch in _chunks(params, MAX_PARAMS_PER_BATCH):
                client.log_batch(run_id, params=batch)
            metrics = [
                Metric(name, p.value, p.timestamp_ms, p.step) for name, points in export.curves.items() for p in points
            ]
            last = export.last_step
            stamp = max((m.timestamp for m in metrics), default=int(time.time() * 1000))
            metrics += [Metric(name, value, stamp, last) for name, value in export.scalars.items()]
            for batch in _chunks(metrics, MAX_METRICS_PER_BATCH):
                client.log_batch(run_id, metrics=batch)
            client.log_batch(run_id, tags=[RunTag("trainium.export", "complete")])
        except BaseException:
            with contextlib.suppress(Exception):  # the next export finds it unfinished and redoes it
                client.set_terminated(run_id, RunStatus.to_string(RunStatus.FAILED))
            raise
        client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))
    log("exported %d metric points to MLflow run %s (experiment %r at %s)", len(metrics), run_id, experiment,
        tracking_uri)  # fmt: skip
    return run_id
