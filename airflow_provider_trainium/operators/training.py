"""``TrainiumTrainingOperator``: a distributed training job whose metrics come back to Airflow.

The artifact helpers and the job spec are imported where a task runs: DAG files load this module while parsed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from airflow.sdk import Context

from airflow_provider_trainium import deprecated_names
from airflow_provider_trainium.operators.job import TrainiumJobOperator

if TYPE_CHECKING:
    from airflow_provider_trainium.compute.base import ComputeBackend, JobHandle
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig
    from airflow_provider_trainium.neuron.spec import JobSpec


class TrainiumTrainingOperator(TrainiumJobOperator):
    """Train with torchrun on every node; returns the output URI and pushes ``metrics`` to XCom.

    The trainer writes ``metrics.json`` to the output URI; its summary (accuracy, samples/s, XLA graphs
    compiled) is logged and pushed so downstream tasks and the UI can see it.

    :param mlflow_tracking_uri: export the succeeded run (params, per-step metrics, cost, final metrics) to
        this MLflow tracking server; default: the ``trainium`` connection's, else none (``trackers``).
    :param mlflow_experiment: the MLflow experiment; default: the connection's, else the DAG id.
    :param tensorboard_logdir: write a TensorBoard event file under this ``file://`` or ``s3://`` folder;
        default: the connection's, else none. An export that fails is a warning, never the task's failure.
    """

    def __init__(
        self,
        *,
        metrics_file: str = "metrics.json",
        mlflow_tracking_uri: str | None = None,
        mlflow_experiment: str | None = None,
        tensorboard_logdir: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("distributed", True)
        super().__init__(**kwargs)
        self.metrics_file = metrics_file
        self.mlflow_tracking_uri = mlflow_tracking_uri
        self.mlflow_experiment = mlflow_experiment
        self.tensorboard_logdir = tensorboard_logdir

    def build_spec(self, context: Context, config: TrainiumConfig, backend: ComputeBackend) -> JobSpec:
        spec = super().build_spec(context, config, backend)
        if spec.checkpoint_uri is None:
            # Under checkpoints/ so the bucket's lifecycle rule expires them; a retry resumes from here.
            run_part = self.run_prefix(context, config).split("/runs/", 1)[1]
            spec = spec.with_changes(checkpoint_uri=f"{config.artifact_root.rstrip('/')}/checkpoints/{run_part}")
        return spec

    def read_metrics(self, output_uri: str) -> dict[str, Any] | None:
        """The job's metrics file, read with the trainium connection's AWS connection; None if absent."""
        from airflow_provider_trainium import artifacts

        uri = f"{output_uri.rstrip('/')}/{self.metrics_file}"
        return artifacts.read_json(uri, missing_ok=True, trainium_conn_id=self.trainium_conn_id)

    def load_metrics(self, context: Context, output_uri: str) -> dict[str, Any]:
        """The summary of the job's metrics file (without the loss history), logged and pushed."""
        metrics = self.read_metrics(output_uri)
        if metrics is None:
            self.log.warning("the job wrote no %s under %s", self.metrics_file, output_uri)
            return {}
        summary = {k: v for k, v in metrics.items() if k != "history"}
        self.log.info("training metrics: %s", json.dumps(summary, sort_keys=True))
        context["ti"].xcom_push(key="metrics", value=summary)
        return summary

    def on_success(self, context: Context, spec: JobSpec, handle: JobHandle) -> Any:
        output_uri = super().on_success(context, spec, handle)
        summary = self.load_metrics(context, output_uri)
        self.export_to_trackers(context, spec, summary)
        return output_uri

    def export_to_trackers(self, context: Context, spec: JobSpec, summary: dict[str, Any]) -> None:
        """The run to MLflow and TensorBoard when configured; a failure is only a warning."""
        from airflow_provider_trainium.trackers.export import export_training_run
        from airflow_provider_trainium.trackers.settings import TrackerSettings

        config = self.config()
        settings = TrackerSettings.resolve(
            config,
            mlflow_tracking_uri=self.mlflow_tracking_uri,
            mlflow_experiment=self.mlflow_experiment,
            tensorboard_logdir=self.tensorboard_logdir,
        )
        if settings.enabled:
            export_training_run(context, spec, self.prepare(context).compute, config, settings, summary, self.log)


def __getattr__(name: str) -> Any:
    """The former class names (:mod:`airflow_provider_trainium.deprecated_names`)."""
    return deprecated_names.resolve(__name__, name)
