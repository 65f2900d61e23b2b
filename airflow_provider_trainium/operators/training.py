"""``TrainiumTrainingOperator``: a distributed training job whose metrics come back to Airflow.

A job with a compile cache is checked against the cache's manifest before it is submitted, and the cache is recorded
again once the job ended (``compile_manifest``): its entries are code the job loads, and every job may write them.

The artifact helpers and the job spec are imported where a task runs: DAG files load this module while parsed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from airflow.sdk import Context

from airflow_provider_trainium import deprecated_names
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from trainium_trainer import boundary

if TYPE_CHECKING:
    from airflow_provider_trainium.compile_manifest import CacheChanges
    from airflow_provider_trainium.compute.base import ComputeBackend, JobHandle, JobStatus
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig
    from airflow_provider_trainium.neuron.spec import JobSpec
    from airflow_provider_trainium.operators.job_checks import PreSubmitCheck
    from airflow_provider_trainium.operators.prepared_job import PreparedJob


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
        #: the cache's manifest as this try's check found it (None: no cache, or none recorded)
        self._cache_manifest: dict[str, Any] | None = None
        self._cache_changes: CacheChanges | None = None
        #: whether this try recorded the cache already (a compile task does, with its key)
        self._cache_recorded = False

    def pre_execute(self, context: Any) -> None:
        self._cache_manifest, self._cache_changes, self._cache_recorded = None, None, False
        super().pre_execute(context)

    # -- the compile cache: checked before the job, recorded after it ------------------------------------
    #: A training run would compile a removed entry again at run time, on paid instances: refused (a compile
    #: trial accepts it, compiling is what it is for).
    removed_cache_entries_ok = False

    def pre_submit_checks(self) -> list[PreSubmitCheck]:
        """The job's checks, then the compile cache's against its manifest."""
        return [*super().pre_submit_checks(), self.check_compile_cache]

    def artifact_conn(self) -> str:
        """The AWS connection the cache, its key records and its manifest are read with on S3 (the trainium
        connection's; ``file://`` ignores it)."""
        return self.config().aws_conn_id

    def recorded_by(self, context: Context) -> dict[str, Any]:
        ti = context["ti"]
        return {"dag_id": ti.dag_id, "run_id": ti.run_id, "task_id": ti.task_id}

    def check_compile_cache(self, context: Context, prepared: PreparedJob, backend: ComputeBackend) -> None:
        """Refuse the job when an entry of its cache changed (or went missing) since Airflow recorded the cache
        (``compile_manifest.verify`` raises ``CompileCacheChanged``, a ValueError: no retries)."""
        cache = prepared.spec.env.get(boundary.ENV_COMPILE_CACHE_URI)
        if not cache:
            return
        from airflow_provider_trainium import compile_manifest

        manifest, changes = compile_manifest.verify(
            self.config().artifact_root, cache, self.artifact_conn(), removed_ok=self.removed_cache_entries_ok
        )
        self._cache_manifest, self._cache_changes = manifest, changes
        if manifest is None:
            self.unrecorded_cache(cache)
        elif changes.added:
            self.log.info("compile cache %s: %d entr(ies) added since it was recorded (jobs compile at run time "
                          "too), allowed: %s", cache, len(changes.added), ", ".join(changes.added[:5]))  # fmt: skip

    def unrecorded_cache(self, cache: str) -> None:
        """A cache no compile task recorded: a training job uses it unverified."""
        self.log.warning("compile cache %s has no manifest (no compile task recorded it): its entries are unverified",
                         cache)  # fmt: skip

    def finish(self, context: Context, spec: JobSpec, handle: JobHandle, status: JobStatus) -> Any:
        """The job's end, then its cache recorded again, whatever the end: the job itself writes the cache (and on
        local CPU compute rewrites every entry), so the next job is checked against what this one left."""
        try:
            return super().finish(context, spec, handle, status)
        finally:
            self.refresh_cache_manifest(context, spec)

    def refresh_cache_manifest(self, context: Context, spec: JobSpec) -> None:
        cache = spec.env.get(boundary.ENV_COMPILE_CACHE_URI)
        if not cache or self._cache_recorded:
            return
        from airflow_provider_trainium import compile_manifest

        try:
            found = compile_manifest.refresh(
                self.config().artifact_root, cache, self.recorded_by(context), self.artifact_conn()
            )
        except Exception as err:  # the job's own end decides the task; this only warns
            self.log.warning("compile cache %s could not be recorded again (%s): the next job may find its entries "
                             "changed", cache, err)  # fmt: skip
            return
        self._cache_recorded = found is not None

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
