"""Export a finished training run to the configured trackers; every failure is a warning, never the task's.

The model is trained and stored by the time this runs: a tracking server that is down or an extra that is not
installed must not fail (and so retrain) the task.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig
from airflow_provider_trainium.neuron.spec import JobSpec
from airflow_provider_trainium.trackers.gather import RunExport, TaskInstanceId, collect
from airflow_provider_trainium.trackers.settings import TrackerSettings

#: The extra to install for each exporter's package.
EXTRAS = {"mlflow": "airflow-provider-trainium[mlflow]", "tensorboardX": "airflow-provider-trainium[tensorboard]"}


def _cause(err: BaseException) -> str:
    if isinstance(err, ImportError) and (err.name or "").split(".")[0] in EXTRAS:
        package = (err.name or "").split(".")[0]
        return f"{package} is not installed (pip install '{EXTRAS[package]}')"
    return f"{type(err).__name__}: {err}"


def task_instance_id(context: Any) -> TaskInstanceId:
    ti = context["ti"]
    map_index = ti.map_index if ti.map_index is not None else -1
    return TaskInstanceId(ti.dag_id, ti.run_id, ti.task_id, int(map_index), int(getattr(ti, "try_number", 1) or 1))


def cost_record(context: Any) -> dict[str, Any] | None:
    """The ``trainium_cost`` record this try pushed (None when the cost could not be read)."""
    ti = context["ti"]
    map_index = ti.map_index if ti.map_index is not None else -1
    record = ti.xcom_pull(task_ids=ti.task_id, key="trainium_cost", map_indexes=map_index)
    return record if isinstance(record, dict) else None


def export_run(
    export: RunExport, settings: TrackerSettings, aws_conn_id: str | None, log: logging.Logger
) -> dict[str, str | None]:
    """Each configured exporter's result (run id, event file URI, or None when skipped or failed)."""
    results: dict[str, str | None] = {}
    if settings.mlflow_tracking_uri:
        from airflow_provider_trainium.trackers.mlflow_export import export_mlflow

        try:
            experiment = settings.mlflow_experiment or export.ti.dag_id
            results["mlflow"] = export_mlflow(export, settings.mlflow_tracking_uri, experiment, log.info)
        except Exception as err:  # noqa: BLE001 - the trained model stands; the chart is information
            log.warning("MLflow export to %s failed: %s", settings.mlflow_tracking_uri, _cause(err))
            results["mlflow"] = None
    if settings.tensorboard_logdir:
        from airflow_provider_trainium.trackers.tensorboard_export import export_tensorboard

        try:
            uri = export_tensorboard(export, settings.tensorboard_logdir, aws_conn_id)
            log.info("wrote TensorBoard events to %s", uri)
            results["tensorboard"] = uri
        except Exception as err:  # noqa: BLE001 - as above
            log.warning("TensorBoard export to %s failed: %s", settings.tensorboard_logdir, _cause(err))
            results["tensorboard"] = None
    return results


def export_training_run(
    context: Any,
    spec: JobSpec,
    compute: str,
    config: TrainiumConfig,
    settings: TrackerSettings,
    summary: dict[str, Any] | None,
    log: logging.Logger,
) -> dict[str, str | None]:
    """Gather the run and export it; nothing (and no stream read) when no tracker is configured."""
    if not settings.enabled:
        return {}
    try:
        export = collect(
            task_instance_id(context),
            spec,
            compute,
            artifact_root=config.artifact_root,
            aws_conn_id=config.aws_conn_id,
            cost=cost_record(context),
            summary=summary,
        )
    except Exception as err:  # noqa: BLE001 - as in export_run
        log.warning("the run could not be gathered for its trackers: %s", _cause(err))
        return {}
    for note in export.notes:
        log.warning("metrics stream: %s", note)
    return export_run(export, settings, config.aws_conn_id, log)
